// Fills a database directly (batched inserts, not the API): N users with one to three addresses each, a spread of
// names and statuses, and one valid token per user written to a file for the load generator.
//
//   npm run db:seed -- --users 100000 [--tokens bench/results/tokens.jsonl] [--password seed-password-1]
//
// Targets DATABASE_URL (the embedded SQLite file when unset); migrates first. Users are added after existing ones.
import { createWriteStream } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { dirname } from 'node:path'
import { parseArgs } from 'node:util'
import { sql, type Insertable } from 'kysely'
import type { EmailsTable, RefreshTokensTable, SessionsTable, TokensTable, UsersTable } from '../db/types.js'
import { loadConfig } from '../src/config.js'
import { createDatabase } from '../src/database/index.js'
import { newToken, Passwords } from '../src/accounts/secrets.js'
import { tallyUsers } from '../src/accounts/tally.js'
import { foldedKey } from '../src/common/text.js'

const FIRST = ['Ada', 'Grace', 'Alan', 'Edsger', 'Barbara', 'Donald', 'Margaret', 'Ken', 'Dennis', 'Radia', 'Leslie',
  'Frances', 'John', 'Katherine', 'Linus', 'Sophie', 'Tim', 'Hedy', 'Claude', 'Niklaus', 'Annie', 'Bjarne', 'Guido', 'Yukihiro']
const LAST = ['Lovelace', 'Hopper', 'Turing', 'Dijkstra', 'Liskov', 'Knuth', 'Hamilton', 'Thompson', 'Ritchie', 'Perlman',
  'Lamport', 'Allen', 'McCarthy', 'Johnson', 'Torvalds', 'Wilson', 'Berners-Lee', 'Lamarr', 'Shannon', 'Wirth', 'Easley', 'Stroustrup']

export interface SeedOptions {
  url?: string | undefined
  users: number
  tokensFile: string
  password: string
  ttlSeconds?: number
  log?: (line: string) => void
}

export interface SeededUser { id: number; token: string; refresh: string; email: string; name: string; status: 'ACTIVE' | 'BANNED' }

