// npm run bench [-- --users 20000 --duration 10 --rounds 5 --connections 50 --reuse --scenarios self-read,login]
// The import and export (--scenarios import,export): BENCH_IMPORT_USERS=100000, BENCH_IMPORT_BIG=1 adds a million.
//
// Seeds MySQL/MariaDB (`roster_bench` by default), starts the built service as `npm start` does and, beside it, bare
// node:http servers doing the same work by hand (the baselines), then runs each scenario with autocannon in a process
// of its own, for a fixed time at a fixed concurrency. Where a scenario has a baseline, the two run in alternating
// rounds (AB, then BA), so that a change in the machine's speed weighs on both alike; the ratios are the medians of the
// rounds' ratios. BENCHMARKS.md describes the method; everything is written to bench/results/latest.json.
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { createReadStream, createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { Readable } from 'node:stream'
import type { ReadableStream as WebStream } from 'node:stream/web'
import { parseArgs } from 'node:util'
import { hash as bcrypt } from '@node-rs/bcrypt'
import { CompiledQuery } from 'kysely'
import { createConnection, type Connection } from 'mysql2/promise'
import { createDatabase } from '../src/database/index.js'
import { newToken, tokenHash } from '../src/accounts/secrets.js'
import { callerQuery } from '../src/auth/caller.js'
import { listUsersQuery } from '../src/users/repository.js'
import { seed, type SeededUser } from '../scripts/seed.js'
import { cpuMicros, mainThreadCpuMicros, startCommand, waitFor } from './processes.js'

const { values: args } = parseArgs({ options: {
  users: { type: 'string', default: '20000' }, duration: { type: 'string', default: '10' }, rounds: { type: 'string', default: '5' },
  connections: { type: 'string', default: '50' }, reuse: { type: 'boolean', default: false },
  'mysql-url': { type: 'string', default: process.env.TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306' }, database: { type: 'string', default: 'roster_bench' },
  scenarios: { type: 'string', default: 'self-read,name-prefix,email-filter,own-emails,rename,refresh,login,scim-list,embedded,metrics,import,export' },
  'sqlite-file': { type: 'string', default: 'bench/results/roster_bench.sqlite' }, 'log-level': { type: 'string', default: 'info' }, 'node-options': { type: 'string', default: '' }
} })

const USERS = Number(args.users)
const DURATION = Number(args.duration)
const ROUNDS = Math.max(1, Number(args.rounds))
const CONNECTIONS = Number(args.connections)
const SERVER = args['mysql-url'].replace(/\/+$/, '')
const DATABASE_URL = `${SERVER}/${args.database}`
const RESULTS = 'bench/results'
// One tokens file per database: a reused database must be driven with its own users' tokens.
const TOKENS = `${RESULTS}/tokens-${args.database}.jsonl`
const SQLITE_FILE = args['sqlite-file']
const SQLITE_TOKENS = `${RESULTS}/tokens-embedded.jsonl`
const PASSWORD = 'seed-password-1'
const ADMIN = { email: 'bench-admin@example.com', password: 'bench-admin-password' }
const PORTS = { roster: 3301, baseline: 3302, baselinePrepared: 3303, writes: 3310, embedded: 3304, embeddedBaseline: 3305, embeddedWarn: 3311,
  metricsOff: 3307, metricsOn: 3312, metricsOnMetrics: 3412, transfer: 3320, transferBaseline: 3321 }
/** Users of the import and export scenarios; BENCH_IMPORT_BIG=1 adds a run of a million, to show the RSS stays flat. */
const IMPORT_SIZES = [Number(process.env.BENCH_IMPORT_USERS ?? 100_000), ...(process.env.BENCH_IMPORT_BIG === '1' ? [1_000_000] : [])]

type Engine = 'mysql' | 'sqlite'
const log = (line: string) => console.log(`# ${line}`)
const url = (port: number) => `http://127.0.0.1:${port}`

/** An empty database: a MySQL database of that name, or a SQLite file of that path (its URL). */
async function freshDatabase(engine: Engine, name: string): Promise<string> {
  if (engine === 'mysql') {
    const conn = await createConnection(SERVER)
    await conn.query(`drop database if exists \`${name}\``).then(() => conn.query(`create database \`${name}\` character set utf8mb4`)).finally(() => conn.end())
    return `${SERVER}/${name}`
  }
  for (const suffix of ['', '-wal', '-shm']) rmSync(name + suffix, { force: true })
  return `sqlite:${name}`
}

/** Seeds the engine's database of its own (kept with --reuse while it has enough users). */
async function prepare(engine: Engine, name: string, tokensFile: string): Promise<void> {
  if (args.reuse && existsSync(tokensFile)) {
    const { db } = createDatabase({ url: engine === 'mysql' ? `${SERVER}/${name}` : `sqlite:${name}` })
    const row = await db.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirst().catch(() => undefined).finally(() => db.destroy())
    if (Number(row?.n) >= USERS) return log(`reusing ${name} (${row?.n} users)`)
  }
  log(`seeding ${USERS} users into ${name}`)
  const result = await seed({ url: await freshDatabase(engine, name), users: USERS, tokensFile, password: PASSWORD, log })
  log(`seeded ${result.users} users, ${result.emails} addresses in ${(result.ms / 1000).toFixed(1)} s`)
}

function startRoster(port: number, env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, startCommand(), {
    env: {
      ...process.env, DATABASE_URL, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: args['log-level'], ADMIN_EMAIL: ADMIN.email, ADMIN_PASSWORD: ADMIN.password,
      DB_POOL_SIZE: '10', NODE_ENV: 'production', NODE_OPTIONS: args['node-options'],
      // The limiter runs (its cost is measured) but the load generator's few callers never reach it; the admin's token,
      // taken once at the start, must outlive a whole run on a slow host.
      RATE_LIMIT_MAX: '100000000', LOGIN_MAX_FAILURES_PER_CLIENT: '100000', ACCESS_TOKEN_TTL_SECONDS: '86400', ...env
    },
    stdio: ['ignore', 'ignore', 'inherit']
  })
}

/** A baseline server of bench/, on `port`, over the bench's MySQL database unless `env` says otherwise. */
function startBaseline(script: string, port: number, env: Record<string, string> = {}): ChildProcess {
  return fork(`bench/${script}`, [], {
    env: { ...process.env, MYSQL_URL: DATABASE_URL, PORT: String(port), POOL_SIZE: '10', ...env },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc']
  })
}

/** An access token of the bench's admin, from a Roster instance; a failed login stops the run. */
async function adminLogin(base: string): Promise<string> {
  const res = await fetch(`${base}/auth/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) })
  return res.status === 201 ? ((await res.json()) as { token: string }).token : Promise.reject(new Error(`the bench admin's login answered ${res.status}: ${await res.text()}`))
}

const memoryKb = (pid: number, field: 'VmRSS' | 'VmHWM') => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0)

interface Figures { scenario: string; rps: number; p50: number; p99: number; errors: number; timeouts: number; non2xx: number; total: number }
type Measured = Figures & { peakRssMb: number; cpuUsPerRequest: number; mainThreadCpuUsPerRequest: number; statementsPerRequest?: number | undefined }
/** A server under load; `scenario`, when set, is the one it is loaded with instead of the round's. */
type Target = { url: string; pid: number; scenario?: string }
type Row = Measured & { target: string }

let statusConnection: Connection | undefined

/** The statements MySQL has run (`Questions`), read around a load run; the services' background polling adds a few a second. */
async function serverStatements(): Promise<number> {
  statusConnection ??= await createConnection(SERVER)
  const [rows] = await statusConnection.query("show global status like 'Questions'") as unknown as [Array<{ Value: string }>]
  return Number(rows[0]?.Value ?? 1) - 1
}

/** Runs `body` while sampling `pid`'s resident set every 100 ms: its result, and the largest sample in MB. */
async function sampling<R>(pid: number, body: () => Promise<R>): Promise<[R, number]> {
  let peak = memoryKb(pid, 'VmRSS')
  const sampler = setInterval(() => { peak = Math.max(peak, memoryKb(pid, 'VmRSS')) }, 100)
  const result = await body().finally(() => clearInterval(sampler))
  return [result, Math.max(peak, memoryKb(pid, 'VmRSS')) / 1024]
}

/** Runs a node script of bench/ to its end: the JSON of the last line it printed. */
function runScript<R>(argv: string[], env: Record<string, string> = {}): Promise<R> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop()!) as R) : reject(new Error(`${argv[0]} exited ${code}`))))
  })
}

