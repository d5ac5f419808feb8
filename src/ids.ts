import { monotonicFactory } from 'ulid'

/** SPEC §2: opaque, prefixed ids. A ULID body makes them sortable by creation time, so lists page by id. */
export type IdPrefix = 'ph' | 'rx' | 'dl' | 'tt' | 'fl' | 'dr' | 'wh' | 'evt' | 'cl' | 'us' | 'req' | 'msg' | 'att' | 'key'

const ulid = monotonicFactory()

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${ulid().toLowerCase()}`
}
