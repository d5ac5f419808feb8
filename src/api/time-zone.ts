import { z } from './openapi.js'

/** Whether the runtime knows `tz` as a time zone (the IANA database Node ships with). */
function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz })
    return true
  } catch {
    return false
  }
}

/** An IANA time zone name, such as America/New_York; anything else is a 422 at its pointer. */
export const timeZoneSchema = z.string().refine(isTimeZone, 'must be an IANA time zone such as America/New_York')
