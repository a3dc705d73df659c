// Foreign password hashes: every accepted form checked against known vectors (the documented ones where they exist,
// others made here with the libraries), refused when malformed, and over HTTP replaced by argon2id at the first login.
import { createHash, createHmac, pbkdf2Sync, randomBytes, scryptSync } from 'node:crypto'
import { hash as argon2Hash } from '@node-rs/argon2'
import { hash as bcryptHash } from '@node-rs/bcrypt'
import t, { type Test } from 'tap'
import { fromAuth0Custom, fromFirebase, isNativeHash, parsePasswordHash, verifyPasswordHash } from '../../src/accounts/password-hashes.js'
import { UnsupportedHash } from '../../src/common/errors.js'
import { adminUser, assertProblem, build, newUser } from '../helpers.js'

const b64 = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '')
const ab64 = (bytes: Buffer) => b64(bytes).replaceAll('+', '.')

/** A stored hash that takes `password` and refuses near misses. */
async function checks(t: Test, stored: string, password: string, name: string): Promise<void> {
  t.ok(await verifyPasswordHash(stored, password), `${name}: the password`)
  t.notOk(await verifyPasswordHash(stored, password + 'x'), `${name}: a longer one`)
  t.notOk(await verifyPasswordHash(stored, 'wrong password'), `${name}: another`)
  t.notOk(await verifyPasswordHash(stored, ''), `${name}: none`)
}

function refused(t: Test, make: () => string, name: string): void {
  try {
    t.fail(`${name}: taken as ${make()}`)
  } catch (err) {
    t.ok(err instanceof UnsupportedHash && err.code === 'UNSUPPORTED_HASH', `${name}: UNSUPPORTED_HASH (${(err as Error).message})`)
  }
}

t.test('documented vectors', async (t) => {
  const vectors: [string, string, string][] = [
    // passlib's scrypt documentation
    ['$scrypt$ln=16,r=8,p=1$aM15713r3Xsvxbi31lqr1Q$nFNh2CVHVjNldFVKDHDlm4CbdRSCdEBsjjJxD+iCs5E', 'password', 'scrypt (passlib)'],
    // passlib's pbkdf2_sha256 documentation, in its adapted base64
    ['$pbkdf2-sha256$6400$0ZrzXitFSGltTQnBWOsdAw$Y11AchqV4b0sUisdZd0Xr97KWoymNE0LNNrnEgY4H9M', 'password', 'pbkdf2-sha256 (passlib)'],
    ['$pbkdf2-sha256$8000$XAuBMIYQQogxRg$tRRlz8hYn63B9LYiCd6PRo6FMiunY9ozmMMI3srxeRE', 'password', 'pbkdf2-sha256 (passlib, 10-byte salt)'],
    // Django's own tests
    ['pbkdf2_sha256$10000$seasalt$CWWFdHOWwPnki7HvkcqN9iA2T3KLW1cf2uZ5kvArtVY=', 'lètmein', 'Django pbkdf2_sha256'],
    ['pbkdf2_sha256$10000$seasalt$FQCNpiZpTb0zub+HBsH6TOwyRxJ19FwvjbweatNmK/Y=', 'letmein', 'Django pbkdf2_sha256, ASCII'],
    // Auth0's bulk import schema
    ['$2b$10$nFguVi9LsCAcvTZFKQlRKeLVydo8ETv483lkNsSFI/Wl1Rz1Ypo1K', 'hello', 'bcrypt (Auth0)'],
    // the PHC reference implementation's parameters, as other libraries' tests carry them
    ['$argon2i$v=19$m=16,t=2,p=1$ZVZWeGtzNVZqeExTVzNSOA$fx0EYEB1zO8i+J2H+OFI4w', 'password', 'argon2i'],
    ['$argon2d$v=19$m=16,t=2,p=1$Mmx3eWR3YkJONkhoTGFnNA$HD1EIj2bqdfwQrJDP+FY6w', 'password', 'argon2d'],
    ['$argon2id$v=19$m=16,t=2,p=1$UmtRRmdBRU53QlptNk8ycw$UyyArpJ8yasrc93GImQjFQ', 'password', 'argon2id']
  ]
  for (const [hash, password, name] of vectors) {
    t.equal(parsePasswordHash(hash), hash, `${name}: kept as given`)
    await checks(t, hash, password, name)
  }
})

