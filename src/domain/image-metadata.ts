/**
 * Images as proof of delivery carry only their pixels: the type is read from the bytes (never
 * from a header), and what a camera writes beside the picture (where and when it was taken, the
 * device, comments) is cut out before anything is stored or hashed. Pure: bytes in, the kept
 * parts of the same bytes out (subarrays, nothing copied), or a refusal saying what is wrong.
 */

export type ImageType = 'image/jpeg' | 'image/png'

/** ISO/IEC 10918-1 (JPEG): SOI followed by a marker; PNG (ISO/IEC 15948 §5.2): the 8-byte signature. */
const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]

/** The type of an image by its first bytes; null when it is neither a JPEG nor a PNG. */
function sniffImageType(head: Uint8Array): ImageType | null {
  if (head.length >= 3 && head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return 'image/jpeg'
  if (head.length >= PNG_SIGNATURE.length && PNG_SIGNATURE.every((b, i) => head[i] === b)) return 'image/png'
  return null
}

export class ImageRefused extends Error {}

export type StrippedImage = { type: ImageType; parts: Uint8Array[]; size: number; removed: string[] }

/** The image without its metadata; throws ImageRefused for bytes that are not a whole JPEG or PNG. */
export function stripImageMetadata(bytes: Uint8Array): StrippedImage {
  const type = sniffImageType(bytes)
  if (type === 'image/jpeg') return jpegWithout(bytes)
  if (type === 'image/png') return pngWithout(bytes)
  throw new ImageRefused('is neither a JPEG nor a PNG image')
}

// JPEG application segments kept: APP0 (JFIF, density), APP2 when it is an ICC colour profile, APP14
// (Adobe: how to read CMYK). Every other APPn (APP1 is Exif, with GPS, and XMP) and COM are cut.
const APP0 = 0xe0
const APP2 = 0xe2
const APP14 = 0xee
const COM = 0xfe
const SOS = 0xda
const EOI = 0xd9
const ICC = 'ICC_PROFILE\0'

function jpegWithout(b: Uint8Array): StrippedImage {
  const parts: Uint8Array[] = [b.subarray(0, 2)] // SOI
  const removed: string[] = []
  let i = 2
  for (;;) {
    // ITU-T T.81 §B.1.1.2: any marker may be preceded by fill bytes 0xFF.
    if (i >= b.length || b[i] !== 0xff) throw new ImageRefused('is a damaged JPEG: a segment does not start with a marker')
    while (b[i] === 0xff) i++
    const marker = b[i++]!
    if (marker === EOI) {
      parts.push(Uint8Array.of(0xff, EOI))
      break
    }
    if (i + 2 > b.length) throw new ImageRefused('is a truncated JPEG')
    const length = (b[i]! << 8) | b[i + 1]!
    const end = i + length
    if (length < 2 || end > b.length) throw new ImageRefused('is a truncated JPEG: a segment runs past its end')
    const segment = b.subarray(i - 2, end)
    if (isMetadata(marker, b.subarray(i + 2, end))) removed.push(marker === COM ? 'COM' : `APP${marker - APP0}`)
    else parts.push(segment)
    i = end
    if (marker === SOS) {
      // Entropy-coded data: up to the next marker, an 0xFF followed by neither a stuffed 0x00 nor
      // RSTn (T.81 §B.1.1.5); 0xFF 0xFF is a fill byte before a marker, so it ends the data too.
      const start = i
      while (i < b.length && !(b[i] === 0xff && i + 1 < b.length && b[i + 1] !== 0 && (b[i + 1]! < 0xd0 || b[i + 1]! > 0xd7))) i++
      if (i >= b.length) throw new ImageRefused('is a truncated JPEG: it has no end-of-image marker')
      parts.push(b.subarray(start, i))
    }
  }
  return { type: 'image/jpeg', parts, size: parts.reduce((n, p) => n + p.length, 0), removed }
}

function isMetadata(marker: number, payload: Uint8Array): boolean {
  if (marker === COM) return true
  if (marker < APP0 || marker > 0xef) return false
  if (marker === APP0 || marker === APP14) return false
  if (marker === APP2) return !startsWith(payload, ICC)
  return true
}

// PNG ancillary chunks that describe rather than draw: eXIf (Exif, with GPS), tEXt/zTXt/iTXt
// (free text, XMP), tIME (when it was last changed).
const PNG_METADATA = new Set(['eXIf', 'tEXt', 'zTXt', 'iTXt', 'tIME'])

function pngWithout(b: Uint8Array): StrippedImage {
  const parts: Uint8Array[] = [b.subarray(0, PNG_SIGNATURE.length)]
  const removed: string[] = []
  let i = PNG_SIGNATURE.length
  let first = true
  for (;;) {
    // ISO/IEC 15948 §5.3: length (4, big-endian, of the data), type (4), data, CRC (4).
    if (i + 12 > b.length) throw new ImageRefused('is a truncated PNG: it has no IEND chunk')
    const length = ((b[i]! << 24) >>> 0) + (b[i + 1]! << 16) + (b[i + 2]! << 8) + b[i + 3]!
    const type = String.fromCharCode(b[i + 4]!, b[i + 5]!, b[i + 6]!, b[i + 7]!)
    const end = i + 12 + length
    if (!/^[A-Za-z]{4}$/.test(type) || end > b.length) throw new ImageRefused('is a damaged PNG: a chunk runs past its end')
    if (first && type !== 'IHDR') throw new ImageRefused('is a damaged PNG: IHDR is not its first chunk')
    first = false
    if (PNG_METADATA.has(type)) removed.push(type)
    else parts.push(b.subarray(i, end))
    i = end
    if (type === 'IEND') break
  }
  return { type: 'image/png', parts, size: parts.reduce((n, p) => n + p.length, 0), removed }
}

function startsWith(bytes: Uint8Array, text: string): boolean {
  if (bytes.length < text.length) return false
  for (let k = 0; k < text.length; k++) if (bytes[k] !== text.charCodeAt(k)) return false
  return true
}
