import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'sdk/test/**/*.test.ts', 'sdk/react-native/test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // expect.poll gives up after 1 s by default: too tight for real I/O on a shared, loaded machine.
    expect: { poll: { timeout: 10_000 } },
    // Tests bind ephemeral ports and share the local PostgreSQL; two workers match the CI machine.
    maxWorkers: 2,
    // Each worker loads the service's modules once for all its files instead of once per file
    // (imports ~400 s → ~20 s). So nothing may hang on a module's top level: a helper's hook
    // registered there would run for the first file that imports it only (test/broker/harness.ts
    // registers its clean-up per call). Tests build their own service, store and clock.
    isolate: false,
  },
})
