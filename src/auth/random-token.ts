import { randomFillSync } from 'node:crypto'

// randomBytes(32) is one call into the CSPRNG per token, about 25 times the cost of copying 32
// bytes out of a buffer that the same CSPRNG refills 128 tokens at a time (node's randomUUID
// buffers the same way). Every byte is handed out once, then overwritten by the next refill.
const POOL_BYTES = 4_096
const pool = Buffer.alloc(POOL_BYTES)
let offset = POOL_BYTES

/** `bytes` fresh random bytes (at most POOL_BYTES), base64url: the body of a refresh token. */
export function randomToken(bytes: number): string {
  if (bytes > POOL_BYTES) throw new RangeError(`randomToken: at most ${POOL_BYTES} bytes`)
  if (offset + bytes > POOL_BYTES) {
    randomFillSync(pool)
    offset = 0
  }
  const token = pool.toString('base64url', offset, offset + bytes)
  offset += bytes
  return token
}