/** Seeds the database and writes one JSON line per user ({ id, token, email, name, status }) to the tokens file. */
export async function seed(options: SeedOptions): Promise<{ users: number; emails: number; ms: number }> {
  const log = options.log ?? (() => {})
  const started = Date.now()
  const { db, dialect, migrate } = createDatabase({ url: options.url, poolSize: 4 })
  await mkdir(dirname(options.tokensFile), { recursive: true })
  const INSERT_ROWS = 2000
  const out = createWriteStream(options.tokensFile)
  let emails = 0
  try {
    await migrate()
    const passwordHash = await new Passwords().hash(options.password)
    const max = await db.selectFrom('users').select((eb) => eb.fn.max('id').as('m')).executeTakeFirst()
    let nextId = Number(max?.m ?? 0) + 1
    const maxEmail = await db.selectFrom('emails').select((eb) => eb.fn.max('id').as('m')).executeTakeFirst()
    let nextEmailId = Number(maxEmail?.m ?? 0) + 1
    const maxSession = await db.selectFrom('sessions').select((eb) => eb.fn.max('id').as('m')).executeTakeFirst()
    let nextSessionId = Number(maxSession?.m ?? 0) + 1
    // Users per transaction; each insert takes at most INSERT_ROWS rows, so that 11 columns × 2000 rows stays under
    // SQLite's 32 766 bound values, and MySQL's packets stay small.
    const batch = 2000
    const now = Date.now()
    const expires = now + (options.ttlSeconds ?? 7 * 86_400) * 1000
    const tag = now.toString(36)

    for (let done = 0; done < options.users; done += batch) {
      const size = Math.min(batch, options.users - done)
      const users: Array<Insertable<UsersTable> & { id: number }> = []
      const rows: Array<Insertable<EmailsTable> & { id: number }> = []
      const tokens: Array<Insertable<TokensTable>> = []
      const sessions: Array<Insertable<SessionsTable> & { id: number }> = []
      const refreshTokens: Array<Insertable<RefreshTokensTable>> = []
      const lines: string[] = []
      for (let i = 0; i < size; i++) {
        const id = nextId++
        const name = `${FIRST[id % FIRST.length]} ${LAST[Math.floor(id / FIRST.length) % LAST.length]} ${id}`
        users.push({
          id, name, name_search: foldedKey(name), password_hash: passwordHash,
          status: id % 20 === 0 ? 'BANNED' : 'ACTIVE', role: 'user',
          version: 1, created_at: now, updated_at: now
        })
        const count = 1 + (id % 3)
        let primaryAddress = ''
        for (let k = 0; k < count; k++) {
          const address = `${k === 0 ? '' : `alt${k}.`}user${id}.${tag}@example.com`
          if (k === 0) primaryAddress = address
          rows.push({
            id: nextEmailId++, user_id: id, address, address_norm: foldedKey(address),
            primary_user_id: k === 0 ? id : null, version: 1, created_at: now + k, updated_at: now + k,
            verified_at: now + k, claimed_at: now + k
          })
        }
        // One session each, with an access token and a refresh token, as a login would leave them.
        const sessionId = nextSessionId++
        sessions.push({ id: sessionId, user_id: id, created_at: now, last_used_at: now, expires_at: expires, ends_at: expires, client: 'seed' })
        const { token, hash } = newToken()
        tokens.push({ token_hash: hash, user_id: id, session_id: sessionId, created_at: now, expires_at: expires })
        const refresh = newToken()
        refreshTokens.push({ token_hash: refresh.hash, session_id: sessionId, created_at: now, expires_at: expires, used_at: null })
        lines.push(JSON.stringify({ id, token, refresh: refresh.token, email: primaryAddress, name, status: users[users.length - 1]!.status }))
      }
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('users').values(users).execute()
        await tallyUsers(trx, users[0]!.id, users.length)
        for (let at = 0; at < rows.length; at += INSERT_ROWS) await trx.insertInto('emails').values(rows.slice(at, at + INSERT_ROWS)).execute()
        await trx.insertInto('sessions').values(sessions).execute()
        await trx.insertInto('tokens').values(tokens).execute()
        await trx.insertInto('refresh_tokens').values(refreshTokens).execute()
      })
      emails += rows.length
      if (!out.write(lines.join('\n') + '\n')) await new Promise<void>((r) => out.once('drain', () => r()))
      if ((done / batch) % 50 === 0) log(`seeded ${done + size} / ${options.users} users`)
    }
    if (dialect === 'mysql') await sql`analyze table users, emails, tokens, sessions, refresh_tokens`.execute(db)
    else {
      // Table statistics for the planner, without STAT4's samples: with them, SQLite re-prepares every statement
      // whose bound values it compared with the samples, a cost the service never has, since it never runs ANALYZE.
      await sql`analyze`.execute(db)
      const stat4 = await sql`select 1 from sqlite_master where name = 'sqlite_stat4'`.execute(db)
      if (stat4.rows.length > 0) await sql`delete from sqlite_stat4`.execute(db)
    }
  } finally {
    await new Promise<void>((r) => out.end(() => r()))
    await db.destroy()
  }
  return { users: options.users, emails, ms: Date.now() - started }
}

const USAGE = `npm run db:seed -- [--users N] [--tokens FILE] [--password PASSWORD]

Fills DATABASE_URL (the embedded SQLite file when unset) with N users (1000), their addresses, and a session and
tokens for each; writes one JSON line per user, with its tokens, to FILE (bench/results/tokens.jsonl).`

if (import.meta.url === `file://${process.argv[1]}`) {
  let values
  try {
    values = parseArgs({
      options: {
        users: { type: 'string', default: '1000' },
        tokens: { type: 'string', default: 'bench/results/tokens.jsonl' },
        password: { type: 'string', default: 'seed-password-1' },
        help: { type: 'boolean', short: 'h', default: false }
      }
    }).values
  } catch (err) {
    console.error(`${(err as Error).message}\n\n${USAGE}`)
    process.exit(2)
  }
  if (values.help) {
    console.log(USAGE)
    process.exit(0)
  }
  const users = Number(values.users)
  if (!Number.isSafeInteger(users) || users < 1) {
    console.error(`--users takes a positive integer\n\n${USAGE}`)
    process.exit(2)
  }
  const config = loadConfig()
  const result = await seed({ url: config.DATABASE_URL, users, tokensFile: values.tokens, password: values.password, log: console.log })
  console.log(`seeded ${result.users} users and ${result.emails} addresses in ${result.ms} ms; tokens in ${values.tokens}`)
}
