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
  },
})
