import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { Page } from 'playwright-core'

type Violation = { id: string; impact: string | null; help: string; nodes: unknown[] }

const source = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

/** Runs axe-core (WCAG 2.x A/AA rules) in the page; evaluated over the DevTools protocol, so the page's CSP stays as it is. */
export default async function axe(page: Page): Promise<Violation[]> {
  await page.evaluate(source)
  return page.evaluate(async () => {
    const result = await (window as unknown as { axe: { run(ctx: Document, opts: object): Promise<{ violations: Violation[] }> } }).axe.run(
      document,
      { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } },
    )
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3) }))
  })
}