/** Runs one scenario in its own process while sampling the server's resident memory and CPU time. */
async function load(
  target: Target, scenario: string, duration: number, adminToken: string, tokensFile = TOKENS, extra: Record<string, unknown> = {}
): Promise<Measured> {
  const statementsBefore = await serverStatements()
  const cpuBefore = cpuMicros(target.pid)
  const mainBefore = mainThreadCpuMicros(target.pid)
  const input = JSON.stringify({ url: target.url, scenario, duration, connections: CONNECTIONS, adminToken, password: PASSWORD, tokensFile, ...extra })
  const [figures, peak] = await sampling(target.pid, () => runScript<Figures>(['bench/load.mjs', input]))
  const per = (micros: number) => Math.round(micros / Math.max(1, figures.total))
  const statements = (await serverStatements()) - statementsBefore
  return {
    ...figures, peakRssMb: Math.round(peak), cpuUsPerRequest: per(cpuMicros(target.pid) - cpuBefore),
    mainThreadCpuUsPerRequest: per(mainThreadCpuMicros(target.pid) - mainBefore),
    statementsPerRequest: Math.round(statements / Math.max(1, figures.total) * 10) / 10
  }
}

/** A warm-up of each target, then rounds of one scenario over them in alternating order (AB, then BA); `before` precedes each load. */
async function alternate<T extends string>(
  targets: Record<T, Target>, label: string, adminToken: string,
  options: { scenario?: string; tokensFile?: string; before?: () => Promise<Record<string, unknown>> } = {}
): Promise<Array<Record<T, Measured>>> {
  const order = Object.keys(targets) as T[]
  const scenario = options.scenario ?? 'self-read'
  const run = async (target: T, duration: number) =>
    load(targets[target], targets[target].scenario ?? scenario, duration, adminToken, options.tokensFile ?? TOKENS, (await options.before?.()) ?? {})
  for (const target of order) await run(target, 3)
  const rounds: Array<Record<T, Measured>> = []
  for (let round = 1; round <= ROUNDS; round++) {
    const sequence = round % 2 === 1 ? order : [...order].reverse()
    log(`${label} round ${round}/${ROUNDS}: ${sequence.join(', then ')}, ${DURATION} s each at ${CONNECTIONS} connections`)
    const measured: Partial<Record<T, Measured>> = {}
    for (const target of sequence) measured[target] = await run(target, DURATION)
    rounds.push(measured as Record<T, Measured>)
  }
  return rounds
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** The medians of a target's per-round ratios to a reference: throughput, p99 and the main thread's CPU. */
function ratiosOf<T extends string>(rounds: Array<Record<T, Measured>>, target: T, reference: T) {
  const of = (f: (m: Measured) => number) => median(rounds.map((r) => f(r[target]) / Math.max(f(r[reference]), 1)))
  return { throughput: of((m) => m.rps), p99: of((m) => m.p99), mainThreadCpu: of((m) => m.mainThreadCpuUsPerRequest) }
}

/** Several rounds of one scenario as one row: mean throughput, median latencies, CPU and statements, summed counts. */
function combine(rounds: Measured[]): Measured {
  const sum = (key: 'errors' | 'timeouts' | 'non2xx' | 'total') => rounds.reduce((n, r) => n + r[key], 0)
  const mid = (f: (r: Measured) => number) => median(rounds.map(f))
  return {
    scenario: rounds[0]!.scenario, rps: rounds.reduce((n, r) => n + r.rps, 0) / rounds.length, p50: mid((r) => r.p50), p99: mid((r) => r.p99),
    errors: sum('errors'), timeouts: sum('timeouts'), non2xx: sum('non2xx'), total: sum('total'), peakRssMb: Math.max(...rounds.map((r) => r.peakRssMb)),
    cpuUsPerRequest: mid((r) => r.cpuUsPerRequest), mainThreadCpuUsPerRequest: mid((r) => r.mainThreadCpuUsPerRequest),
    statementsPerRequest: mid((r) => r.statementsPerRequest ?? 0)
  }
}

/** The rows of an alternating scenario, one per target, and the ratio of `target` to `reference`. */
function compare<T extends string>(rounds: Array<Record<T, Measured>>, target: T, reference: T, scenario?: string) {
  const rows: Row[] = (Object.keys(rounds[0]!) as T[]).map((t) => ({ target: t, ...combine(rounds.map((r) => r[t])), ...(scenario ? { scenario } : {}) }))
  return { rows, rounds, ratios: ratiosOf(rounds, target, reference) }
}

/** Sessions for a refresh run, twice as many as connections, written to the tables as a login leaves them: only refreshes are measured. */
async function freshSessions(): Promise<Record<string, unknown>> {
  const users = readFileSync(TOKENS, 'utf8').split('\n', CONNECTIONS * 8).filter(Boolean).map((l) => JSON.parse(l) as SeededUser)
    .filter((u) => u.status === 'ACTIVE').slice(0, CONNECTIONS * 2)
  const { db } = createDatabase({ url: DATABASE_URL })
  const now = Date.now()
  const lines: string[] = []
  try {
    for (const user of users) {
      const created = await db.insertInto('sessions')
        .values({ user_id: user.id, created_at: now, last_used_at: now, client: 'bench', expires_at: now + 30 * 86_400_000, ends_at: now + 90 * 86_400_000 })
        .executeTakeFirstOrThrow()
      const refresh = newToken()
      await db.insertInto('refresh_tokens')
        .values({ token_hash: refresh.hash, session_id: Number(created.insertId), created_at: now, expires_at: now + 30 * 86_400_000, used_at: null }).execute()
      lines.push(JSON.stringify({ user, refresh: refresh.token }))
    }
  } finally {
    await db.destroy()
  }
  writeFileSync(`${RESULTS}/sessions.jsonl`, lines.join('\n') + '\n')
  return { sessionsFile: `${RESULTS}/sessions.jsonl` }
}

/** Starts `children`, waits for each to answer at its URL, runs `body`, and stops them whatever happens. */
async function serving<R>(children: Array<[ChildProcess, string]>, body: () => Promise<R>): Promise<R> {
  try {
    for (const [child, at] of children) await waitFor(at, child)
    return await body()
  } finally {
    for (const [child] of children) child.kill('SIGTERM')
  }
}

/** The self-read on the embedded default, Roster at the run's log level and at `warn`, against node:http + better-sqlite3. */
async function embedded() {
  await prepare('sqlite', SQLITE_FILE, SQLITE_TOKENS)
  const sqlite = { DATABASE_URL: `sqlite:${SQLITE_FILE}`, METRICS_PORT: '0' }
  const info = startRoster(PORTS.embedded, sqlite)
  const warn = startRoster(PORTS.embeddedWarn, { ...sqlite, LOG_LEVEL: 'warn' })
  const bare = startBaseline('baseline-sqlite.mjs', PORTS.embeddedBaseline, { SQLITE_FILE })
  const ready = (port: number) => `${url(port)}/health/ready`
  return serving([[info, ready(PORTS.embedded)], [warn, ready(PORTS.embeddedWarn)], [bare, `${url(PORTS.embeddedBaseline)}/`]], async () => {
    const rounds = await alternate({
      'baseline-sqlite': { url: url(PORTS.embeddedBaseline), pid: bare.pid! },
      'roster-sqlite': { url: url(PORTS.embedded), pid: info.pid! },
      'roster-sqlite-warn': { url: url(PORTS.embeddedWarn), pid: warn.pid! }
    }, 'embedded self-read', '', { tokensFile: SQLITE_TOKENS })
    return { ...compare(rounds, 'roster-sqlite', 'baseline-sqlite', 'self-read (SQLite)'), warn: ratiosOf(rounds, 'roster-sqlite-warn', 'baseline-sqlite') }
  })
}

/** The self-read on MySQL, metrics on and off, both started afresh; the main instance holds the default metrics port. */
async function metricsOnOff(adminToken: string) {
  const on = startRoster(PORTS.metricsOn, { METRICS_PORT: String(PORTS.metricsOnMetrics) })
  const off = startRoster(PORTS.metricsOff, { METRICS_PORT: '0' })
  return serving([[on, `${url(PORTS.metricsOn)}/health/ready`], [off, `${url(PORTS.metricsOff)}/health/ready`]], async () => {
    const rounds = await alternate({
      roster: { url: url(PORTS.metricsOn), pid: on.pid! }, 'roster-metrics-off': { url: url(PORTS.metricsOff), pid: off.pid! }
    }, 'self-read, metrics on and off', adminToken)
    return compare(rounds, 'roster', 'roster-metrics-off', 'self-read (metrics on/off)')
  })
}

/** A roster NDJSON file of `n` users, each with a verified primary address and one bcrypt hash: its check is not measured. */
async function importFile(n: number): Promise<string> {
  const file = `${RESULTS}/import-${n}.ndjson`
  const [hash, out] = [await bcrypt('bench-import-password', 4), createWriteStream(file)]
  for (let i = 1; i <= n; i++) {
    const line = { name: `Imported User ${i}`, emails: [{ address: `imported-${i}@example.com`, verified: true, primary: true }], password_hash: hash }
    if (!out.write(JSON.stringify(line) + '\n')) await once(out, 'drain')
  }
  await new Promise((resolve) => out.end(resolve))
  return file
}

/** Reads an NDJSON answer to its end twice, the first warming up: its lines, and lines a second. A 503 is tried again. */
async function download(from: string, headers: Record<string, string> = {}, warmUp = false): Promise<{ lines: number; perS: number }> {
  if (!warmUp) await download(from, headers, true)
  const pause = (refused: Response) => refused.text().then(() => new Promise((resolve) => setTimeout(resolve, 1000))).then(() => performance.now())
  let [started, res] = [performance.now(), await fetch(from, { headers })]
  for (let i = 0; res.status === 503 && i < 120; i++) [started, res] = [await pause(res), await fetch(from, { headers })]
  if (res.status !== 200) throw new Error(`${from} answered ${res.status}: ${await res.text()}`)
  let lines = 0
  for await (const chunk of Readable.fromWeb(res.body as WebStream<Uint8Array>) as AsyncIterable<Buffer>) {
    for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++
  }
  return { lines, perS: lines / (performance.now() - started) * 1000 }
}

/**
 * Import, then export, of `n` users on one engine. The import: a bare script's inserts into a fresh database, then
 * Roster's POST /imports into another, timed to `succeeded`. The export: Roster's, then a bare SELECT's, of what it imported.
 */
async function transfer(engine: Engine, n: number, file: string) {
  const name = (role: string) => (engine === 'mysql' ? `roster_bench_${role}` : `${RESULTS}/${role}.sqlite`)
  log(`import of ${n} users on ${engine}: the bare inserts, then Roster`)
  const bare = await runScript<{ users: number; ms: number }>(['bench/baseline-transfer.mjs', 'import', file], { DATABASE_URL: await freshDatabase(engine, name('import_bare')) })
  const [databaseUrl, base] = [await freshDatabase(engine, name('import')), url(PORTS.transfer)]
  const roster = startRoster(PORTS.transfer, { DATABASE_URL: databaseUrl, METRICS_PORT: '0' })
  return serving([[roster, `${base}/health/ready`]], async () => {
    const [auth, started] = [{ authorization: `Bearer ${await adminLogin(base)}` }, performance.now()]
    const body = Readable.toWeb(createReadStream(file)) as WebStream<Uint8Array>
    const posted = await fetch(`${base}/imports?format=roster`, { method: 'POST', headers: { ...auth, 'content-type': 'application/x-ndjson' }, body, duplex: 'half' })
    let [job, shed] = [await posted.json() as { id: number; status: string; created: number }, 0]
    if (posted.status !== 202) throw new Error(`POST /imports answered ${posted.status}: ${JSON.stringify(job)}`)
    while (job.status !== 'succeeded' && job.status !== 'failed') {
      await new Promise((resolve) => setTimeout(resolve, 200))
      const res = await fetch(`${base}/imports/${job.id}`, { headers: auth })
      // The load shedding may refuse a poll while the import's batches hold the event loop: counted, not fatal.
      if (res.status === 503) shed += await res.arrayBuffer().then(() => 1)
      else job = await res.json() as typeof job
    }
    if (job.status !== 'succeeded' || job.created !== n) throw new Error(`the import ended ${JSON.stringify(job)}`)
    const imported = { rosterPerS: n / (performance.now() - started) * 1000, barePerS: bare.users / bare.ms * 1000, peakRssMb: memoryKb(roster.pid!, 'VmHWM') / 1024, shed }
    log(`export of ${n} users on ${engine}: Roster, then the bare SELECT`)
    const rssBeforeMb = memoryKb(roster.pid!, 'VmRSS') / 1024
    const [ours, peakRssMb] = await sampling(roster.pid!, () => download(`${base}/exports/users`, auth))
    const exporter = startBaseline('baseline-transfer.mjs', PORTS.transferBaseline, { DATABASE_URL: databaseUrl })
    const theirs = await serving([[exporter, url(PORTS.transferBaseline)]], () => download(`${url(PORTS.transferBaseline)}/export`))
    if (ours.lines !== n + 1 || theirs.lines !== n + 1) throw new Error(`the exports wrote ${ours.lines} and ${theirs.lines} lines for ${n + 1} users`)
    const exported = { rosterPerS: ours.perS, barePerS: theirs.perS, rssBeforeMb, peakRssMb, rssAfterMb: memoryKb(roster.pid!, 'VmRSS') / 1024 }
    const per = (r: typeof imported | typeof exported) => `Roster ${fmt(r.rosterPerS)} users/s, bare ${fmt(r.barePerS)} users/s: ${fmt(r.rosterPerS / r.barePerS, 2)}× (target ≥ 0.5)`
    return { engine, n, import: imported, export: exported, lines: [
      `import of ${fmt(n)} users on ${engine}: ${per(imported)}; Roster's peak RSS ${fmt(imported.peakRssMb)} MB (target < 250); ${shed} polls refused (503)`,
      `export of ${fmt(n)} users on ${engine}: ${per(exported)}; Roster's RSS ${fmt(rssBeforeMb)} MB before, ${fmt(peakRssMb)} at most, ${fmt(exported.rssAfterMb)} after`
    ] }
  })
}

/** The rows the storage engine reads for one prepared execution: the growth of Handler_read_*, less what reading it costs. */
async function rowsRead(conn: Connection, sql: string, parameters: readonly unknown[]): Promise<number> {
  const counters = async () => ((await conn.query("show session status like 'Handler_read%'"))[0] as Array<{ Value: string }>).reduce((n, r) => n + Number(r.Value), 0)
  await conn.execute(sql, parameters as never) // prepares it
  const before = await counters()
  await conn.execute(sql, parameters as never)
  const after = await counters()
  return after - before - ((await counters()) - after)
}

/** EXPLAIN of the statements the repositories build for the collection filters and the caller lookup. */
async function explain(sample: SeededUser, narrow: SeededUser) {
  const { db } = createDatabase({ url: DATABASE_URL })
  const conn = await createConnection(DATABASE_URL)
  const deep = Math.max(0, USERS - 100)
  const prefix = (text: string) => ({ name: { mode: 'prefix' as const, text } })
  const queries = {
    'first page': listUsersQuery(db, {}, 0, 50),
    [`deep page (after id ${deep})`]: listUsersQuery(db, {}, deep, 50),
    'name prefix, narrow': listUsersQuery(db, prefix(narrow.name.toLowerCase().slice(0, -1)), 0, 50),
    'name prefix, broad': listUsersQuery(db, prefix(sample.name.toLowerCase().replace(/\d+$/, '')), 0, 50),
    'email filter': listUsersQuery(db, { email: sample.email }, 0, 50),
    'status filter': listUsersQuery(db, { status: 'BANNED' }, 0, 50),
    'token lookup (every request)': callerQuery(db, tokenHash(sample.token), Date.now())
  }
  const out = []
  try {
    for (const [name, query] of Object.entries(queries)) {
      const compiled = query.compile()
      const result = await db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(`explain ${compiled.sql}`, [...compiled.parameters]))
      const plan = result.rows.map((r) => ({ table: r.table, type: r.type, key: r.key, rows: r.rows, Extra: r.Extra }))
      out.push({ query: name, plan, fullScan: plan.some((p) => p.type === 'ALL' || p.type === 'index'), rowsRead: await rowsRead(conn, compiled.sql, compiled.parameters) })
    }
  } finally {
    await Promise.all([conn.end(), db.destroy()])
  }
  return out
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
const ratio = (r: { throughput: number; p99: number }) => `throughput ${fmt(r.throughput, 2)}×, p99 ${fmt(r.p99, 2)}×`

async function main() {
  mkdirSync(RESULTS, { recursive: true })
  log('building the service (npm run build)')
  execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' })
  // The export reads what the import wrote: either runs both, on each engine, before the seeded scenarios.
  const isTransfer = (s: string) => s === 'import' || s === 'export'
  const scenarios = [...new Set(args.scenarios.split(',').filter(Boolean))]
  const transfers = []
  for (const n of scenarios.some(isTransfer) ? IMPORT_SIZES : []) {
    const file = await importFile(n)
    for (const engine of ['mysql', 'sqlite'] as const) transfers.push(await transfer(engine, n, file))
  }
  if (scenarios.every(isTransfer)) {
    console.log(`\n## Roster benchmark: import and export\n${transfers.flatMap((t) => t.lines).map((l) => `- ${l}`).join('\n')}`)
    return writeFileSync(`${RESULTS}/latest.json`, JSON.stringify({ at: new Date().toISOString(), transfers }, null, 2))
  }
  await prepare('mysql', args.database, TOKENS)

  const roster = startRoster(PORTS.roster)
  const text = startBaseline('baseline.mjs', PORTS.baseline, { STATEMENTS: 'text' })
  const prepared = startBaseline('baseline.mjs', PORTS.baselinePrepared, { STATEMENTS: 'prepared' })
  // As many connections as Roster's two pools hold together.
  const writes = startBaseline('baseline-writes.mjs', PORTS.writes, { POOL_SIZE: '20' })
  const stop = () => { for (const child of [roster, text, prepared, writes]) child.kill('SIGTERM') }
  process.on('exit', stop)
  try {
    await waitFor(`${url(PORTS.roster)}/health/ready`, roster)
    for (const [child, port] of [[text, PORTS.baseline], [prepared, PORTS.baselinePrepared], [writes, PORTS.writes]] as const) await waitFor(`${url(port)}/`, child)
    const adminToken = await adminLogin(url(PORTS.roster))
    const rosterTarget = { url: url(PORTS.roster), pid: roster.pid! }
    const writesTarget = { url: url(PORTS.writes), pid: writes.pid! }

    const rows: Row[] = []
    const results: Record<string, ReturnType<typeof compare> & { warn?: ReturnType<typeof ratiosOf> }> = {}
    const lines = transfers.flatMap((t) => t.lines)
    for (const scenario of scenarios.filter((s) => !isTransfer(s))) {
      if (scenario === 'self-read') {
        const rounds = await alternate({
          baseline: { url: url(PORTS.baseline), pid: text.pid! }, 'baseline-prepared': { url: url(PORTS.baselinePrepared), pid: prepared.pid! }, roster: rosterTarget
        }, scenario, adminToken)
        const result = results[scenario] = compare(rounds, 'roster', 'baseline')
        lines.push(`self-read against the text baseline: ${ratio(result.ratios)} (targets ≥ 0.90, ≤ 1.20); ` +
          `against the prepared baseline: ${ratio(ratiosOf(rounds, 'roster', 'baseline-prepared'))}`)
      } else if (scenario === 'rename' || scenario === 'refresh' || scenario === 'login') {
        const before = scenario === 'refresh' ? freshSessions : undefined
        const rounds = await alternate({ 'baseline-writes': writesTarget, roster: rosterTarget }, scenario, adminToken, { scenario, before })
        const result = results[scenario] = compare(rounds, 'roster', 'baseline-writes')
        const cpu = (t: 'roster' | 'baseline-writes') => result.rows.find((r) => r.target === t)!
        lines.push(`${scenario} against the bare write baseline: ${ratio(result.ratios)}, the main thread's CPU ${fmt(result.ratios.mainThreadCpu, 2)}× ` +
          `(${cpu('roster').mainThreadCpuUsPerRequest} / ${cpu('baseline-writes').mainThreadCpuUsPerRequest} µs); statements a request ` +
          `${fmt(cpu('roster').statementsPerRequest ?? 0, 1)} / ${fmt(cpu('baseline-writes').statementsPerRequest ?? 0, 1)}`)
      } else if (scenario === 'scim-list') {
        const rounds = await alternate({ 'list-200': { ...rosterTarget, scenario: 'list-200' }, 'scim-200': { ...rosterTarget, scenario: 'scim-200' } }, scenario, adminToken)
        const result = results[scenario] = compare(rounds, 'scim-200', 'list-200', scenario)
        lines.push(`SCIM list of 200 against GET /users?limit=200: ${ratio(result.ratios)} (target: p99 ≤ 1.2×)`)
      } else if (scenario === 'embedded') {
        const result = results[scenario] = await embedded()
        lines.push(`embedded self-read against node:http + better-sqlite3: at ${args['log-level']} ${ratio(result.ratios)}; at warn ${ratio(result.warn)}`)
      } else if (scenario === 'metrics') {
        const result = results[scenario] = await metricsOnOff(adminToken)
        lines.push(`metrics on against off (self-read on MySQL): ${ratio(result.ratios)}`)
      } else {
        log(`roster: ${scenario}, ${DURATION} s at ${CONNECTIONS} connections`)
        rows.push({ target: 'roster', ...(await load(rosterTarget, scenario, DURATION, adminToken)) })
        continue
      }
      rows.push(...results[scenario].rows)
    }
    const peakRssMb = Math.round(memoryKb(roster.pid!, 'VmHWM') / 1024)

    const active = readFileSync(TOKENS, 'utf8').split('\n', 2000).filter(Boolean).map((l) => JSON.parse(l) as SeededUser).filter((u) => u.status === 'ACTIVE')
    const plans = await explain(active[0]!, active[active.length - 1]!)

    console.log(`\n## Roster benchmark: ${USERS} users, ${DURATION} s a scenario, ${ROUNDS} rounds where there is a baseline, ${CONNECTIONS} connections, LOG_LEVEL=${args['log-level']}`)
    console.log(`Roster runs as: node ${startCommand().join(' ')}${args['node-options'] ? ` (NODE_OPTIONS=${args['node-options']})` : ''}`)
    console.log(`Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}\n`)
    console.log('| target | scenario | req/s | p50 ms | p99 ms | errors | timeouts | non-2xx | CPU µs/req | main thread µs/req | peak RSS MB |')
    console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for (const r of rows) console.log(`| ${r.target} | ${r.scenario} | ${fmt(r.rps)} | ${r.p50} | ${r.p99} | ${r.errors} | ${r.timeouts} | ${r.non2xx} | ${r.cpuUsPerRequest} | ${r.mainThreadCpuUsPerRequest} | ${r.peakRssMb} |`)
    console.log(`\nRatios (the medians of the rounds' ratios where there are rounds):\n${lines.map((l) => `- ${l}`).join('\n')}`)
    console.log(`- Roster's peak RSS over the whole run: ${peakRssMb} MB`)
    console.log('\n### Query plans (EXPLAIN), and the rows one prepared execution read\n')
    for (const p of plans) {
      const show = (v: unknown) => (typeof v === 'string' || typeof v === 'number' ? String(v) : '-')
      const step = (r: Record<string, unknown>) => `${show(r.table)} ${show(r.type)} via ${show(r.key)} (~${show(r.rows)} rows${r.Extra ? `; ${show(r.Extra)}` : ''})`
      console.log(`- ${p.query}: ${p.plan.map(step).join(' → ')}${p.fullScan ? '  **FULL SCAN**' : ''}; ${p.rowsRead} rows read`)
    }
    // A refused request (an expired token, a saturated pool) measures the wrong thing: the run is invalid.
    const failed = rows.filter((r) => r.errors + r.timeouts + r.non2xx > 0)
    if (failed.length) {
      console.log(`\n**INVALID RUN**: requests failed in ${failed.map((r) => `${r.target} ${r.scenario} (${r.errors} errors, ${r.timeouts} timeouts, ${r.non2xx} non-2xx)`).join(', ')}` +
        (args.reuse ? '; with --reuse the seeded tokens may have expired: run without it to seed afresh' : ''))
      process.exitCode = 1
    }
    writeFileSync(`${RESULTS}/latest.json`, JSON.stringify({
      at: new Date().toISOString(), users: USERS, duration: DURATION, rounds: ROUNDS, connections: CONNECTIONS, logLevel: args['log-level'],
      machine: { cpus: cpus().length, model: cpus()[0]?.model, memGiB: Math.round(totalmem() / 2 ** 30), node: process.version },
      rows, results, transfers, peakRssMb, plans, valid: failed.length === 0
    }, null, 2))
    log(`figures in ${RESULTS}/latest.json`)
  } finally {
    stop()
    await statusConnection?.end()
  }
}

await main()
process.exit(process.exitCode ?? 0)
