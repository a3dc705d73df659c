import t from 'tap'
import type { App } from '../../src/app.js'
import { adminUser, assertProblem, build, newUser, type TestUser } from '../helpers.js'

/** The addresses of the users a filter selects, in id order (every page followed). */
async function selected(app: App, who: TestUser, filter: string, extra = ''): Promise<string[]> {
  const out: string[] = []
  let url: string | null = `/users?filter=${encodeURIComponent(filter)}&limit=2${extra}`
  while (url) {
    const res: { statusCode: number; body: string } = await app.inject({ url, headers: who.headers })
    if (res.statusCode !== 200) throw new Error(`${filter}: ${res.statusCode} ${res.body}`)
    const body = JSON.parse(res.body) as { items: Array<{ email: string }>; next: string | null }
    out.push(...body.items.map((u) => u.email))
    url = body.next
  }
  return out
}

t.test('a filter\'s strings are JSON strings: a backslash, one at the end, \\u escapes; a bad escape is refused', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  await newUser(app, { name: 'Back\\Slash\\', email: 'slash@example.com' })
  await newUser(app, { name: 'Plain', email: 'plain@example.com' })
  const cases: Array<[string, string[]]> = [
    ['name eq "back\\\\slash\\\\"', ['slash@example.com']],
    ['name ew "\\\\"', ['slash@example.com']],
    ['name co "\\\\s"', ['slash@example.com']],
    ['name sw "\\u0062ack"', ['slash@example.com']],
    ['name eq "pla\\u0069n" or name ew "h\\\\"', ['slash@example.com', 'plain@example.com']]
  ]
  for (const [filter, want] of cases) t.same(await selected(app, admin, filter), want, filter)
  for (const filter of ['name eq "\\x"', 'name eq "\\u12"']) {
    assertProblem(t, await app.inject({ url: `/users?filter=${encodeURIComponent(filter)}`, headers: admin.headers }), 400, 'INVALID_FILTER', filter)
  }
})

