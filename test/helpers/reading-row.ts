import type { ReadingRow } from '../../src/timeseries/sink.js'

/** A stored reading as the sinks and the cold-chain monitor see it: 5 °C, no extras, received at its ts, unless `over` says otherwise. */
export function readingRow(over: Partial<ReadingRow> & Pick<ReadingRow, 'tote_id' | 'ts'>): ReadingRow {
  return {
    delivery_id: null,
    rx_id: null,
    temp_c: 5,
    battery: null,
    humidity: null,
    lat: null,
    lng: null,
    seq: null,
    received_at: over.ts,
    late: false,
    ...over,
  }
}
