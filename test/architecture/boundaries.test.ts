import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { cruise, type ICruiseResult } from 'dependency-cruiser'
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options'
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config'
import { afterAll, describe, expect, it } from 'vitest'

// The same rules `npm test` runs through the depcruise command; here they are shown to bite.
const ROOT = resolve(import.meta.dirname, '../..')
const CONFIG = join(ROOT, '.dependency-cruiser.cjs')

type Violation = { rule: string; from: string; to: string }

async function cruiseTree(baseDir: string, roots: string[]): Promise<ICruiseResult> {
  const options = await extractDepcruiseOptions(CONFIG)
  const tsConfig = extractTSConfig(join(ROOT, 'tsconfig.json'))
  const { output } = await cruise(roots, { ...options, baseDir }, {}, { tsConfig })
  return output as ICruiseResult
}

const violations = (result: ICruiseResult): Violation[] =>
  result.summary.violations.map((v) => ({ rule: v.rule.name, from: v.from, to: v.to }))

/**
 * A cycle between folders (src/api, src/services, rules, …) that the file rules cannot see. A
 * file directly in src/ (clock.ts, errors.ts, the composition root service.ts) is its own node.
 */
function folderCycle(result: ICruiseResult): string[] | null {
  const folderOf = (path: string) => path.match(/^src\/[^/]+(?=\/)/)?.[0] ?? path.match(/^(?!src\/)[^/]+(?=\/)/)?.[0] ?? path
  const edges = new Map<string, Set<string>>()
  for (const module of result.modules) {
    const from = folderOf(module.source)
    if (!from || module.source.includes('node_modules')) continue
    for (const dependency of module.dependencies) {
      const to = folderOf(dependency.resolved)
      if (!to || to === from || dependency.resolved.includes('node_modules')) continue
      edges.set(from, (edges.get(from) ?? new Set()).add(to))
    }
  }
  // Depth-first search; the path on the stack when a grey folder is met again is the cycle.
  const state = new Map<string, 'grey' | 'black'>()
  const stack: string[] = []
  const visit = (folder: string): string[] | null => {
    if (state.get(folder) === 'black') return null
    if (state.get(folder) === 'grey') return [...stack.slice(stack.indexOf(folder)), folder]
    state.set(folder, 'grey')
    stack.push(folder)
    for (const next of edges.get(folder) ?? []) {
      const cycle = visit(next)
      if (cycle) return cycle
    }
    stack.pop()
    state.set(folder, 'black')
    return null
  }
  for (const folder of edges.keys()) {
    const cycle = visit(folder)
    if (cycle) return cycle
  }
  return null
}

describe('import boundaries', () => {
  const planted = mkdtempSync(join(tmpdir(), 'rxtrace-boundaries-'))
  afterAll(() => rmSync(planted, { recursive: true, force: true }))

  const plant = (files: Record<string, string>) => {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(planted, path)), { recursive: true })
      writeFileSync(join(planted, path), text)
    }
  }

  it('the source tree keeps every rule and has no cycle between folders', async () => {
    const result = await cruiseTree(ROOT, ['src', 'rules', 'broker'])
    expect(violations(result)).toEqual([])
    expect(folderCycle(result)).toBeNull()
    expect(result.summary.totalCruised).toBeGreaterThan(100)
  }, 120_000)

  it('reports a planted cycle, a planted impure domain import and a planted edge importing a service', async () => {
    plant({
      'src/api/a.ts': "import type { B } from './b.js'\nexport type A = { b?: B }\n",
      'src/api/b.ts': "import type { A } from './a.js'\nexport type B = { a?: A }\n",
      'src/domain/rule.ts': "import { now } from '../clock.js'\nexport const at = now()\n",
      'src/clock.ts': 'export const now = () => 0\n',
      'src/webhooks/send.ts': "import { register } from '../services/register.js'\nexport const send = register\n",
      'src/services/register.ts': 'export const register = () => undefined\n',
    })
    const result = await cruiseTree(planted, ['src'])
    expect(violations(result)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ rule: 'no-circular', from: 'src/api/a.ts', to: 'src/api/b.ts' }),
        { rule: 'pure-core', from: 'src/domain/rule.ts', to: 'src/clock.ts' },
        { rule: 'edges-not-inward', from: 'src/webhooks/send.ts', to: 'src/services/register.ts' },
      ]),
    )
  }, 60_000)

  it('finds a cycle between folders that no single file closes', async () => {
    plant({
      'src/services/orders.ts': "import { sign } from '../webhooks/sign.js'\nexport const order = sign\n",
      'src/webhooks/sign.ts': "import { tenantOf } from '../services/tenants.js'\nexport const sign = tenantOf\n",
      'src/services/tenants.ts': 'export const tenantOf = () => undefined\n',
    })
    const result = await cruiseTree(planted, ['src/services/orders.ts', 'src/webhooks/sign.ts'])
    expect(violations(result).filter((v) => v.rule === 'no-circular')).toEqual([])
    expect(folderCycle(result)).toEqual(expect.arrayContaining(['src/services', 'src/webhooks']))
  }, 60_000)
})
