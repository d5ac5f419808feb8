import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startChildService, type ChildService } from '../helpers/child-service.js'

/**
 * Every ```sh block of README.md and docs/*.md runs as pasted, in order per file, with bash,
 * against a live service: the newcomer's first hour. A block that cannot run here (a real
 * QuestDB, systemd, a benchmark of minutes) carries `<!-- not run: reason -->` on the line
 * before it; those are listed in the output. Like the tour's reader, the test sets BASE,
 * CLIENT_ID and CLIENT_SECRET and drops the lines of a block that assign them placeholders.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const FILES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
]
const NOT_RUN = /^<!--\s*not run:\s*(.+?)\s*-->$/
const USER_VALUES = /^(BASE|CLIENT_ID|CLIENT_SECRET)=/

type Block = { file: string; line: number; code: string; notRun: string | null }

function blocksOf(file: string): Block[] {
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n')
  const blocks: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== '```sh') continue
    const end = lines.indexOf('```', i + 1)
    let before = i - 1
    while (before >= 0 && lines[before]!.trim() === '') before--
    const notRun = NOT_RUN.exec(lines[before]?.trim() ?? '')?.[1] ?? null
    blocks.push({ file, line: i + 1, code: lines.slice(i + 1, end).join('\n'), notRun })
    i = end
  }
  return blocks
}

let service: ChildService
let scratch: string

beforeAll(async () => {
  service = await startChildService()
  scratch = mkdtempSync(join(tmpdir(), 'rxtrace-docs-'))
}, 90_000)
afterAll(async () => {
  await service?.dispose()
  if (scratch) rmSync(scratch, { recursive: true, force: true })
})

/** Runs a file's blocks in one bash, each sourced in turn so its variables carry to the next; stops at the first failing command. */
function runBlocks(blocks: Block[], dir: string) {
  const script = ['set -Eeo pipefail']
  blocks.forEach((block, n) => {
    const file = join(dir, `block-${n}.sh`)
    writeFileSync(
      file,
      block.code
        .split('\n')
        .filter((l) => !USER_VALUES.test(l))
        .join('\n') + '\n',
    )
    script.push(`trap 'echo "${block.file}:${block.line}: block failed at its line $LINENO: $BASH_COMMAND" >&2' ERR`, `source ${file}`)
  })
  writeFileSync(join(dir, 'run.sh'), script.join('\n') + '\n')
  return new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn('bash', [join(dir, 'run.sh')], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        BASE: service.baseUrl,
        CLIENT_ID: 'cl_reliability_admin',
        CLIENT_SECRET: 'reliability-admin-secret-0123456789',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()))
    child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()))
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    child.once('exit', (code) => (clearTimeout(timer), resolve({ code, out })))
  })
}

describe('the examples in README.md and docs/ run as pasted', () => {
  const all = FILES.flatMap(blocksOf)

  it('lists the blocks that do not run here, each with its reason', () => {
    const skipped = all.filter((b) => b.notRun !== null)
    console.log(`not run (${skipped.length}):\n${skipped.map((b) => `  ${b.file}:${b.line}: ${b.notRun}`).join('\n')}`)
    expect(all.filter((b) => b.notRun === null).length).toBeGreaterThan(5)
  })

  for (const file of FILES) {
    const runnable = blocksOf(file).filter((b) => b.notRun === null)
    if (runnable.length === 0) continue
    it(`${file}: ${runnable.length} block(s)`, async () => {
      const dir = mkdtempSync(join(scratch, 'run-'))
      const run = await runBlocks(runnable, dir)
      expect(run.code, run.out).toBe(0)
      expect(run.out).not.toMatch(/"status":\s*(4\d\d|5\d\d)\b/) // a problem+json answer printed whole is a failed step
    }, 90_000)
  }
})
