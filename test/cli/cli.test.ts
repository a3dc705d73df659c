import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { ADMIN, adminUser, build, freePort, newUser, sharedDatabase, tempDir, type TestUser } from '../helpers.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

interface Run { code: number | null; stdout: string; stderr: string }

/**
 * The CLI as an operator runs it: a process of its own, against the app listening in this one (so it must not block
 * this event loop). `stdoutFile` takes its stdout as `> file` would.
 */
async function roster(args: string[], options: { env?: Record<string, string>; stdoutFile?: string; npm?: boolean } = {}): Promise<Run> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('ROSTER_')))
  const out = options.stdoutFile ? openSync(options.stdoutFile, 'w') : 'pipe'
  const [command, argv] = options.npm
    ? ['npm', ['run', '--silent', 'roster', '--', ...args]]
    : [process.execPath, ['--import', 'tsx', 'scripts/roster.ts', ...args]]
  const child = spawn(command, argv, { cwd: ROOT, env: { ...env, ...options.env }, stdio: ['ignore', out, 'pipe'] })
  if (typeof out === 'number') closeSync(out)
  let stdout = ''
  let stderr = ''
  child.stdout?.setEncoding('utf8').on('data', (s: string) => { stdout += s })
  child.stderr?.setEncoding('utf8').on('data', (s: string) => { stderr += s })
  const timer = setTimeout(() => child.kill('SIGKILL'), 90_000)
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  clearTimeout(timer)
  return { code, stdout, stderr }
}

/** An app on a database of its own that an export can read through a second connection, listening on a real port. */
async function running(t: Test, env: Record<string, string> = {}): Promise<{ app: App; admin: TestUser; url: string }> {
  const app = await build(t, { imports: { pollMs: 20 }, url: await sharedDatabase(t), env })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  if (!address || typeof address === 'string') throw new Error('not listening')
  return { app, admin: await adminUser(app), url: `http://127.0.0.1:${address.port}` }
}

const ndjson = (...lines: unknown[]) => lines.map((l) => typeof l === 'string' ? l : JSON.stringify(l)).join('\n') + '\n'

async function userByEmail(app: App, admin: TestUser, email: string) {
  const res = await app.inject({ method: 'GET', url: `/users?email=${encodeURIComponent(email)}`, headers: admin.headers })
  return res.json<{ items: Array<{ id: number; name: string; status: string }> }>().items[0]
}

const signIn = (app: App, email: string, password: string) =>
  app.inject({ method: 'POST', url: '/auth/tokens', payload: { email, password } })

t.test('import: a roster file with one bad line exits 1 and reports the line; a dry run signed in by password exits 0', async (t) => {
  const { app, admin, url } = await running(t)
  const dir = tempDir(t)
  const file = join(dir, 'users.ndjson')
  writeFileSync(file, ndjson(
    { external_id: 'x-1', name: 'Ada Lovelace', emails: [{ address: 'ada@example.com', verified: true, primary: true }] },
    { emails: [{ address: 'not an address' }] },
    { email: 'grace@example.com', email_verified: true }
  ))
  const run = await roster(['import', file, '--url', url, '--token', admin.token, '--interval', '50'])
  t.equal(run.code, 1, 'exits 1', { stderr: run.stderr })
  t.match(run.stdout, /^import \d+ succeeded: 3 lines, 2 created, 0 updated, 0 skipped, 1 failed$/m)
  t.match(run.stdout, /^line 2: VALIDATION_FAILED: .+$/m, 'the report names the bad line')
  t.notMatch(run.stdout, /^line [13]:/m, 'and no other')
  t.match(run.stderr, /^import \d+: 3\/3 lines \(100%\), 1 error, \d+ lines\/s/m, 'plain progress lines when stderr is not a terminal')
  t.notOk(run.stderr.includes('\r') || run.stderr.includes('\u001b['), 'and no bar drawn')
  t.match(await userByEmail(app, admin, 'ada@example.com'), { name: 'Ada Lovelace' })

  const more = join(dir, 'more.ndjson')
  writeFileSync(more, ndjson({ email: 'dry@example.com' }))
  const dry = await roster(['import', more, '--dry-run', '--url', url, '--email', ADMIN.email], { env: { ROSTER_PASSWORD: ADMIN.password } })
  t.equal(dry.code, 0, 'exits 0', { stderr: dry.stderr })
  t.match(dry.stdout, /succeeded \(dry run: nothing was changed\): 1 line, 1 created/)
  t.equal(await userByEmail(app, admin, 'dry@example.com'), undefined, 'a dry run changes nothing')
})

t.test('import: an auth0 file with a custom hash, the service from ROSTER_URL and ROSTER_TOKEN', async (t) => {
  const { app, admin, url } = await running(t)
  const file = join(tempDir(t), 'auth0.json')
  const digest = createHash('sha256').update('pepper' + 'auth0-password-1').digest('hex')
  writeFileSync(file, JSON.stringify([
    { email: 'a0@example.com', email_verified: true, given_name: 'Ann', family_name: 'Zero', user_id: 'auth0|abc',
      custom_password_hash: { algorithm: 'sha256', hash: { value: digest, encoding: 'hex' }, salt: { value: 'pepper', position: 'prefix' } } },
    { email: 'blocked@example.com', blocked: true }
  ], null, 2))
  const run = await roster(['import', file, '--format', 'auth0', '--interval', '50'], { env: { ROSTER_URL: url, ROSTER_TOKEN: admin.token } })
  t.equal(run.code, 0, 'exits 0', { stderr: run.stderr })
  t.match(run.stdout, /succeeded: 2 lines, 2 created, 0 updated, 0 skipped, 0 failed/)
  t.match(await userByEmail(app, admin, 'a0@example.com'), { name: 'Ann Zero' })
  t.match(await userByEmail(app, admin, 'blocked@example.com'), { status: 'BANNED' })
  t.equal((await signIn(app, 'a0@example.com', 'auth0-password-1')).statusCode, 201, 'Auth0\'s hash signs in')
})

