import { crc32, deflateSync } from 'node:zlib'

/** A GPS position as a camera writes it in Exif: latitude 41° 52' 30.12" N, recognisable in the bytes. */
export const GPS_MARK = Buffer.from('GPSPOSITION-41N52-30.12', 'latin1')

/**
 * Exif (CIPA DC-008) in a TIFF container: IFD0 with one entry, GPSInfo (0x8825), pointing at a GPS
 * IFD with GPSLatitudeRef "N" and GPSLatitude (3 RATIONALs), and a maker note text carrying GPS_MARK.
 */
function exifWithGps(): Buffer {
  const tiff = Buffer.alloc(120)
  tiff.write('MM', 0, 'latin1')
  tiff.writeUInt16BE(42, 2)
  tiff.writeUInt32BE(8, 4) // IFD0 at 8
  tiff.writeUInt16BE(1, 8) // one entry
  tiff.writeUInt16BE(0x8825, 10) // GPSInfo
  tiff.writeUInt16BE(4, 12) // LONG
  tiff.writeUInt32BE(1, 14)
  tiff.writeUInt32BE(26, 18) // GPS IFD at 26
  tiff.writeUInt32BE(0, 22) // no next IFD
  tiff.writeUInt16BE(2, 26) // two entries
  tiff.writeUInt16BE(0x0001, 28) // GPSLatitudeRef
  tiff.writeUInt16BE(2, 30) // ASCII
  tiff.writeUInt32BE(2, 32)
  tiff.write('N\0', 36, 'latin1')
  tiff.writeUInt16BE(0x0002, 40) // GPSLatitude
  tiff.writeUInt16BE(5, 42) // RATIONAL
  tiff.writeUInt32BE(3, 44)
  tiff.writeUInt32BE(56, 48) // values at 56
  tiff.writeUInt32BE(0, 52)
  for (const [i, [n, d]] of [
    [41, 1],
    [52, 1],
    [3012, 100],
  ].entries()) {
    tiff.writeUInt32BE(n!, 56 + i * 8)
    tiff.writeUInt32BE(d!, 60 + i * 8)
  }
  GPS_MARK.copy(tiff, 80)
  return Buffer.concat([Buffer.from('Exif\0\0', 'latin1'), tiff])
}

const segment = (marker: number, payload: Buffer) => {
  const head = Buffer.alloc(4)
  head[0] = 0xff
  head[1] = marker
  head.writeUInt16BE(payload.length + 2, 2)
  return Buffer.concat([head, payload])
}

/** The parts of a JPEG that draw the picture (tables, frame, scan with stuffed bytes and a restart marker). */
export const JPEG_PICTURE = Buffer.concat([
  segment(0xdb, Buffer.concat([Buffer.from([0]), Buffer.alloc(64, 1)])), // DQT
  segment(0xc0, Buffer.from([8, 0, 1, 0, 1, 1, 1, 0x11, 0])), // SOF0 1×1, one component
  segment(0xc4, Buffer.concat([Buffer.from([0, 1]), Buffer.alloc(15, 0), Buffer.from([0])])), // DHT
  segment(0xda, Buffer.from([1, 1, 0, 0, 63, 0])), // SOS
  Buffer.from([0x12, 0xff, 0x00, 0x34, 0xff, 0xd0, 0x56, 0x78]), // entropy data: a stuffed 0xFF00, RST0
])

/** A JPEG as a phone writes it: JFIF, Exif with GPS, XMP, a comment, then the picture. */
export function jpegWithGps(padding = 0): Buffer {
  return Buffer.concat([
    Buffer.from([0xff, 0xd8]),
    segment(0xe0, Buffer.from('JFIF\0\x01\x01\0\0\x01\0\x01\0\0', 'latin1')),
    segment(0xe1, exifWithGps()),
    segment(
      0xe1,
      Buffer.from(`http://ns.adobe.com/xap/1.0/\0<x:xmpmeta><exif:GPSLatitude>41,52.502N</exif:GPSLatitude></x:xmpmeta>`, 'latin1'),
    ),
    segment(0xfe, Buffer.from('shot at 41.875 -87.624', 'latin1')),
    ...(padding ? [segment(0xe3, Buffer.alloc(Math.min(padding, 65_000), 7))] : []),
    JPEG_PICTURE,
    Buffer.from([0xff, 0xd9]),
  ])
}

const chunk = (type: string, data: Buffer) => {
  const head = Buffer.alloc(8)
  head.writeUInt32BE(data.length, 0)
  head.write(type, 4, 'latin1')
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0)
  return Buffer.concat([head, data, crc])
}

/** A real 2×2 RGB PNG, with eXIf (GPS), tEXt, iTXt (XMP) and tIME chunks unless `plain`. */
export function pngWithGps(plain = false, width = 2, height = 2): Buffer {
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(width, 0)
  ihdr.writeUInt32BE(height, 4)
  ihdr.set([8, 2, 0, 0, 0], 8)
  const rows = Buffer.alloc(height * (1 + width * 3))
  for (let y = 0; y < height; y++) for (let x = 0; x < width * 3; x++) rows[y * (1 + width * 3) + 1 + x] = (x * 40 + y * 90) & 0xff
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    ...(plain
      ? []
      : [
          chunk('eXIf', exifWithGps().subarray(6)),
          chunk('tEXt', Buffer.from('Comment\0shot at 41.875 -87.624', 'latin1')),
          chunk('iTXt', Buffer.from('XML:com.adobe.xmp\0\0\0\0\0<exif:GPSLatitude>41,52.502N</exif:GPSLatitude>', 'latin1')),
          chunk('tIME', Buffer.from([0x07, 0xea, 11, 29, 1, 2, 3])),
        ]),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ])
}
