import type { TemperatureProfile } from '../../rules/profile.js'
import type { StabilityPlan } from '../../rules/index.js'

/**
 * The profile a delivery is evaluated with: its stored profile, and its items' stability plan
 * (delivery_stability) when they name products, so the rule engine charges their ledger in the same
 * fold (rules/README.md, Stability budgets). Never shown: the delivery shows its stored profile.
 */
export function judgedProfile(profileJson: string, planJson: string | null): TemperatureProfile {
  const profile = JSON.parse(profileJson) as TemperatureProfile
  if (planJson !== null) profile.stability = JSON.parse(planJson) as StabilityPlan
  return profile
}
