import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * `npm run sdk:pack [-- --out DIR]`: @rxtrace/sdk as an installable tarball (it is not on the npm
 * registry). The repository's workspace uses the TypeScript sources; the tarball ships them
 * compiled, ES modules with their .d.ts, so `npm install ./rxtrace-sdk-<version>.tgz` works in
 * any project, JavaScript or TypeScript, bundler or not. Prints the tarball's path.
 */

const sdk = fileURLToPath(new URL('../', import.meta.url))
const outIndex = process.argv.indexOf('--out')
const out = resolve(outIndex > 0 ? process.argv[outIndex + 1]! : '.')
const staging = mkdtempSync(join(tmpdir(), 'rxtrace-sdk-pack-'))
try {
  const tsc = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url))
  execFileSync(
    process.execPath,
    [tsc, '-p', sdk, '--noEmit', 'false', '--declaration', '--rootDir', join(sdk, 'src'), '--outDir', join(staging, 'dist')],
    {
      stdio: 'inherit',
    },
  )
  copyFileSync(join(sdk, 'src/schema.d.ts'), join(staging, 'dist/schema.d.ts')) // tsc emits no copy of a .d.ts
  copyFileSync(join(sdk, 'README.md'), join(staging, 'README.md'))
  const manifest = JSON.parse(readFileSync(join(sdk, 'package.json'), 'utf8')) as Record<string, unknown> & {
    exports: Record<string, string>
  }
  const compiled = (source: string) =>
    source.endsWith('.d.ts')
      ? { types: source.replace('./src/', './dist/') }
      : {
          types: source.replace('./src/', './dist/').replace(/\.ts$/, '.d.ts'),
          default: source.replace('./src/', './dist/').replace(/\.ts$/, '.js'),
        }
  const { scripts: _scripts, ...rest } = manifest
  const packed = {
    ...rest,
    exports: Object.fromEntries(Object.entries(manifest.exports).map(([k, v]) => [k, compiled(v)])),
    files: ['dist', 'README.md'],
  }
  writeFileSync(join(staging, 'package.json'), `${JSON.stringify(packed, null, 2)}\n`)
  const name = execFileSync('npm', ['pack', '--silent', '--pack-destination', out], { cwd: staging, encoding: 'utf8' })
    .trim()
    .split('\n')
    .at(-1)!
  console.log(join(out, name))
} finally {
  rmSync(staging, { recursive: true, force: true })
}
