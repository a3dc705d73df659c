// Both engines give the same answer to the same input: generated names and addresses (valid, hostile, and those
// that change length or case under Unicode rules) are sent to the app on SQLite and to the app on MySQL, and the
// statuses and codes must match. Runs in the MySQL leg of the suite, where both engines are at hand.
import fc from 'fast-check'
import t from 'tap'
import type { App } from '../../src/app.js'
import { build, ENGINE, newUser, type TestUser } from '../helpers.js'

const RUNS = Number(process.env.PROPERTY_RUNS ?? 60)

const tricky = fc.constantFrom('İ', '\u0958', '\uFB2C', 'ß', 'ẞ', 'Σ', 'ς', 'ﬃ', 'Å', 'A\u030A', 'é', 'e\u0301', '\u0000', '\u200B', '\u202E',
  '\uFEFF', ' ', '\t', '%', '_', '!', '\\', '*', '"', "'", '😀', '\uD800', 'a')
const names = fc.oneof(
  fc.string({ maxLength: 210 }),
  fc.string({ unit: 'grapheme', maxLength: 120 }),
  fc.array(tricky, { minLength: 1, maxLength: 205 }).map((a) => a.join('')),
  fc.tuple(tricky, fc.integer({ min: 95, max: 205 })).map(([c, n]) => c.repeat(n))
)
const addresses = fc.oneof(
  fc.emailAddress(),
  fc.emailAddress().map((a) => a.toUpperCase()),
  fc.tuple(fc.emailAddress(), tricky).map(([a, c]) => c + a),
  fc.tuple(fc.emailAddress(), tricky).map(([a, c]) => a.replace('@', `${c}@`)),
  fc.string({ maxLength: 260 }),
  fc.constantFrom(' a@b.co', 'a@b.co ', 'A@B.CO', 'a@b', '@b.co', 'a@@b.co', `${'a'.repeat(250)}@b.co`, `${'a'.repeat(64)}@${'b'.repeat(63)}.co`)
)

interface Side { app: App; user: TestUser }

/** Percent-encodes a query value; a lone surrogate (which encodeURIComponent refuses) goes out as invalid UTF-8. */
function encodeValue(text: string): string {
  try {
    return encodeURIComponent(text)
  } catch {
    return encodeURIComponent(text.replace(/[\uD800-\uDFFF]/g, '')) + '%ED%A0%80'
  }
}
const answer = (res: { statusCode: number; body: string }) => {
  const code = res.statusCode >= 400 ? (JSON.parse(res.body) as { code?: string }).code : undefined
  return `${res.statusCode}${code ? ` ${code}` : ''}`
}

t.test('SQLite and MySQL answer every generated name and address alike', { skip: ENGINE !== 'mysql' && 'needs both engines: runs in the MySQL leg' }, async (t) => {
  const mysql = await build(t)
  const sqlite = await build(t, { url: 'sqlite::memory:' })
  const sides: Side[] = [{ app: sqlite, user: await newUser(sqlite) }, { app: mysql, user: await newUser(mysql) }]
  let n = 0
  const differences: string[] = []
  await fc.assert(fc.asyncProperty(names, addresses, async (name, address) => {
    n += 1
    const each = await Promise.all(sides.map(async ({ app, user }) => {
      const rename = await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: user.headers, payload: { name } })
      // What was kept, as read back: the same on both engines, not only the status.
      const kept = rename.statusCode === 200 ? `${(await app.inject({ url: `/users/${user.id}`, headers: user.headers })).json().name}` : ''
      const signup = await app.inject({ method: 'POST', url: '/users', payload: { name: 'Probe', email: address, password: 'password-123' } })
      const add = await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: `${n}.${address}` } })
      const lookup = await app.inject({ url: `/users?email=${encodeValue(address)}`, headers: user.headers })
      // Remove what was added, so that the address limit is never what decides.
      if (add.statusCode === 201) await app.inject({ method: 'DELETE', url: `/users/${user.id}/emails/${add.json().id}`, headers: user.headers })
      return [...[rename, signup, add, lookup].map(answer), JSON.stringify(kept)]
    }))
    const [onSqlite, onMysql] = each as [string[], string[]]
    for (const [i, what] of ['rename', 'sign-up', 'add address', 'filter by address', 'the name kept'].entries()) {
      if (onSqlite[i] !== onMysql[i]) differences.push(`${what} ${JSON.stringify(what === 'rename' ? name : address)}: SQLite ${onSqlite[i]}, MySQL ${onMysql[i]}`)
      if (/^5/.test(onSqlite[i]!) || /^5/.test(onMysql[i]!)) differences.push(`${what}: a 5xx (${onSqlite[i]} / ${onMysql[i]})`)
    }
  }), { numRuns: RUNS })
  t.same(differences, [], `${n} inputs, four requests each, the same answer on both engines`)
})