t.test("Firebase's modified scrypt: the vector of firebase/scrypt's README", async (t) => {
  const params = { signerKey: 'jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==', saltSeparator: 'Bw==', rounds: 8, memCost: 14 }
  const user = { passwordHash: 'lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==', salt: '42xEC+ixf3L2lw==' }
  const stored = fromFirebase(user, params)
  t.match(stored, /^\$firebase-scrypt\$rounds=8,mem=14\$jxspr8Ki[^$]+\$Bw\$42xEC\+ixf3L2lw\$lSrfV15c[^$=]+$/)
  t.ok(stored.length <= 255, `fits the column (${stored.length})`)
  t.equal(parsePasswordHash(stored), stored, 'an export of it imports back')
  await checks(t, stored, 'user1password', 'firebase')

  refused(t, () => fromFirebase({ ...user, passwordHash: Buffer.from(user.passwordHash, 'base64').toString('hex') }, params), 'the hash in hex')
  refused(t, () => fromFirebase(user, { ...params, signerKey: 'not base64!' }), 'a signer key not in base64')
  refused(t, () => fromFirebase(user, { ...params, memCost: 31 }), 'a memory cost beyond reach')
  refused(t, () => fromFirebase({ ...user, salt: 'A'.repeat(200) }, params), 'a stored form wider than the column')
})

t.test('hashes made here with the libraries', async (t) => {
  const password = 'Tr0ub4dor&3 ünïcödé'
  for (const prefix of ['$2a$', '$2b$', '$2y$']) {
    const made = await bcryptHash(password, 4)
    const hash = prefix + made.slice(4)
    t.equal(parsePasswordHash(hash), hash)
    await checks(t, hash, password, `bcrypt ${prefix}`)
  }
  for (const algorithm of [0, 1, 2] as const) {
    const hash = await argon2Hash(password, { algorithm, memoryCost: 1024, timeCost: 1 })
    t.equal(parsePasswordHash(hash), hash)
    await checks(t, hash, password, `argon2 ${hash.split('$')[1]}`)
  }

  const salt = randomBytes(16)
  const scrypted = scryptSync(password, salt, 32, { N: 2 ** 10, r: 8, p: 2 })
  const scrypt = `$scrypt$ln=10,r=8,p=2$${b64(salt)}$${b64(scrypted)}`
  t.equal(parsePasswordHash(scrypt), scrypt)
  await checks(t, scrypt, password, 'scrypt PHC')

  for (const [digest, id, length] of [['sha1', 'pbkdf2', 20], ['sha256', 'pbkdf2-sha256', 32], ['sha512', 'pbkdf2-sha512', 64]] as const) {
    const derived = pbkdf2Sync(password, salt, 1000, length, digest)
    const passlib = `$${id}$1000$${ab64(salt)}$${ab64(derived)}`
    t.equal(parsePasswordHash(passlib), passlib)
    await checks(t, passlib, password, `passlib ${id}`)
    const phc = `$pbkdf2-${digest}$i=1000,l=${length}$${b64(salt)}$${b64(derived)}`
    t.equal(parsePasswordHash(phc), phc)
    await checks(t, phc, password, `PHC pbkdf2-${digest}`)
  }
  const django = `pbkdf2_sha256$1200$Xy9salt$${pbkdf2Sync(password, 'Xy9salt', 1200, 32, 'sha256').toString('base64')}`
  await checks(t, parsePasswordHash(django), password, 'Django, made here')
})

