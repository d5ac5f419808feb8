import { describe, expect, it } from 'vitest'
import { ImageRefused, stripImageMetadata } from '../../src/domain/image-metadata.js'

const seg = (marker: number, payload: string | Buffer) => {
  const body = Buffer.isBuffer(payload) ? payload : Buffer.from(payload, 'latin1')
  return Buffer.concat([Buffer.from([0xff, marker, (body.length + 2) >> 8, (body.length + 2) & 0xff]), body])
}
const joined = (image: ReturnType<typeof stripImageMetadata>) => Buffer.concat(image.parts)
const SCAN = Buffer.concat([seg(0xda, Buffer.from([1, 1, 0, 0, 63, 0])), Buffer.from([0x01, 0xff, 0x00, 0xff, 0xd3, 0x02])])

describe('cutting metadata out of JPEG and PNG (domain/image-metadata.ts)', () => {
  it('keeps JFIF, an ICC profile and Adobe APP14; cuts every other APPn, comments and what follows the end of the image', () => {
    const icc = seg(0xe2, 'ICC_PROFILE\0\x01\x01colour')
    const adobe = seg(0xee, 'Adobe\0\x64\0\0\0\0\x01')
    const jpeg = Buffer.concat([
      Buffer.from([0xff, 0xd8]),
      seg(0xe0, 'JFIF\0\x01\x02'),
      seg(0xe1, 'Exif\0\0GPS'),
      seg(0xe2, 'MPF\0not a profile'),
      icc,
      seg(0xed, 'Photoshop 3.0\0IPTC city'),
      adobe,
      seg(0xfe, 'comment'),
      SCAN,
      Buffer.from([0xff, 0xd9]),
      Buffer.from('trailing secret'),
    ])
    const out = stripImageMetadata(jpeg)
    expect(out.type).toBe('image/jpeg')
    expect(out.removed).toEqual(['APP1', 'APP2', 'APP13', 'COM'])
    expect(joined(out)).toEqual(
      Buffer.concat([Buffer.from([0xff, 0xd8]), seg(0xe0, 'JFIF\0\x01\x02'), icc, adobe, SCAN, Buffer.from([0xff, 0xd9])]),
    )
    expect(out.size).toBe(joined(out).length)
  })

  it('finds metadata placed after the first scan (progressive JPEGs have several), and fill bytes before a marker', () => {
    const jpeg = Buffer.concat([
      Buffer.from([0xff, 0xd8]),
      SCAN,
      Buffer.from([0xff, 0xff]),
      seg(0xe1, 'Exif\0\0late GPS'),
      SCAN,
      Buffer.from([0xff, 0xd9]),
    ])
    const out = joined(stripImageMetadata(jpeg))
    expect(out.includes(Buffer.from('late GPS'))).toBe(false)
    expect(out).toEqual(Buffer.concat([Buffer.from([0xff, 0xd8]), SCAN, SCAN, Buffer.from([0xff, 0xd9])]))
  })

  it('refuses what is not a whole JPEG or PNG', () => {
    const refused = (bytes: Buffer) => () => stripImageMetadata(bytes)
    expect(refused(Buffer.from('GIF89a'))).toThrow(ImageRefused)
    expect(refused(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x40, 0x01]))).toThrow(/truncated JPEG/)
    expect(refused(Buffer.concat([Buffer.from([0xff, 0xd8]), SCAN]))).toThrow(/no end-of-image/)
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 1, 0x74, 0x45, 0x58, 0x74])
    expect(refused(png)).toThrow(/PNG/)
  })
})
