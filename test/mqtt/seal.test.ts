import { describe, expect, it } from 'vitest'
import { PasswordSeal } from '../../src/mqtt/seal.js'

/** A tote password waiting for the broker (src/mqtt/broker-accounts.ts) is sealed, never kept in the clear. */
describe('the seal on a tote password waiting for the broker', () => {
  const seal = new PasswordSeal('the-service-broker-password')

  it('opens what it sealed, and the sealed text does not contain the password', () => {
    const sealed = seal.seal('tt_a', 'tp_secret-value')
    expect(sealed).not.toContain('tp_secret-value')
    expect(seal.seal('tt_a', 'tp_secret-value')).not.toBe(sealed) // a fresh IV each time
    expect(seal.open('tt_a', sealed)).toBe('tp_secret-value')
  })

  it('does not open under another broker password, for another tote, or once altered', () => {
    const sealed = seal.seal('tt_a', 'tp_secret-value')
    expect(() => new PasswordSeal('another-password').open('tt_a', sealed)).toThrow()
    expect(() => seal.open('tt_b', sealed)).toThrow()
    const parts = sealed.split('.')
    parts[3] = Buffer.from('tampered').toString('base64url')
    expect(() => seal.open('tt_a', parts.join('.'))).toThrow()
  })
})
