#!/usr/bin/env node
// `npm start`'s first step (and `npm run build`, with --always): builds dist/ (tsc -p tsconfig.build.json) only when
// a source is newer than the last build, so that a start after the first one takes no compile. The sources are what
// tsconfig.build.json includes, the tsconfig files themselves and package-lock.json (a dependency's types can change
// the output), and the console's page (console/), which is copied beside the compiled code.
// With --tests (npm test) it compiles all that tsconfig.json holds, tests and benchmarks too, which is also the type
// check: the suite runs the compiled tests, since a TypeScript loader in every test process cost more CPU than most
// tests themselves.
import { spawnSync } from 'node:child_process'
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const root = new URL('..', import.meta.url).pathname
const STAMP = join(root, 'dist', '.built')

/** The newest modification time of a file or of anything beneath a directory (ms; 0 when absent). */
function newest(path) {
  if (!existsSync(path)) return 0
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  return readdirSync(path).reduce((most, name) => Math.max(most, newest(join(path, name))), stat.mtimeMs)
}

const { include } = JSON.parse(readFileSync(join(root, 'tsconfig.build.json'), 'utf8'))
const sources = [...include, 'console', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json'].map((p) => join(root, p))
const built = existsSync(STAMP) ? statSync(STAMP).mtimeMs : 0
const always = process.argv.includes('--always') // npm run build
const tests = process.argv.includes('--tests')
if (!always && built > 0 && sources.every((source) => newest(source) < built)) process.exit(0)

if (!always) console.error('Building the service (dist/ is older than its sources)…')
const started = Date.now()
// A test whose source is gone must not run from an old build.
if (tests) rmSync(join(root, 'dist', 'test'), { recursive: true, force: true })
const project = join(root, tests ? 'tsconfig.json' : 'tsconfig.build.json')
const tsc = spawnSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project], { stdio: 'inherit' })
if (tsc.status !== 0) process.exit(tsc.status ?? 1)
if (existsSync(join(root, 'console'))) cpSync(join(root, 'console'), join(root, 'dist', 'console'), { recursive: true })
writeFileSync(STAMP, `built ${new Date().toISOString()}\n`)
if (!always) console.error(`Built in ${((Date.now() - started) / 1000).toFixed(1)} s.`)
