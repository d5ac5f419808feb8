import type { KnipConfig } from 'knip'

// Unused files, exports and dependencies (`npm run knip`). What is only started by name, never
// imported, is an entry here, not a finding to fix.
const config: KnipConfig = {
  workspaces: {
    '.': {
      entry: [
        'src/main.ts',
        'test/bench/*.ts',
        // Forked by the benchmarks as child processes (test/bench/ingest.ts, bench/fleet.ts).
        'test/bench/lib/ingest-ceiling-broker.ts',
        'test/bench/lib/ingest-publisher.ts',
        'test/bench/lib/questdb-standin.ts',
        // Spawned and SIGKILLed by test/timeseries/postgres-partitions.test.ts.
        'test/timeseries/fixtures/expiry-child.ts',
        'simulators/*.ts',
        'test/**/*.test.ts',
        'test/**/*.bench.ts', // vitest bench
        // The console's page script, bundled by Vite (console/vite.config.ts).
        'console/src/main.ts',
        'console/vite.config.ts',
      ],
      project: [
        'src/**/*.ts',
        'broker/**/*.ts',
        'rules/**/*.ts',
        'simulators/**/*.ts',
        'test/bench/**/*.ts',
        'test/**/*.ts',
        'console/src/**/*.ts',
      ],
      // Resolved by path at run time, not imported: the API docs page serves swagger-ui-dist's
      // files (src/api/routes/docs.ts); the console's browser test injects axe-core's script.
      ignoreDependencies: ['swagger-ui-dist', 'axe-core'],
    },
    sdk: {
      entry: ['test/**/*.test.ts', 'scripts/*.ts'],
      project: ['src/**/*.ts', 'test/**/*.ts', 'scripts/**/*.ts'],
    },
    'sdk/react-native': {
      entry: ['test/**/*.test.{ts,tsx}'],
      project: ['src/**/*.{ts,tsx}', 'test/**/*.{ts,tsx}'],
    },
  },
  // A type exported beside the function that takes or returns it is part of that function's signature.
  ignoreExportsUsedInFile: { interface: true, type: true },
}

export default config
