// Temperature profiles (rules/README.md): the per-prescription thresholds the rule engine judges against.
// The built-in profiles are data in ./profiles/*.json; their values are explained in ./README.md.
import refrigerated from './profiles/refrigerated.json' with { type: 'json' }
import frozen from './profiles/frozen.json' with { type: 'json' }
import controlledRoom from './profiles/controlled_room.json' with { type: 'json' }
import type { TemperatureProfile } from './temperature-profile.js'

export type { TemperatureProfile }

export type BuiltInProfileName = 'refrigerated' | 'frozen' | 'controlled_room'

export type CustomProfileInput = Partial<TemperatureProfile> & { min_c: number; max_c: number }

/** A profile that cannot be used; `field` names the offending member (null: the whole input). */
export class ProfileError extends Error {
  override readonly name = 'ProfileError'
  constructor(
    message: string,
    readonly field: keyof TemperatureProfile | null = null,
  ) {
    super(message)
  }
}

/**
 * Defaults for the optional members of a custom profile: the refrigerated durations (the most
 * common cold-chain case), no hard limits, no MKT limit. Documented in ./README.md.
 */
export const CUSTOM_PROFILE_DEFAULTS = Object.freeze({
  name: 'custom',
  grace_s: 300,
  max_excursion_s: 1800,
  max_cumulative_s: 3600,
  hard_min_c: null,
  hard_max_c: null,
  mkt_max_c: null,
  max_gap_s: 900,
} satisfies Omit<TemperatureProfile, 'min_c' | 'max_c'>)

/** Returns the problem with a profile, or null when it is usable. Shared by resolveProfile and the zod schema. */
function profileProblem(p: TemperatureProfile): ProfileError | null {
  if (typeof p.name !== 'string' || p.name.trim() === '') return new ProfileError('name must be a non-empty string', 'name')
  for (const field of ['min_c', 'max_c'] as const) {
    if (!Number.isFinite(p[field])) return new ProfileError(`${field} must be a finite number`, field)
  }
  if (p.min_c >= p.max_c) return new ProfileError(`min_c (${p.min_c}) must be below max_c (${p.max_c})`, 'min_c')
  for (const field of ['grace_s', 'max_excursion_s', 'max_cumulative_s'] as const) {
    const v = p[field]
    if (!Number.isFinite(v) || v < 0) return new ProfileError(`${field} must be a non-negative number of seconds`, field)
  }
  if (p.grace_s > p.max_excursion_s) {
    // Otherwise an excursion would break the cold chain before it is even announced.
    return new ProfileError(`grace_s (${p.grace_s}) must not exceed max_excursion_s (${p.max_excursion_s})`, 'grace_s')
  }
  if (p.max_gap_s !== null && (!Number.isFinite(p.max_gap_s) || p.max_gap_s <= 0)) {
    return new ProfileError('max_gap_s must be a positive number of seconds or null', 'max_gap_s')
  }
  for (const field of ['hard_min_c', 'hard_max_c', 'mkt_max_c'] as const) {
    const v = p[field]
    if (v !== null && !Number.isFinite(v)) return new ProfileError(`${field} must be a finite number or null`, field)
  }
  if (p.hard_min_c !== null && p.hard_min_c > p.min_c) {
    return new ProfileError(`hard_min_c (${p.hard_min_c}) must not be above min_c (${p.min_c})`, 'hard_min_c')
  }
  if (p.hard_max_c !== null && p.hard_max_c < p.max_c) {
    return new ProfileError(`hard_max_c (${p.hard_max_c}) must not be below max_c (${p.max_c})`, 'hard_max_c')
  }
  return null
}

function pickProfile(input: CustomProfileInput): TemperatureProfile {
  const d = CUSTOM_PROFILE_DEFAULTS
  return {
    name: input.name ?? d.name,
    min_c: input.min_c,
    max_c: input.max_c,
    grace_s: input.grace_s ?? d.grace_s,
    max_excursion_s: input.max_excursion_s ?? d.max_excursion_s,
    max_cumulative_s: input.max_cumulative_s ?? d.max_cumulative_s,
    hard_min_c: input.hard_min_c ?? d.hard_min_c,
    hard_max_c: input.hard_max_c ?? d.hard_max_c,
    mkt_max_c: input.mkt_max_c ?? d.mkt_max_c,
    max_gap_s: input.max_gap_s === undefined ? d.max_gap_s : input.max_gap_s,
  }
}

function loadBuiltIn(data: unknown): TemperatureProfile {
  const profile = pickProfile(data as CustomProfileInput)
  const problem = profileProblem(profile)
  if (problem) throw new ProfileError(`built-in profile ${profile.name}: ${problem.message}`, problem.field)
  return Object.freeze(profile)
}

export const builtInProfiles: Readonly<Record<BuiltInProfileName, Readonly<TemperatureProfile>>> = Object.freeze({
  refrigerated: loadBuiltIn(refrigerated),
  frozen: loadBuiltIn(frozen),
  controlled_room: loadBuiltIn(controlledRoom),
})

export function isBuiltInProfileName(name: string): name is BuiltInProfileName {
  return Object.hasOwn(builtInProfiles, name)
}

function sameProfile(a: TemperatureProfile, b: TemperatureProfile): boolean {
  return (Object.keys(a) as (keyof TemperatureProfile)[]).every((k) => a[k] === b[k])
}

/**
 * A built-in profile by name, or a custom profile object completed with CUSTOM_PROFILE_DEFAULTS.
 * Always returns a fresh object with exactly the TemperatureProfile members (unknown members of
 * the input are dropped). Throws ProfileError when the profile is unusable.
 */
export function resolveProfile(input: string | CustomProfileInput): TemperatureProfile {
  if (typeof input === 'string') {
    if (!isBuiltInProfileName(input)) {
      const known = Object.keys(builtInProfiles).join(', ')
      throw new ProfileError(`unknown temperature profile '${input}'; expected one of ${known} or a custom object`)
    }
    return { ...builtInProfiles[input] }
  }
  if (input === null || typeof input !== 'object') {
    throw new ProfileError('temperature profile must be a built-in name or an object')
  }
  const profile = pickProfile(input)
  const problem = profileProblem(profile)
  if (problem) throw problem
  // A custom object may not pass itself off as a built-in profile with different thresholds:
  // pharmacists read the name and trust the numbers behind it.
  if (isBuiltInProfileName(profile.name) && !sameProfile(profile, builtInProfiles[profile.name])) {
    throw new ProfileError(`name '${profile.name}' is reserved for the built-in profile; choose another name`, 'name')
  }
  return profile
}
