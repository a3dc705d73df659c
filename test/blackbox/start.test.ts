import { spawn, spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { tempDir } from '../helpers.js'
import { entry, root, startArgs } from './service.js'

/** What `npm start` does before the service runs, and the line it shows a person at a terminal once it is ready. */

t.test('npm start builds only when a source is newer than the last build', async (t) => {
  // The script on a project of its own, whose "tsc" counts its runs: dist/ of this checkout is not touched.
  const dir = tempDir(t, 'roster-build-')
  mkdirSync(join(dir, 'scripts'))
  cpSync(join(root, 'scripts', 'build-if-stale.mjs'), join(dir, 'scripts', 'build-if-stale.mjs'))
  for (const file of ['tsconfig.json', 'package-lock.json']) writeFileSync(join(dir, file), '{}')
  writeFileSync(join(dir, 'tsconfig.build.json'), JSON.stringify({ include: ['src'] }))
  mkdirSync(join(dir, 'src'))
  writeFileSync(join(dir, 'src', 'a.ts'), 'export {}\n')
  mkdirSync(join(dir, 'node_modules', 'typescript', 'bin'), { recursive: true })
  writeFileSync(join(dir, 'node_modules', 'typescript', 'bin', 'tsc'),
    "const fs = require('node:fs'); fs.mkdirSync('dist', { recursive: true }); fs.appendFileSync('runs', 'x')\n")
  writeFileSync(join(dir, 'node_modules', 'typescript', 'package.json'), '{"type":"commonjs"}')
  const start = (...args: string[]) => spawnSync(process.execPath, ['scripts/build-if-stale.mjs', ...args], { cwd: dir, encoding: 'utf8' })
  const runs = () => readFileSync(join(dir, 'runs'), 'utf8').length

  t.equal(start().status, 0)
  t.equal(runs(), 1, 'no build yet: built')
  const second = start()
  t.equal(runs(), 1, 'nothing newer: not built again')
  t.equal(second.stderr, '', 'and nothing said')
  const later = new Date(Date.now() + 5000)
  utimesSync(join(dir, 'src', 'a.ts'), later, later)
  t.match(start().stderr, /Building the service/, 'a source changed: said')
  t.equal(runs(), 2, 'and built')
  start('--always')
  t.equal(runs(), 3, 'npm run build always builds')
})

t.test('a person at a terminal sees one line when the service is ready, with where the docs are', async (t) => {
  // `script` gives the service a terminal, as a person's shell does.
  const command = [process.execPath, ...startArgs(), entry].map((part) => `'${part}'`).join(' ')
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    cwd: root, env: { ...process.env, PORT: '0', METRICS_PORT: '0', DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe']
  })
  t.teardown(() => { child.kill('SIGKILL') })
  let out = ''
  child.stdout.on('data', (d: Buffer) => { out += d.toString() })
  const until = Date.now() + 20_000
  while (!/Roster ready on/.test(out) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 100))
  const line = /Roster ready on http:\/\/127\.0\.0\.1:(\d+) — API docs at \/docs/.exec(out)
  t.ok(line, `the ready line (${JSON.stringify(out.slice(0, 200))})`)
  const docs = await fetch(`http://127.0.0.1:${line?.[1]}/docs`)
  t.equal(docs.status, 200, 'and the docs are there')
})

t.test('without a terminal (a container, a supervisor), standard error gets no such line', async (t) => {
  const child = spawn(process.execPath, [...startArgs(), entry], {
    cwd: root, env: { ...process.env, PORT: '0', METRICS_PORT: '0', DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe']
  })
  t.teardown(() => { child.kill('SIGKILL') })
  let out = ''
  child.stdout.on('data', (d: Buffer) => { out += d.toString() })
  child.stderr.on('data', (d: Buffer) => { out += d.toString() })
  const until = Date.now() + 20_000
  while (!/Server listening at/.test(out) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 100))
  t.match(out, /Server listening at/, 'it started')
  t.notMatch(out, /Roster ready on/, 'no human line among the JSON lines')
})
