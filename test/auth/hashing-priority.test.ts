import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { HashingThread } from '../../src/auth/hashing-thread.js'

// A person at the signing dialog does not wait behind a burst of sign-ins: the hashing thread
// takes a queued signature's hash before every sign-in hash still waiting (docs/performance.md).
describe('the password hashing thread', () => {
  it('hashes a signature before the sign-ins queued ahead of it, and every job still completes', async () => {
    const thread = new HashingThread()
    const job = () => ({ password: 'pw', salt: randomBytes(16), keyBytes: 32, N: 2 ** 12, r: 8, p: 1, maxmem: 2 ** 25 })
    const done: string[] = []
    const signIns = Array.from({ length: 6 }, (_, i) => thread.scrypt(job(), 'sign-in').then(() => void done.push(`sign-in ${i}`)))
    const signature = thread.scrypt(job(), 'signature').then(() => void done.push('signature'))
    await Promise.all([...signIns, signature])
    // The first sign-in was already on the thread; the signature comes right after it.
    expect(done.slice(0, 2)).toEqual(['sign-in 0', 'signature'])
    expect(done).toHaveLength(7)
  })
})
