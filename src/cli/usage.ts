import { parseArgs, type ParseArgsConfig } from 'node:util'
import { allScopes } from '../auth/scopes.js'
import { parseDuration } from '../config.js'

/** A mistake in the command line: one line on stderr, exit code 2 (the usual "misuse" status). */
export class UsageError extends Error {}

export type Options = NonNullable<ParseArgsConfig['options']>

/** node:util parseArgs in strict mode, its TypeErrors turned into one-line usage errors. */
export function parse(args: string[], options: Options, positionals: string[]) {
  let parsed
  try {
    parsed = parseArgs({ args, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true })
  } catch (error) {
    throw new UsageError(shorten((error as Error).message))
  }
  if (parsed.values.help) return { help: true as const, values: parsed.values, positionals: parsed.positionals }
  if (parsed.positionals.length > positionals.length)
    throw new UsageError(`unexpected argument "${parsed.positionals[positionals.length]}"`)
  const missing = positionals[parsed.positionals.length]
  if (missing) throw new UsageError(`missing <${missing}>`)
  return { help: false as const, values: parsed.values, positionals: parsed.positionals }
}

// parseArgs explains how to pass a positional that starts with "-" after its first sentence; one sentence is enough here.
function shorten(message: string): string {
  const missingValue = /^Option '(-\w, )?(--[\w-]+)(?: <value>)?' argument (missing|is ambiguous)/.exec(message)
  if (missingValue) return `${missingValue[2]} needs a value`
  const first = message.split(/\.\s/)[0]!.replace(/\.$/, '')
  return first.charAt(0).toLowerCase() + first.slice(1)
}

/** `--overlap 24h` → seconds, within [0, maxS]. */
export function durationSeconds(option: string, text: string, maxS: number): number {
  let ms: number
  try {
    ms = parseDuration(text)
  } catch {
    throw new UsageError(`--${option} "${text}" is not a duration like 30s, 5m, 24h or 7d`)
  }
  const seconds = Math.round(ms / 1_000)
  if (seconds > maxS) throw new UsageError(`--${option} ${text} is longer than the maximum of ${maxS / 86_400} days`)
  return seconds
}

/** A space-separated scope list where every scope is one of `allScopes` (src/auth/scopes.ts). */
export function scopeList(text: string): string {
  const scopes = text.split(/\s+/).filter(Boolean)
  if (scopes.length === 0) throw new UsageError('--scope is empty; name at least one scope, or leave --scope out for all of them')
  const unknown = scopes.filter((s) => !(allScopes as readonly string[]).includes(s))
  if (unknown.length) throw new UsageError(`--scope: unknown scope "${unknown[0]}" (known: ${allScopes.join(' ')})`)
  return [...new Set(scopes)].join(' ')
}