t.test("Auth0's custom_password_hash", async (t) => {
  // Auth0's documented HMAC example is the HMAC-SHA1 of "test" under the key "shh".
  const hmacDoc = fromAuth0Custom({ algorithm: 'hmac', hash: { value: 'cg7f42jH39/2EaAU4wNd4s2lKIk=', encoding: 'base64', digest: 'sha1', key: { value: '736868', encoding: 'hex' } } })
  t.match(hmacDoc, /^\$auth0-hmac-sha1\$pos=prefix,key=c2ho\$\$/)
  await checks(t, hmacDoc, 'test', 'Auth0 hmac (documented)')

  const password = 'pässword-1'
  const salt = 'abc123'
  const digest = (algorithm: string, data: string | Buffer) => createHash(algorithm).update(data).digest()
  const cases: [string, unknown, string][] = [
    ['md5 hex, no salt', { algorithm: 'md5', hash: { value: digest('md5', password).toString('hex'), encoding: 'hex' } }, '$auth0-md5$'],
    ['sha1 base64, salt suffix', { algorithm: 'sha1', hash: { value: digest('sha1', password + salt).toString('base64'), encoding: 'base64' }, salt: { value: salt, position: 'suffix' } }, '$auth0-sha1$pos=suffix$'],
    ['sha256 upper-case hex, salt prefix', { algorithm: 'sha256', hash: { value: digest('sha256', salt + password).toString('hex').toUpperCase(), encoding: 'hex' }, salt: { value: salt, position: 'prefix' } }, '$auth0-sha256$pos=prefix$'],
    ['sha512, salt in hex', { algorithm: 'sha512', hash: { value: digest('sha512', Buffer.concat([Buffer.from('c0ffee', 'hex'), Buffer.from(password)])).toString('base64'), encoding: 'base64' }, salt: { value: 'c0ffee', encoding: 'hex', position: 'prefix' } }, '$auth0-sha512$'],
    ['sha1 of a UTF-16LE password', { algorithm: 'sha1', hash: { value: digest('sha1', Buffer.from(password, 'utf16le')).toString('hex'), encoding: 'hex' }, password: { encoding: 'utf16le' } }, '$auth0-sha1$pos=prefix,pw=utf16le$'],
    ['hmac-sha256 with a utf8 key and a salt', { algorithm: 'hmac', hash: { value: createHmac('sha256', 'k3y').update(password + salt).digest('base64url'), encoding: 'base64', digest: 'sha256', key: { value: 'k3y' } }, salt: { value: salt, position: 'suffix' } }, '$auth0-hmac-sha256$']
  ]
  for (const [name, custom, prefix] of cases) {
    const stored = fromAuth0Custom(custom)
    t.ok(stored.startsWith(prefix), `${name}: ${stored}`)
    t.equal(parsePasswordHash(stored), stored, `${name}: an export of it imports back`)
    await checks(t, stored, password, name)
  }

  const bcrypt = '$2b$10$nFguVi9LsCAcvTZFKQlRKeLVydo8ETv483lkNsSFI/Wl1Rz1Ypo1K'
  t.equal(fromAuth0Custom({ algorithm: 'bcrypt', hash: { value: bcrypt } }), bcrypt, 'bcrypt: its own form')
  const argon2 = '$argon2id$v=19$m=65536,t=2,p=1$J6Q/82PCyaNpYKRELJyTZg$m04qUAB8rexWDR4+/0f+SFB+4XMFxt7YAvAq2UycYos'
  t.equal(fromAuth0Custom({ algorithm: 'argon2', hash: { value: argon2, encoding: 'utf8' } }), argon2, 'argon2: its own form')
  const pbkdf2Salt = randomBytes(8)
  const derived = pbkdf2Sync(password, pbkdf2Salt, 100_000, 64, 'sha512')
  const pbkdf2 = fromAuth0Custom({ algorithm: 'pbkdf2', hash: { value: `$pbkdf2-sha512$${b64(pbkdf2Salt)}$${b64(derived)}`, encoding: 'utf8' } })
  t.equal(pbkdf2, `$pbkdf2-sha512$i=100000,l=64$${b64(pbkdf2Salt)}$${b64(derived)}`, "pbkdf2: PHC, Auth0's defaults written out")
  await checks(t, pbkdf2, password, 'Auth0 pbkdf2')

  refused(t, () => fromAuth0Custom(null), 'not an object')
  refused(t, () => fromAuth0Custom({ algorithm: 'ldap', hash: { value: '{SSHA}x' } }), 'an algorithm not checked')
  refused(t, () => fromAuth0Custom({ algorithm: 'md4', hash: { value: '00'.repeat(16), encoding: 'hex' } }), 'md4')
  refused(t, () => fromAuth0Custom({ algorithm: 'sha256', hash: { value: 'abcd', encoding: 'hex' } }), 'a digest of the wrong length')
  refused(t, () => fromAuth0Custom({ algorithm: 'sha256', hash: { value: 'zz'.repeat(32), encoding: 'hex' } }), 'not hex')
  refused(t, () => fromAuth0Custom({ algorithm: 'sha1', hash: { value: 'x', encoding: 'utf8' } }), 'a digest in utf8')
  refused(t, () => fromAuth0Custom({ algorithm: 'sha1', hash: { value: '00'.repeat(20), encoding: 'hex' }, salt: { value: 'abc' } }), 'a salt without its position')
  refused(t, () => fromAuth0Custom({ algorithm: 'hmac', hash: { value: '00'.repeat(20), encoding: 'hex', digest: 'sha1' } }), 'hmac without a key')
  refused(t, () => fromAuth0Custom({ algorithm: 'hmac', hash: { value: '00'.repeat(20), encoding: 'hex', digest: 'whirlpool', key: { value: 'k' } } }), 'hmac over an unknown digest')
  refused(t, () => fromAuth0Custom({ algorithm: 'bcrypt', hash: { value: bcrypt }, salt: { value: 'x', position: 'prefix' } }), 'bcrypt with a salt')
  refused(t, () => fromAuth0Custom({ algorithm: 'bcrypt', hash: { value: argon2 } }), 'bcrypt naming an argon2 hash')
  refused(t, () => fromAuth0Custom({ algorithm: 'pbkdf2', hash: { value: '$pbkdf2-md4$i=100000,l=64$+N375B8q0Fw$fp2R9KAM4hK' } }), 'pbkdf2 over md4')
  refused(t, () => fromAuth0Custom({ algorithm: 'sha1', hash: { value: '00'.repeat(20), encoding: 'hex' }, password: { encoding: 'ebcdic' } }), 'an unknown password encoding')
})

