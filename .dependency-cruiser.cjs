// The import boundaries of docs/architecture.md, checked by `npm test` (dependency-cruiser).
// Type-only imports count: a cycle through types is still a cycle for the reader.

/** Modules with I/O or HTTP in them: a pure core (src/domain, rules) imports none of them. */
const IMPURE = [
  '^src/(api|services|store|timeseries|telemetry|webhooks|events|wiring)/',
  '^src/(clock|service|main|listen|logger|metrics)\\.ts$',
  '^broker/',
  '(^|/)node_modules/(hono|@hono|kysely|better-sqlite3|pg|pino|@questdb)/',
]

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import cycle, even through types: move the shared piece into a leaf module.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'pure-core',
      comment: 'src/domain and rules are pure: no store, HTTP, clock or other I/O; callers pass values in.',
      severity: 'error',
      from: { path: '^(src/domain|rules)/' },
      to: { path: IMPURE },
    },
    {
      name: 'edges-not-inward',
      comment:
        'Store, time series, events and webhook delivery are used by the API and the services, never the reverse.',
      severity: 'error',
      from: { path: '^src/(store|timeseries|webhooks|events)/' },
      to: { path: '^src/(api|services)/' },
    },
    {
      name: 'events-before-webhooks',
      comment: 'The outbox (src/events) is read by the webhook dispatcher; it does not know about it.',
      severity: 'error',
      from: { path: '^src/events/' },
      to: { path: '^src/webhooks/' },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import the cruiser cannot resolve would hide its edges from every rule above.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    // ESM-only packages (aedes, p-queue, hono/*) resolve through their "exports" field.
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
  },
}
