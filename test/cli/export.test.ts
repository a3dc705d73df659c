import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { newUser, tempDir } from '../helpers.js'
import { roster, running, signIn, userByEmail } from './run.js'

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