t.test('malformed hashes are refused, and never verify', async (t) => {
  const bcrypt = '$2b$10$nFguVi9LsCAcvTZFKQlRKeLVydo8ETv483lkNsSFI/Wl1Rz1Ypo1K'
  const bad = [
    '', 'password', '5f4dcc3b5aa765d61d8327deb882cf99', '{SSHA}abcdef', '$1$salt$hash', '$6$rounds=5000$salt$hash',
    bcrypt.slice(0, -1), bcrypt.replace('$2b$', '$2x$'), bcrypt.replace('$10$', '$31$'), bcrypt.replace('$10$', '$03$'), bcrypt + '$',
    '$argon2id$v=19$m=65536,t=2,p=1$J6Q/82PCyaNpYKRELJyTZg', '$argon2id$v=19$m=65536,t=2,p=1$J6Q/82PCyaNpYKRELJyTZg$m04q!!AB8rexWDR4',
    '$argon2id$v=19$m=4194304,t=2,p=1$J6Q/82PCyaNpYKRELJyTZg$m04qUAB8rexWDR4+/0f+SFB+4XMFxt7YAvAq2UycYos',
    '$argon2x$v=19$m=65536,t=2,p=1$J6Q/82PCyaNpYKRELJyTZg$m04qUAB8rexWDR4+/0f+SFB+4XMFxt7YAvAq2UycYos',
    '$scrypt$ln=16,r=8$aM15713r3Xsvxbi31lqr1Q$nFNh2CVHVjNldFVKDHDlm4CbdRSCdEBsjjJxD+iCs5E',
    '$scrypt$ln=24,r=8,p=1$aM15713r3Xsvxbi31lqr1Q$nFNh2CVHVjNldFVKDHDlm4CbdRSCdEBsjjJxD+iCs5E',
    '$scrypt$ln=16,r=8,p=1$aM15713r3Xsvxbi31lqr1Q$nFNh2CVHVjNldFVKDHDlm4CbdRSCdEBsjjJxD+iCs5E=',
    '$scrypt$ln=16,r=8,p=1,ln=4$aM15713r3Xsvxbi31lqr1Q$nFNh2CVHVjNldFVKDHDlm4CbdRSCdEBsjjJxD+iCs5E',
    '$pbkdf2-sha256$6400$0ZrzXitFSGltTQnBWOsdAw', '$pbkdf2-md4$6400$0ZrzXitFSGltTQnBWOsdAw$Y11AchqV4b0sUisdZd0Xr97KWoymNE0LNNrnEgY4H9M',
    '$pbkdf2-sha256$99999999$0ZrzXitFSGltTQnBWOsdAw$Y11AchqV4b0sUisdZd0Xr97KWoymNE0LNNrnEgY4H9M',
    '$pbkdf2-sha256$i=6400,l=16$0ZrzXitFSGltTQnBWOsdAw$Y11AchqV4b0sUisdZd0Xr97KWoymNE0LNNrnEgY4H9M',
    '$pbkdf2-sha256$6400$0Zrz_XitFSGltTQnBWOsdAw$Y11AchqV4b0sUisdZd0Xr97KWoymNE0LNNrnEgY4H9M',
    'pbkdf2_sha256$ten$seasalt$FQCNpiZpTb0zub+HBsH6TOwyRxJ19FwvjbweatNmK/Y=', 'pbkdf2_sha256$10000$seasalt$FQCNpiZpTb0zub+HBsH6TOwy',
    'pbkdf2_sha512$10000$seasalt$FQCNpiZpTb0zub+HBsH6TOwyRxJ19FwvjbweatNmK/Y=',
    '$firebase-scrypt$rounds=8,mem=14$AAAA$Bw$AAAA$AAAAAA', '$auth0-sha256$pos=middle$$' + 'A'.repeat(43), '$auth0-md4$pos=prefix$$' + 'A'.repeat(22),
    '$auth0-sha1$pos=prefix,key=AAAA$$' + 'A'.repeat(27), '$2b$10$' + 'é'.repeat(53)
  ]
  for (const hash of bad) {
    refused(t, () => parsePasswordHash(hash), JSON.stringify(hash).slice(0, 60))
    t.notOk(await verifyPasswordHash(hash, 'password'), `${JSON.stringify(hash).slice(0, 60)} verifies nothing`)
  }
})

