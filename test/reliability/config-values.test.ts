import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../../src/config.js'

describe('configuration values', () => {
  it('takes a blank value as unset, as an empty one: not as 0, which would turn expiry off', () => {
    const config = loadConfig({ RETENTION_INTERVAL_S: ' ', POSITION_RETENTION_DAYS: '\t', RETENTION_UNBOUND_DAYS: '' })
    expect(config.RETENTION_INTERVAL_S).toBe(300)
    expect(config.POSITION_RETENTION_DAYS).toBe(loadConfig({}).POSITION_RETENTION_DAYS)
    expect(config.POSITION_RETENTION_DAYS).toBeGreaterThan(0)
    expect(config.RETENTION_UNBOUND_DAYS).toBe(7)
  })

  it('refuses a records window shorter than the idle readings’ one, naming RETENTION_RECORDS_DAYS', () => {
    expect(() => loadConfig({ RETENTION_RECORDS_DAYS: '1' })).toThrow(ConfigError)
    expect(() => loadConfig({ RETENTION_RECORDS_DAYS: '1' })).toThrow(
      /^invalid configuration: RETENTION_RECORDS_DAYS="1": 1 day is shorter than RETENTION_UNBOUND_DAYS=7;/,
    )
    expect(loadConfig({ RETENTION_RECORDS_DAYS: '1', RETENTION_UNBOUND_DAYS: '1' }).RETENTION_RECORDS_DAYS).toBe(1)
    // Left at its default (2190) under a longer idle window: the line says which value it took.
    expect(() => loadConfig({ RETENTION_UNBOUND_DAYS: '3000' })).toThrow(
      /RETENTION_RECORDS_DAYS="": 2190 days is shorter than RETENTION_UNBOUND_DAYS=3000/,
    )
  })
})