t.test('the filter language over GET /users: every operator, precedence, escapes', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const ada = await newUser(app, { name: 'Ada Lovelace', email: 'ada@example.com' })
  await newUser(app, { name: 'Grace Hopper', email: 'grace@navy.example' })
  const quoted = await newUser(app, { name: 'Say "Hi" 100%_done', email: 'quote@example.com' })
  await app.inject({ method: 'POST', url: `/users/${ada.id}/emails`, headers: ada.headers, payload: { address: 'ada@second.example' } })
  await app.inject({ method: 'PUT', url: `/users/${quoted.id}/status`, headers: admin.headers, payload: { status: 'BANNED' } })
  await app.db.updateTable('users').set({ external_id: 'ext-7' }).where('id', '=', quoted.id).execute()
  const everyone = ['root@example.com', 'ada@example.com', 'grace@navy.example', 'quote@example.com']

  const cases: Array<[string, string[]]> = [
    ['email eq "ADA@example.com"', ['ada@example.com']],
    ['email eq "ada@second.example"', ['ada@example.com']],
    ['email ne "ada@example.com"', ['root@example.com', 'grace@navy.example', 'quote@example.com']],
    ['email co "navy"', ['grace@navy.example']],
    ['email sw "gr"', ['grace@navy.example']],
    ['email ew ".example"', ['ada@example.com', 'grace@navy.example']],
    ['email pr', everyone],
    ['name eq "ada lovelace"', ['ada@example.com']],
    ['name co "100%_"', ['quote@example.com']],
    ['name co "0%x"', []],
    ['name eq "say \\"hi\\" 100%_done"', ['quote@example.com']],
    ['status eq "BANNED"', ['quote@example.com']],
    ['role eq "admin"', ['root@example.com']],
    ['external_id eq "ext-7"', ['quote@example.com']],
    ['external_id pr', ['quote@example.com']],
    // Users without the attribute are not equal to a value, and not (eq) is true of them: SQL's null does not leave them out.
    ['external_id ne "ext-7"', ['root@example.com', 'ada@example.com', 'grace@navy.example']],
    ['not (external_id eq "ext-7")', ['root@example.com', 'ada@example.com', 'grace@navy.example']],
    ['not (external_id eq "nobody")', everyone],
    ['created_at gt "2000-01-01T00:00:00Z"', everyone],
    ['created_at lt "2000-01-01T00:00:00Z"', []],
    ['created_at gt "2000-01-01t01:00:00.5+01:00"', everyone],
    [`id ge ${ada.id} and id le ${quoted.id}`, ['ada@example.com', 'grace@navy.example', 'quote@example.com']],
    ['not (status eq "ACTIVE")', ['quote@example.com']],
    // and binds tighter than or; parentheses change it.
    ['role eq "admin" or name sw "ada" and status eq "BANNED"', ['root@example.com']],
    ['(role eq "admin" or name sw "ada") and status eq "ACTIVE"', ['root@example.com', 'ada@example.com']],
    ['email ew "example.com" and not (name sw "say")', ['root@example.com', 'ada@example.com']]
  ]
  for (const [filter, want] of cases) t.same(await selected(app, admin, filter), want, filter)
  t.same(await selected(app, admin, 'email ew ".example"', '&status=ACTIVE'), ['ada@example.com', 'grace@navy.example'], 'combined with the other filters by AND')
  t.same(await selected(app, ada, 'email pr'), ['ada@example.com'], 'a plain user still sees at most itself')
  t.same(await selected(app, ada, 'role eq "admin"'), [], 'and nothing of others through a filter')

  const refused: Array<[string, RegExp]> = [
    ['name eq', /malformed: a comparison ends without the value/],
    ['name eq "a")', /malformed: `\)` follows a whole expression/],
    ['"a" eq name', /malformed: "a" stands where an attribute is expected/],
    ['name pr "a"', /malformed: "a" follows a whole expression/],
    ['status eq Active', /malformed: `Active` is not a value/],
    ['emails[value eq "x"', /malformed: a \[ is not closed/],
    ['name eq "a" or or', /malformed: `or` is not an attribute followed by one of eq/],
    ['name xx "a"', /malformed/],
    ['name eq "unterminated', /malformed/],
    ['(name eq "a"', /malformed: a \( is not closed/],
    ['name eq "a" and', /malformed: it ends where an expression is expected/],
    ['', /empty/],
    ['name pr not (name pr)', /malformed: `not` follows a whole expression/],
    ['(name pr) not (name pr)', /malformed: `not` follows a whole expression/],
    ['emails[value eq "x" not (value eq "y")]', /malformed: `not` follows a whole expression/],
    ['name eq "c" andd name eq "d"', /malformed: `andd` follows a whole expression/],
    ['name pr name pr', /malformed: `name` follows a whole expression/],
    ['not name eq "a"', /`not` takes an expression in parentheses/],
    ['name eq "a" and not status eq "ACTIVE"', /`not` takes an expression in parentheses/],
    ['emails[not value eq "a"]', /`not` takes an expression in parentheses/],
    ['password eq "x"', /password/],
    ['metadata.unknown.plan eq "x"', /metadata\.unknown\.plan/],
    [`metadata.public.${'k'.repeat(65)} eq "x"`, /metadata\.public\.k/],
    ['metadata.public.n eq 1e400', /past what a double holds/],
    ['metadata.public.n gt -1e400', /past what a double holds/],
    ['status eq "GONE"', /ACTIVE, BANNED/],
    ['status co "ACT"', /only eq and ne/],
    ['created_at gt "yesterday"', /RFC 3339/],
    ['created_at gt "2026-01-01T00:00:00"', /RFC 3339/],
    ['created_at gt "2026-01-01"', /RFC 3339/],
    ['created_at gt "2026-02-30T00:00:00Z"', /RFC 3339/],
    ['created_at co "2020"', /time/],
    ['id eq "x"', /an id is needed/],
    ['name eq 5', /a string is needed/],
    ['email[type eq "work"]', /\[ \]/],
    [Array.from({ length: 51 }, (_, i) => `id eq ${i + 1}`).join(' or '), /more than 50/]
  ]
  for (const [filter, detail] of refused) {
    const res = await app.inject({ url: `/users?filter=${encodeURIComponent(filter)}`, headers: admin.headers })
    assertProblem(t, res, 400, 'INVALID_FILTER', filter)
    t.match(res.json<{ detail: string }>().detail, detail, `${filter}: the detail points at the offending part`)
  }
})
