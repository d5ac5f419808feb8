import { describe, expect, it } from 'vitest'
import { builtInProfiles, customProfileSchema, ProfileError, resolveProfile } from '../../rules/index.js'

describe('built-in profiles', () => {
  it('are loaded from the JSON data with the SPEC §5 ranges', () => {
    expect(builtInProfiles.refrigerated).toMatchObject({ min_c: 2, max_c: 8, hard_min_c: 0, mkt_max_c: 8 })
    expect(builtInProfiles.frozen).toMatchObject({ min_c: -25, max_c: -10 })
    expect(builtInProfiles.controlled_room).toMatchObject({ min_c: 20, max_c: 25, hard_min_c: 15, hard_max_c: 30, mkt_max_c: 25 })
  })

  it('resolve by name to a copy the caller may change', () => {
    const p = resolveProfile('frozen')
    expect(p).toEqual(builtInProfiles.frozen)
    p.max_c = 99
    expect(builtInProfiles.frozen.max_c).toBe(-10)
  })

  it('reject an unknown name, listing the known ones', () => {
    expect(() => resolveProfile('lukewarm')).toThrow(ProfileError)
    expect(() => resolveProfile('lukewarm')).toThrow(/refrigerated, frozen, controlled_room/)
  })
})

describe('custom profiles', () => {
  it('get the name "custom" and the documented defaults', () => {
    expect(resolveProfile({ min_c: 15, max_c: 25 })).toEqual({
      name: 'custom',
      min_c: 15,
      max_c: 25,
      grace_s: 300,
      max_excursion_s: 1800,
      max_cumulative_s: 3600,
      hard_min_c: null,
      hard_max_c: null,
      mkt_max_c: null,
      max_gap_s: 900,
    })
  })

  it('keep their own name and values, and may turn gap detection off with null', () => {
    const p = resolveProfile({ name: 'biologic-x', min_c: 2, max_c: 6, grace_s: 60, max_gap_s: null, hard_max_c: 12 })
    expect(p).toMatchObject({ name: 'biologic-x', grace_s: 60, max_gap_s: null, hard_max_c: 12 })
  })

  it.each([
    [{ min_c: 8, max_c: 8 }, 'min_c', /below max_c/],
    [{ min_c: 2, max_c: 8, hard_min_c: 3 }, 'hard_min_c', /must not be above min_c/],
    [{ min_c: 2, max_c: 8, hard_max_c: 7 }, 'hard_max_c', /must not be below max_c/],
    [{ min_c: 2, max_c: 8, grace_s: -1 }, 'grace_s', /non-negative/],
    [{ min_c: 2, max_c: 8, max_cumulative_s: -5 }, 'max_cumulative_s', /non-negative/],
    [{ min_c: 2, max_c: 8, grace_s: 600, max_excursion_s: 300 }, 'grace_s', /must not exceed max_excursion_s/],
    [{ min_c: 2, max_c: 8, max_gap_s: 0 }, 'max_gap_s', /positive/],
    [{ min_c: 2, max_c: 8, name: 'refrigerated' }, 'name', /reserved/],
  ])('reject %j with a clear message on %s', (input, field, message) => {
    let error: unknown
    try {
      resolveProfile(input)
    } catch (err) {
      error = err
    }
    expect(error).toBeInstanceOf(ProfileError)
    expect((error as ProfileError).field).toBe(field)
    expect((error as ProfileError).message).toMatch(message)
  })

  it('may repeat a built-in profile verbatim (e.g. an echoed API response)', () => {
    expect(resolveProfile({ ...builtInProfiles.refrigerated })).toEqual(builtInProfiles.refrigerated)
  })
})

describe('customProfileSchema', () => {
  it('accepts what resolveProfile accepts', () => {
    expect(customProfileSchema.safeParse({ min_c: 2, max_c: 8, hard_min_c: 0, mkt_max_c: null }).success).toBe(true)
  })

  it('reports the offending field with the same message as resolveProfile', () => {
    const result = customProfileSchema.safeParse({ min_c: 2, max_c: 8, hard_min_c: 5 })
    expect(result.success).toBe(false)
    expect(result.error!.issues).toEqual([
      expect.objectContaining({ path: ['hard_min_c'], message: 'hard_min_c (5) must not be above min_c (2)' }),
    ])
  })

  it('rejects unknown members and wrong types', () => {
    expect(customProfileSchema.safeParse({ min_c: 2, max_c: 8, colour: 'blue' }).success).toBe(false)
    expect(customProfileSchema.safeParse({ min_c: '2', max_c: 8 }).success).toBe(false)
  })

  it('documents every member for the OpenAPI document', () => {
    const json = customProfileSchema.toJSONSchema() as { properties: Record<string, { description?: string }> }
    for (const [name, prop] of Object.entries(json.properties)) expect(prop.description, name).toBeTruthy()
  })
})
