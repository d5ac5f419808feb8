import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const read = (file: string) => readFileSync(`${ROOT}${file}`, 'utf8')

/**
 * The docs tell operators to run node themselves under systemd or in a container: the command
 * they give must carry `npm start`'s node flags, or a deployment runs without them (V8's young
 * generation sized for the readings in flight: a quarter less CPU a reading).
 */
describe('the node command the docs give', () => {
  const start = (JSON.parse(read('package.json')) as { scripts: { start: string } }).scripts.start
  const flags = /^exec node (.*)--import tsx src\/main\.ts$/.exec(start)?.[1]?.trim().split(' ') ?? []

  it("carries npm start's node flags wherever it is written out", () => {
    expect(flags).toContain('--max-semi-space-size=64')
    for (const file of ['README.md', 'docs/operations.md']) {
      // A command (or exec-form array) that starts the service: node … src/main.ts, across one line break at most.
      const commands = read(file)
        .replace(/\n\s*/g, ' ')
        .match(/node(?:`?\s|",\s)[^`]*?src\/main\.ts/g)
      expect(commands, file).not.toBeNull()
      for (const command of commands!) for (const flag of flags) expect(command.replace(/",\s"/g, ' '), file).toContain(flag)
    }
  })
})
