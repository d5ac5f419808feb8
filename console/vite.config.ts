import { defineConfig } from 'vite'

// The service serves console/dist at /console (src/api/routes/console.ts); `npm run build:console`.
export default defineConfig({
  root: import.meta.dirname,
  base: '/console/',
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022', sourcemap: false, chunkSizeWarningLimit: 400 },
  // Everything is same-origin and bundled: the CSP allows nothing else.
  server: { proxy: { '/v1': 'http://localhost:8080', '/oauth': 'http://localhost:8080', '/.well-known': 'http://localhost:8080' } },
})
