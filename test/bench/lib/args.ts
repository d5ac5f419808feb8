import { parseArgs, type ParseArgsConfig } from 'node:util'

type Options = NonNullable<ParseArgsConfig['options']>

/**
 * A benchmark's command line: node's parseArgs (strict), plus `--help`/`-h`, which prints the
 * usage built from the options and their defaults and exits 0. A bad option is one line on
 * stderr and exit code 2, not a stack trace.
 */
export function parseBenchArgs<O extends Options>(
  script: string,
  summary: string,
  options: O,
  describe: Partial<Record<keyof O, string>> = {},
) {
  try {
    const parsed = parseArgs({
      options: { ...options, help: { type: 'boolean', short: 'h', default: false } },
      strict: true,
      allowPositionals: false,
    })
    if ((parsed.values as Record<string, unknown>).help) {
      process.stdout.write(usage(script, summary, options, describe))
      process.exit(0)
    }
    return parsed.values as ReturnType<typeof parseArgs<{ options: O }>>['values']
  } catch (error) {
    process.stderr.write(`${script}: ${(error as Error).message.split('\n')[0]} (see npm run ${script} -- --help)\n`)
    process.exit(2)
  }
}

function usage(script: string, summary: string, options: Options, describe: Record<string, string | undefined>): string {
  const lines = Object.entries(options).map(([name, o]) => {
    const flag = o.type === 'boolean' ? `--${name}` : `--${name} ${name.includes('seconds') || name.endsWith('-s') ? 'S' : 'N'}`
    const def = o.type === 'string' && o.default !== undefined && o.default !== '' ? ` (default ${String(o.default)})` : ''
    return `  ${flag.padEnd(24)}${describe[name] ?? ''}${def}`
  })
  return [`Usage: npm run ${script} -- [options]`, '', summary, '', 'Options:', ...lines, `  ${'--help'.padEnd(24)}this text`, ''].join(
    '\n',
  )
}
