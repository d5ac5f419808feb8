/** A small deterministic pseudo-random sequence (mulberry32): a seed gives the same values every run, so a failure can be replayed. The simulators' own. */
export { seededRandom as mulberry32 } from '../../simulators/prng.js'
