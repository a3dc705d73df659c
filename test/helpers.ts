import { createHash, randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Migrator } from 'kysely'
import type { Test } from 'tap'
import { createConnection, type Connection, type RowDataPacket } from 'mysql2/promise'
import { migrationProvider } from '../db/migrations/index.js'
import { buildApp, type App } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import { createDatabase, type Db } from '../src/database/index.js'
import type { MailOptions } from '../src/mail/kind.js'
import type { DelivererOptions } from '../src/outbox/deliverer.js'
import type { SequencerOptions } from '../src/events/sequencer.js'
import type { WebhookPluginOptions } from '../src/webhooks/plugin.js'
import type { PurgeOptions } from '../src/sessions/purge.js'
import type { ImportWorkerOptions } from '../src/imports/plugin.js'
import type { BanLiftOptions } from '../src/users/ban-lift.js'
import type { DeletionOptions } from '../src/users/deletion.js'

/** Which engine this run of the suite uses: set by scripts/test.mjs for each leg. */
export const ENGINE = process.env.TEST_DB === 'mysql' ? 'mysql' : 'sqlite'
export const MYSQL_URL = (process.env.TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306').replace(/\/+$/, '')

export const ADMIN = { email: 'root@example.com', password: 'root-password-1' }

/**
 * A TCP port free on 127.0.0.1 at the time of asking, for a server of the test's own. Taken below the kernel's
 * ephemeral range (/proc/sys/net/ipv4/ip_local_port_range, 32768 and up by default), where the port of no outgoing
 * connection is chosen: a port the kernel hands out for `listen(0)` is free only until the next connection to
 * MariaDB or Redis takes it, which on a host running both legs side by side happened between asking and starting.
 * Random, so that the test processes running at once rarely ask for the same one, and tried before it is given.
 * Where the range leaves no room below it, the kernel's choice it is.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; BELOW_EPHEMERAL >= 1024 && attempt < 200; attempt++) {
    const port = BELOW_EPHEMERAL + Math.floor(Math.random() * 12_000)
    if (!handedOut.has(port) && await listenOnce(port) !== undefined) {
      handedOut.add(port)
      return port
    }
  }
  const port = await listenOnce(0)
  if (port === undefined) throw new Error('no TCP port free on 127.0.0.1')
  return port
}
const handedOut = new Set<number>()
/**
 * The first of the 12,000 ports just below the kernel's ephemeral range, read once; below 1024 (none to draw from)
 * where the range cannot be read or leaves no room.
 */
const BELOW_EPHEMERAL = (() => {
  try {
    const first = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0])
    return Number.isInteger(first) ? first - 12_000 : 0
  } catch {
    return 0
  }
})()

/** Listens on `port` of 127.0.0.1 (0: one the kernel picks) and closes again: the port it got, or undefined if taken. */
async function listenOnce(port: number): Promise<number | undefined> {
  const server = net.createServer()
  const bound = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => resolve(true))
  })
  if (!bound) return undefined
  const got = (server.address() as net.AddressInfo).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return got
}

/** A fresh, empty database URL for one app, and how to drop it afterwards. */
export async function freshDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  if (ENGINE === 'sqlite') return { url: 'sqlite::memory:', drop: async () => {} }
  const name = `roster_t_${process.pid}_${randomBytes(4).toString('hex')}`
  const admin = await createConnection(MYSQL_URL)
  await admin.query(`create database \`${name}\` character set utf8mb4`)
  await admin.end()
  return {
    url: `${MYSQL_URL}/${name}`,
    drop: async () => {
      const conn = await createConnection(MYSQL_URL)
      await conn.query(`drop database if exists \`${name}\``)
      await conn.end()
    }
  }
}

/**
 * A fresh database with no app on it, for a test of one migration: `migrateTo(name)` moves it up or down to `name`
 * and asserts that the step went through.
 */
export async function migratingDatabase(t: Test): Promise<{ db: Db; migrateTo: (name: string) => Promise<void> }> {
  const { url, drop } = await freshDatabase()
  const { db } = createDatabase({ url })
  t.teardown(async () => {
    await db.destroy()
    await drop()
  })
  const migrator = new Migrator({ db, provider: migrationProvider })
  return { db, migrateTo: async (name) => { t.equal((await migrator.migrateTo(name)).error, undefined, `migrated to ${name}`) } }
}

/**
 * MySQL: a fresh database with every migration applied, made from a template migrated once per set of migrations
 * (`roster_tpl_<hash>`): replaying its tables' final definitions takes a fraction of the time the migrations' DDL
 * does, and most tests build an app on a fresh database. SQLite: a fresh in-memory one, which the app migrates.
 */