t.test("isNativeHash: Roster's own argon2id at the given cost, and nothing else", async (t) => {
  const cost = { memoryKib: 1024, passes: 1 }
  const own = await argon2Hash('pw', { algorithm: 2, memoryCost: 1024, timeCost: 1, parallelism: 1 })
  t.ok(isNativeHash(own, cost))
  t.notOk(isNativeHash(own, { memoryKib: 19_456, passes: 2 }), 'another cost')
  t.notOk(isNativeHash(await argon2Hash('pw', { algorithm: 1, memoryCost: 1024, timeCost: 1, parallelism: 1 }), cost), 'argon2i')
  t.notOk(isNativeHash(await bcryptHash('pw', 4), cost), 'bcrypt')
  t.notOk(isNativeHash('', cost), 'no password')
})

t.test('over HTTP: a bcrypt hash signs in, becomes argon2id in the same request, and signs in again', async (t) => {
  const app = await build(t)
  const user = await newUser(app, { password: 'roster-made-1' })
  const imported = await bcryptHash('from-elsewhere-1', 10)
  await app.db.updateTable('users').set({ password_hash: imported }).where('id', '=', user.id).execute()
  const before = await app.db.selectFrom('users').select(['version', 'updated_at']).where('id', '=', user.id).executeTakeFirstOrThrow()

  const wrong = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: 'roster-made-1' } })
  assertProblem(t, wrong, 401, 'INVALID_CREDENTIALS', 'the former password no longer')
  t.equal((await storedHash(app, user.id)), imported, 'a failed check leaves the hash as it was')

  const first = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: 'from-elsewhere-1' } })
  t.equal(first.statusCode, 201, 'the imported password signs in')
  const replaced = await storedHash(app, user.id)
  t.ok(isNativeHash(replaced, { memoryKib: 1024, passes: 1 }), `replaced by argon2id at the configured cost: ${replaced.slice(0, 30)}`)
  const after = await app.db.selectFrom('users').select(['version', 'updated_at']).where('id', '=', user.id).executeTakeFirstOrThrow()
  t.same(after, before, 'the same password: neither the version nor updated_at moves')

  const again = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: 'from-elsewhere-1' } })
  t.equal(again.statusCode, 201, 'and signs in again')
  t.equal(await storedHash(app, user.id), replaced, 'a native hash is left alone')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: 'from-elsewhere-2' } }), 401, 'INVALID_CREDENTIALS')
})

t.test('over HTTP: a login racing a password change does not overwrite the new password', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app)
  // A slow hash, so that the change lands while the login is still checking the password it read.
  await app.db.updateTable('users').set({ password_hash: await bcryptHash('old-imported-pass', 13) }).where('id', '=', user.id).execute()

  const login = app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: 'old-imported-pass' } })
  await new Promise((resolve) => setTimeout(resolve, 150))
  const change = await app.inject({ method: 'PUT', url: `/users/${user.id}/password`, headers: admin.headers, payload: { password: 'brand-new-pass-1' } })
  t.equal(change.statusCode, 204, 'the change is made')
  assertProblem(t, await login, 401, 'INVALID_CREDENTIALS', 'the login that checked the former hash issues nothing')

  const stored = await storedHash(app, user.id)
  t.ok(await verifyPasswordHash(stored, 'brand-new-pass-1'), 'the stored hash is the new password\'s')
  t.equal((await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: 'brand-new-pass-1' } })).statusCode, 201)
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: 'old-imported-pass' } }), 401, 'INVALID_CREDENTIALS')
})

async function storedHash(app: Awaited<ReturnType<typeof build>>, id: number): Promise<string> {
  return (await app.db.selectFrom('users').select('password_hash').where('id', '=', id).executeTakeFirstOrThrow()).password_hash
}
