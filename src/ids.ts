import { randomFillSync } from 'node:crypto'
import { monotonicFactory } from 'ulid'

/** Opaque, prefixed ids (docs/api.md, IDs). A ULID body makes them sortable by creation time, so lists page by id. */
export type IdPrefix =
  | 'ph'
  | 'rx'
  | 'dl'
  | 'tt'
  | 'fl'
  | 'dr'
  | 'wh'
  | 'evt'
  | 'cl'
  | 'us'
  | 'req'
  | 'msg'
  | 'att'
  | 'key'
  | 'whk'
  | 'pr'
  | 'as'
  | 'sg'
  | 'al'
  | 'at'

// ulid's default PRNG calls randomBytes(1) per character; drawing from a refilled buffer of
// the same CSPRNG costs a fraction of that on the request path.
const pool = Buffer.alloc(4_096)
let offset = pool.length
function randomFraction(): number {
  if (offset >= pool.length) {
    randomFillSync(pool)
    offset = 0
  }
  return pool[offset++]! / 256
}

const ulid = monotonicFactory(randomFraction)

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${ulid().toLowerCase()}`
}
