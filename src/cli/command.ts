import type { Clock } from '../clock.js'
import type { Config } from '../config.js'
import type { EntityStore } from '../store/database.js'
import type { SecretBox } from '../store/secret-box.js'
import type { Options } from './usage.js'

/** What a command may use: the configuration, the clock, the entity store (opened on first use) and stderr. */
export type CliContext = {
  config: Config
  clock: Clock
  store(): Promise<EntityStore>
  /** The key-encryption keys (SECRETS_KEY…) that seal the store's secrets; opens the store first. */
  secrets(): Promise<SecretBox>
  /** A line for the operator on stderr, so stdout stays one JSON document a script can pipe into jq. */
  note(line: string): void
}

type Values = Record<string, string | boolean | (string | boolean)[] | undefined>

/** One CLI command: how it is called, how it is explained, and what it does. Its result is printed as JSON. */
export type Command = {
  name: string
  synopsis: string
  summary: string
  /** Lines explaining each option, shown by `<command> --help`. */
  help: string[]
  options: Options
  positionals: string[]
  /** Whether the command may create a store that does not exist yet (only `store init`). */
  createsStore?: boolean
  run(ctx: CliContext, values: Values, positionals: string[]): Promise<unknown>
}