export async function migratedDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  if (ENGINE === 'sqlite') return freshDatabase()
  // A template that could not be made is asked for again by the next app, not kept as a failure.
  template ??= makeTemplate().catch((err: unknown) => {
    template = undefined
    throw err
  })
  const { creates, filled, name: tpl } = await template
  const db = await freshDatabase()
  const conn = await createConnection(db.url)
  try {
    await conn.query('set foreign_key_checks = 0')
    for (const create of creates) await conn.query(create)
    for (const table of filled) await conn.query(`insert into \`${table}\` select * from \`${tpl}\`.\`${table}\``)
  } finally {
    await conn.end()
  }
  return db
}

interface Template { name: string; creates: string[]; filled: string[] }
let template: Promise<Template> | undefined

/** Makes the template for this set of migrations unless another test process has (under a lock); its tables. */
async function makeTemplate(): Promise<Template> {
  const dir = new URL('../db/migrations/', import.meta.url)
  const hash = createHash('sha256')
  for (const file of readdirSync(dir).sort()) hash.update(file).update(readFileSync(new URL(file, dir)))
  const name = `roster_tpl_${hash.digest('hex').slice(0, 12)}`
  const admin = await createConnection(MYSQL_URL)
  try {
    const [locked] = await rows(admin, 'select get_lock(\'roster_tpl\', 120) as got')
    if (Number(locked?.got) !== 1) throw new Error('the test template\'s lock was not had in 120 s')
    const ready = await rows(admin, 'select 1 from information_schema.tables where table_schema = ? and table_name = \'template_ready\'', [name])
    if (ready.length === 0) {
      for (const old of await rows(admin, 'select schema_name as name from information_schema.schemata where schema_name like \'roster\\_tpl\\_%\'')) {
        await admin.query(`drop database \`${String(old.name)}\``)
      }
      await admin.query(`create database \`${name}\` character set utf8mb4`)
      const opened = createDatabase({ url: `${MYSQL_URL}/${name}` })
      await opened.migrate()
      await opened.db.destroy()
      await admin.query(`create table \`${name}\`.template_ready (x integer)`)
    }
    await admin.query('select release_lock(\'roster_tpl\')')
    const tables = (await rows(admin, 'select table_name as name from information_schema.tables where table_schema = ? and table_name <> \'template_ready\'', [name]))
    const creates: string[] = []
    const filled: string[] = []
    for (const table of tables) {
      const [create] = await rows(admin, `show create table \`${name}\`.\`${String(table.name)}\``)
      creates.push(String(create?.['Create Table']))
      if ((await rows(admin, `select 1 from \`${name}\`.\`${String(table.name)}\` limit 1`)).length > 0) filled.push(String(table.name))
    }
    return { name, creates, filled }
  } finally {
    await admin.end()
  }
}

async function rows(conn: Connection, query: string, params: unknown[] = []): Promise<RowDataPacket[]> {
  const [result] = await conn.query<RowDataPacket[]>(query, params)
  return result
}

/** A folder of the test's own under the system's temporary folder, removed with everything in it when the test ends. */
export function tempDir(t: Pick<Test, 'teardown'>, prefix = 'roster-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/**
 * A fresh database that several app instances (or a separate server process) can open at once: a file on the
 * embedded engine, a database of its own on MySQL. Removed when the test ends.
 */
export async function sharedDatabase(t: Pick<Test, 'teardown'>): Promise<string> {
  if (ENGINE === 'sqlite') return `sqlite:${join(tempDir(t), 'shared.sqlite')}`
  const db = await freshDatabase()
  t.teardown(db.drop)
  return db.url
}

export interface BuildOptions {
  env?: Record<string, string>
  /** Runs before the app is ready: a test may add routes of its own. */
  extend?: (app: App) => void | Promise<void>
  /** Use this database instead of a fresh one (its owner drops it). */
  url?: string
  /** Capture the log here (set LOG_LEVEL in env to see anything). */
  logStream?: { write: (line: string) => void }
  /** Timings of the outbox and its mail. */
  mail?: Partial<DelivererOptions & MailOptions>
  /** Timings of the events' sequencer and purge. */
  events?: Partial<SequencerOptions>
  /** The webhooks' resolver and delivery timings. */
  webhooks?: WebhookPluginOptions
  /** Timings of the purge of expired sessions and tokens. */
  purge?: Partial<PurgeOptions>
  /** Timings of the imports' background work. */
  imports?: Partial<ImportWorkerOptions>
  /** How often ended bans are lifted. */
  bans?: Partial<BanLiftOptions>
  /** How often scheduled deletions are made final and deleted users' events erased. */
  deletions?: Partial<DeletionOptions>
}

/** Builds the app on a fresh database, with an admin, closed (and its database dropped) when the test ends. */
export async function build(t: Test, options: BuildOptions = {}): Promise<App> {
  const db = options.url ? { url: options.url, drop: async () => {} } : await migratedDatabase()
  const config = loadConfig({
    LOG_LEVEL: 'silent',
    DATABASE_URL: db.url,
    ADMIN_EMAIL: ADMIN.email,
    ADMIN_PASSWORD: ADMIN.password,
    RATE_LIMIT_MAX: '100000000', // throttling has tests of its own
    MAIL_MAX_PER_CLIENT: '100000', // so has the mail limit: tests sign many users up from one address
    // Load shedding too (test/faults.test.ts): a test that blocks its own event loop, or a busy CI host, must not
    // have its requests shed.
    MAX_EVENT_LOOP_DELAY_MS: '0',
    // Password hashes at the least cost the settings allow: a hash at OWASP's cost is most of the CPU a test spends,
    // and what is tested is which password checks out, not how long it takes. The black-box leg, which runs the
    // service as `npm start` does, and the login timing probe there keep OWASP's cost.
    PASSWORD_HASH_MEMORY_KIB: '1024',
    PASSWORD_HASH_PASSES: '1',
    ...options.env
  })
  const { logStream, mail, events, webhooks, purge, imports, bans, deletions } = options
  const app = await buildApp(config, { logStream, mail, events, webhooks, purge, imports, bans, deletions })
  t.teardown(async () => {
    await app.close()
    await db.drop()
  })
  await options.extend?.(app)
  await app.ready()
  return app
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

/** A login's whole answer: token, refresh_token, session, user… */
export async function session(app: App, email: string, password: string, extra: { remoteAddress?: string; headers?: Record<string, string> } = {}) {
  const res = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email, password }, ...extra })
  if (res.statusCode !== 201) throw new Error(`login ${email} failed: ${res.statusCode} ${res.body}`)
  return res.json<{ token: string; refresh_token: string; session: { id: number }; user: { id: number } }>()
}