t.test('refused: a bad token, a file not of its format or too large, a service not there: exit 2 with the reason', async (t) => {
  const { admin, url } = await running(t, { IMPORT_MAX_BYTES: String(64 * 1024) })
  const dir = tempDir(t)
  const file = join(dir, 'users.json')
  writeFileSync(file, '[{"email": "w@example.com"}]')
  const badToken = await roster(['import', file, '--url', url, '--token', 'not-a-token'])
  t.equal(badToken.code, 2)
  t.match(badToken.stderr, /^roster: the import was refused: 401 UNAUTHENTICATED: /m)
  const wrongFormat = await roster(['import', file, '--url', url, '--token', admin.token, '--interval', '50'])
  t.equal(wrongFormat.code, 2)
  t.match(wrongFormat.stderr, /^roster: import \d+ failed: .*not NDJSON/m, 'the import\'s detail')
  const partial = await roster(['import', file, '--format', 'firebase', '--firebase-rounds', '8', '--url', url, '--token', admin.token])
  t.equal(partial.code, 2)
  t.match(partial.stderr, /400 VALIDATION_FAILED: .*\n {2}\/firebase_signer_key: /, 'a validation failure says which field')
  const large = join(dir, 'large.ndjson')
  writeFileSync(large, ndjson(...Array.from({ length: 5000 }, (_, i) => ({ email: `big${i}@example.com` }))))
  const tooLarge = await roster(['import', large, '--url', url, '--token', admin.token])
  t.equal(tooLarge.code, 2)
  t.match(tooLarge.stderr, /^roster: the import was refused: 413 PAYLOAD_TOO_LARGE: /m, 'a file over IMPORT_MAX_BYTES, refused while it streams')
  const nobody = await roster(['export', '--url', `http://127.0.0.1:${await freePort()}`, '--token', admin.token])
  t.equal(nobody.code, 2)
  t.match(nobody.stderr, /^roster: cannot reach http:\/\/127\.0\.0\.1:\d+\/exports\/users: ECONNREFUSED/m)
  const usage = await roster(['import', file, '--format', 'csv'])
  t.equal(usage.code, 2, 'a mistake on the command line too')
})

t.test('export: NDJSON on stdout, a line for each user', async (t) => {
  const { app, admin, url } = await running(t)
  await newUser(app, { name: 'Exported One', email: 'one@example.com' })
  await newUser(app, { name: 'Exported Two', email: 'two@example.com' })
  const file = join(tempDir(t), 'users.ndjson')
  // Through the npm script, as the docs run it: its stdout carries the export and nothing else.
  const run = await roster(['export', '--url', url, '--token', admin.token], { stdoutFile: file, npm: true })
  t.equal(run.code, 0, 'exits 0', { stderr: run.stderr })
  t.match(run.stderr, /exported 3 users/)
  const lines = readFileSync(file, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as { name: string; emails: Array<{ address: string }>; password_hash?: string })
  const listed = (await app.inject({ method: 'GET', url: '/users?limit=200', headers: admin.headers }))
    .json<{ items: Array<{ id: number; name: string; email: string }> }>().items.sort((x, y) => x.id - y.id)
  t.same(lines.map((l) => [l.name, l.emails.map((e) => e.address)]), listed.map((u) => [u.name, [u.email]]), 'every user, in id order')
  t.ok(lines.every((l) => !('password_hash' in l)), 'no hashes unless asked for')
})

t.test('round trip: an export with hashes from one instance imported into an empty one; the passwords sign in', async (t) => {
  const a = await running(t)
  await newUser(a.app, { name: 'Travelling Ada', email: 'ada@example.com', password: 'ada-password-1' })
  await newUser(a.app, { name: 'Travelling Bob', email: 'bob@example.com', password: 'bob-password-1' })
  const file = join(tempDir(t), 'users.ndjson')
  const exported = await roster(['export', '--include-password-hash', '--url', a.url, '--token', a.admin.token], { stdoutFile: file })
  t.equal(exported.code, 0, 'exits 0', { stderr: exported.stderr })
  t.ok(readFileSync(file, 'utf8').trimEnd().split('\n').every((l) => (JSON.parse(l) as { password_hash?: string }).password_hash?.startsWith('$argon2id$')))

  const b = await running(t)
  const imported = await roster(['import', file, '--url', b.url, '--token', b.admin.token, '--interval', '50'])
  t.equal(imported.code, 0, 'exits 0', { stderr: imported.stderr })
  t.match(imported.stdout, /3 lines, 2 created, 0 updated, 1 skipped, 0 failed/, 'the first admin is there already')
  t.match(await userByEmail(b.app, b.admin, 'ada@example.com'), { name: 'Travelling Ada' })
  t.equal((await signIn(b.app, 'ada@example.com', 'ada-password-1')).statusCode, 201, 'the password signs in on the second instance')
  t.equal((await signIn(b.app, 'bob@example.com', 'bob-password-1')).statusCode, 201)
  t.equal((await signIn(b.app, 'bob@example.com', 'ada-password-1')).statusCode, 401)
})
