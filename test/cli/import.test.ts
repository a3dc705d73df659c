import { createHash } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { ADMIN, freePort, tempDir } from '../helpers.js'
import { ndjson, roster, running, signIn, userByEmail } from './run.js'

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