export async function login(app: App, email: string, password: string): Promise<string> {
  return (await session(app, email, password)).token
}

let counter = 0
export interface TestUser {
  id: number
  email: string
  password: string
  token: string
  headers: { authorization: string }
  sessionId: number
  refreshToken: string
}

/** Signs a new user up and logs it in. */
export async function newUser(app: App, fields: { name?: string; email?: string; password?: string } = {}): Promise<TestUser> {
  counter += 1
  const email = fields.email ?? `user${counter}.${randomBytes(3).toString('hex')}@example.com`
  const password = fields.password ?? 'password-123'
  const res = await app.inject({ method: 'POST', url: '/users', payload: { name: fields.name ?? `User ${counter}`, email, password } })
  if (res.statusCode !== 201) throw new Error(`signup failed: ${res.statusCode} ${res.body}`)
  const s = await session(app, email, password)
  return { id: res.json().id, email, password, token: s.token, headers: bearer(s.token), sessionId: s.session.id, refreshToken: s.refresh_token }
}

export async function adminUser(app: App): Promise<TestUser> {
  const s = await session(app, ADMIN.email, ADMIN.password)
  return { id: s.user.id, ...ADMIN, token: s.token, headers: bearer(s.token), sessionId: s.session.id, refreshToken: s.refresh_token }
}

type Part = string | { filename: string; content: string | Buffer; type?: string }

/** A multipart/form-data body and its headers, for inject. */
export function multipart(fields: Record<string, Part>): { payload: Buffer; headers: Record<string, string> } {
  const boundary = '----roster' + randomBytes(8).toString('hex')
  const chunks: Buffer[] = []
  for (const [name, part] of Object.entries(fields)) {
    if (typeof part === 'string') {
      chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${part}\r\n`))
    } else {
      chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${part.filename}"\r\n` +
        `Content-Type: ${part.type ?? 'application/octet-stream'}\r\n\r\n`))
      chunks.push(Buffer.isBuffer(part.content) ? part.content : Buffer.from(part.content))
      chunks.push(Buffer.from('\r\n'))
    }
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`))
  return { payload: Buffer.concat(chunks), headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } }
}

export const form = (fields: Record<string, string>) => ({
  payload: new URLSearchParams(fields).toString(),
  headers: { 'content-type': 'application/x-www-form-urlencoded' }
})

/** Asserts a problem+json answer with the given status and code. */
export function assertProblem(
  t: Test, res: { statusCode: number; headers: Record<string, unknown>; json: () => unknown; body: string }, status: number, code: string, msg?: string
) {
  t.equal(res.statusCode, status, `${msg ?? code}: status ${status} (body ${res.body.slice(0, 200)})`)
  t.match(String(res.headers['content-type']), /^application\/problem\+json/, `${msg ?? code}: problem+json`)
  const body = res.json() as { code?: unknown; status?: unknown; title?: unknown }
  t.equal(body.code, code, `${msg ?? code}: code`)
  t.equal(body.status, status, `${msg ?? code}: body status`)
  t.type(body.title, 'string')
}

/**
 * Marks an address verified directly in the database, for tests about what verification allows (logging in,
 * becoming primary) rather than about verifying: test/verification/ proves the real flow through SMTP.
 */
export async function markVerified(app: App, address: string): Promise<void> {
  const result = await app.db.updateTable('emails').set({ verified_at: Date.now() }).where('address_norm', '=', address.toLowerCase()).executeTakeFirst()
  if (Number(result.numUpdatedRows) !== 1) throw new Error(`no address ${address} to mark verified`)
}
