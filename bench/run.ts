// npm run bench [-- --users 20000 --duration 10 --rounds 5 --connections 50 --reuse --scenarios self-read,login]
//
// Seeds MySQL/MariaDB (a database of its own, `roster_bench` by default), starts the built service and the bare
// node:http + mysql2 baseline twice (text queries, and prepared statements as Roster sends them) and the design's
// minimum (bench/baseline-design.mjs on MySQL), warms them up, then runs each autocannon scenario in a separate
// process for a fixed time at a fixed concurrency. Scenario 1 runs in rounds that alternate the four (ABCD, then
// DCBA), so that a change in the machine's speed during the run weighs on all alike; its ratios are the medians of
// the rounds' ratios. Prints requests/s, p50, p99, errors, non-2xx, the server's CPU time per request and its peak
// RSS per scenario, Roster's scenario-1 throughput and p99 as ratios of each baseline's and of the design's minimum,
// and the EXPLAIN of the collection queries. The `embedded` scenario does scenario 1 again on the
// SQLite default (a file of its own, seeded alike) against a bare node:http + better-sqlite3 baseline, in
// alternating rounds too. The `metrics` scenario does scenario 1 with the metrics on (the default) and off
// (METRICS_PORT=0), alternating. The `drain` scenario (bench/drain.ts) measures the outbox: mail and webhook
// deliveries leaving a full outbox for receivers that answer at once, and a sign-up's mail under the rename load.
// The write scenarios (rename, refresh, login) alternate with bench/baseline-writes.mjs, a bare node:http + mysql2
// server doing the same durable work; the login with bench/baseline-design-login.mjs too, the design's minimum login.
// Writes everything to bench/results/latest.json.
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { parseArgs } from 'node:util'
import { CompiledQuery } from 'kysely'
import { createConnection, type Connection } from 'mysql2/promise'
import { createDatabase } from '../src/database/index.js'
import { newToken, tokenHash } from '../src/accounts/secrets.js'
import { callerQuery } from '../src/auth/caller.js'
import { listUsersQuery } from '../src/users/repository.js'
import { seed, type SeededUser } from '../scripts/seed.js'
import { measureDrain, smtpSink, type DrainFigures } from './drain.js'
import { cpuMicros, mainThreadCpuMicros, startCommand, waitFor } from './processes.js'

const { values: args } = parseArgs({
  options: {
    users: { type: 'string', default: '20000' },
    duration: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
    'mysql-url': { type: 'string', default: process.env.TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306' },
    database: { type: 'string', default: 'roster_bench' },
    reuse: { type: 'boolean', default: false },
    scenarios: { type: 'string', default: 'self-read,name-prefix,email-filter,own-emails,rename,refresh,login,embedded,metrics,drain' },
    'sqlite-file': { type: 'string', default: 'bench/results/roster_bench.sqlite' },
    'log-level': { type: 'string', default: 'info' },
    'node-options': { type: 'string', default: '' }
  }
})

const USERS = Number(args.users)
const DURATION = Number(args.duration)
const ROUNDS = Math.max(1, Number(args.rounds))
const CONNECTIONS = Number(args.connections)
const SERVER = args['mysql-url'].replace(/\/+$/, '')
const DATABASE_URL = `${SERVER}/${args.database}`
const RESULTS = 'bench/results'
// One tokens file per database: a reused database must be driven with its own users' tokens.
const TOKENS = `${RESULTS}/tokens-${args.database}.jsonl`
const PASSWORD = 'seed-password-1'
const ADMIN = { email: 'bench-admin@example.com', password: 'bench-admin-password' }
const ROSTER_PORT = 3301
const BASELINE_PORT = 3302
const PREPARED_BASELINE_PORT = 3303
const DESIGN_PORT = 3313
const EMBEDDED_ROSTER_PORT = 3304
const EMBEDDED_BASELINE_PORT = 3305
const EMBEDDED_WARN_PORT = 3311
const EMBEDDED_CONTRACT_PORT = 3315
const METRICS_OFF_PORT = 3307
const METRICS_ON_PORT = 3312
/** The metrics of the instance METRICS_ON_PORT serves (the main instance has the default port). */
const METRICS_ON_METRICS_PORT = 3412
const DRAIN_PORT = 3308
const WRITE_BASELINE_PORT = 3310
const DESIGN_LOGIN_PORT = 3314
const SQLITE_FILE = args['sqlite-file']
const SQLITE_TOKENS = `${RESULTS}/tokens-embedded.jsonl`

const log = (line: string) => console.log(`# ${line}`)

async function prepareDatabase(): Promise<void> {
  const conn = await createConnection(SERVER)
  try {
    if (args.reuse && existsSync(TOKENS)) {
      const [rows] = await conn.query(`select count(*) as n from \`${args.database}\`.users`).catch(() => [[{ n: -1 }]]) as unknown as [Array<{ n: number }>]
      if (Number(rows[0]?.n) >= USERS) return log(`reusing ${args.database} (${rows[0]?.n} users)`)
    }
    await conn.query(`drop database if exists \`${args.database}\``)
    await conn.query(`create database \`${args.database}\` character set utf8mb4`)
  } finally {
    await conn.end()
  }
  log(`seeding ${USERS} users into ${args.database}`)
  const result = await seed({ url: DATABASE_URL, users: USERS, tokensFile: TOKENS, password: PASSWORD, log: (l) => log(l) })
  log(`seeded ${result.users} users, ${result.emails} addresses in ${(result.ms / 1000).toFixed(1)} s`)
}

function startRoster(databaseUrl = DATABASE_URL, port = ROSTER_PORT, env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, startCommand(), {
    env: {
      ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: args['log-level'],
      ADMIN_EMAIL: ADMIN.email, ADMIN_PASSWORD: ADMIN.password, DB_POOL_SIZE: '10', NODE_ENV: 'production',
      // The limiter runs (its cost is measured) but the load generator's few callers never reach it.
      RATE_LIMIT_MAX: '100000000', LOGIN_MAX_FAILURES_PER_CLIENT: '100000',
      // The admin's token, taken once at the start, must outlive a whole run on a slow host (20 minutes and more);
      // a token's lifetime costs a request nothing.
      ACCESS_TOKEN_TTL_SECONDS: '86400',
      NODE_OPTIONS: args['node-options'], ...env
    },
    stdio: ['ignore', 'ignore', 'inherit']
  })
}

/** An access token of the bench's admin, from a Roster instance; a failed login stops the run. */
async function adminLogin(url: string): Promise<string> {
  const res = await fetch(`${url}/auth/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) })
  if (res.status !== 201) throw new Error(`the bench admin's login answered ${res.status}: ${await res.text()}`)
  return ((await res.json()) as { token: string }).token
}

/**
 * The baseline, bare: `text` sends each lookup as a text query (mysql2's `pool.query`, what a bare server usually
 * does), `prepared` as a server-side prepared statement (`pool.execute`, what Roster's driver does).
 */
function startBaseline(statements: 'text' | 'prepared', port: number): ChildProcess {
  return fork('bench/baseline.mjs', [], {
    env: { ...process.env, MYSQL_URL: DATABASE_URL, PORT: String(port), POOL_SIZE: '10', STATEMENTS: statements },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc']
  })
}

/**
 * The design's minimum on MySQL: Fastify, TypeBox, the two auth hooks and an access line, the lookup prepared as
 * Roster's driver sends it, and nothing else of Roster: the floor the design puts under scenario 1.
 */
function startDesign(): ChildProcess {
  return fork('bench/baseline-design.mjs', [], {
    env: { ...process.env, MYSQL_URL: DATABASE_URL, PORT: String(DESIGN_PORT), POOL_SIZE: '10' },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc']
  })
}

/** The embedded engine's baseline: node:http and better-sqlite3 on the same file, read-only. */
function startSqliteBaseline(): ChildProcess {
  return fork('bench/baseline-sqlite.mjs', [], {
    env: { ...process.env, SQLITE_FILE, PORT: String(EMBEDDED_BASELINE_PORT) },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc']
  })
}

/**
 * The contract's minimum on the embedded engine: the design's minimum without its access line, with the rest of what
 * the contract and Roster's security and reliability rules ask of every answer, in the fewest steps a server on
 * Fastify can take (bench/baseline-design.mjs, DESIGN_CONTRACT): the floor they put under Roster at `warn`. Never on
 * MySQL, whatever the shell exports.
 */
function startContractMinimum(): ChildProcess {
  return fork('bench/baseline-design.mjs', [], {
    env: { ...process.env, MYSQL_URL: '', SQLITE_FILE, PORT: String(EMBEDDED_CONTRACT_PORT), DESIGN_LOG: 'off', DESIGN_CONTRACT: 'on', DESIGN_WITHOUT: '' },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc']
  })
}

/** Seeds the embedded engine's own file (kept with --reuse while it has enough users). */
async function prepareSqlite(): Promise<void> {
  if (args.reuse && existsSync(SQLITE_FILE) && existsSync(SQLITE_TOKENS)) {
    const { db } = createDatabase({ url: `sqlite:${SQLITE_FILE}` })
    const row = await db.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirst().catch(() => undefined)
    await db.destroy()
    if (Number(row?.n) >= USERS) return log(`reusing ${SQLITE_FILE} (${row?.n} users)`)
  }
  for (const suffix of ['', '-wal', '-shm']) rmSync(SQLITE_FILE + suffix, { force: true })
  log(`seeding ${USERS} users into ${SQLITE_FILE}`)
  const result = await seed({ url: `sqlite:${SQLITE_FILE}`, users: USERS, tokensFile: SQLITE_TOKENS, password: PASSWORD, log: (l) => log(l) })
  log(`seeded ${result.users} users, ${result.emails} addresses in ${(result.ms / 1000).toFixed(1)} s`)
}

function memoryKb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0)
}

interface Figures { scenario: string; rps: number; p50: number; p99: number; errors: number; timeouts: number; non2xx: number; total: number }
type Measured = Figures & { peakRssMb: number; cpuUsPerRequest: number; mainThreadCpuUsPerRequest: number; statementsPerRequest?: number | undefined }

/** Scenario 1's targets, in the order of odd rounds (even rounds run them in reverse). */
const TARGETS = ['baseline', 'baseline-prepared', 'design', 'roster'] as const
type Target = typeof TARGETS[number]

/** Runs one scenario in its own process while sampling the server's resident memory. */
async function load(
  target: { url: string; pid: number }, scenario: string, duration: number, adminToken: string, tokensFile = TOKENS, extra: Record<string, unknown> = {}
): Promise<Measured> {
  let peak = 0
  const statementsBefore = await serverStatements()
  const cpuBefore = cpuMicros(target.pid)
  const mainBefore = mainThreadCpuMicros(target.pid)
  const sampler = setInterval(() => { peak = Math.max(peak, memoryKb(target.pid, 'VmRSS')) }, 100)
  const input = JSON.stringify({ url: target.url, scenario, duration, connections: CONNECTIONS, adminToken, password: PASSWORD, tokensFile, ...extra })
  const output = await new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, ['bench/load.mjs', input], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`load ${scenario} exited ${code}`))))
  })
  clearInterval(sampler)
  peak = Math.max(peak, memoryKb(target.pid, 'VmRSS'))
  const figures: Figures = JSON.parse(output.trim().split('\n').pop()!)
  const cpuUsPerRequest = Math.round((cpuMicros(target.pid) - cpuBefore) / Math.max(1, figures.total))
  const mainThreadCpuUsPerRequest = Math.round((mainThreadCpuMicros(target.pid) - mainBefore) / Math.max(1, figures.total))
  const statements = statementsBefore === undefined ? undefined : ((await serverStatements()) ?? 0) - statementsBefore
  const statementsPerRequest = statements === undefined ? undefined : Math.round(statements / Math.max(1, figures.total) * 10) / 10
  return { ...figures, peakRssMb: Math.round(peak / 1024), cpuUsPerRequest, mainThreadCpuUsPerRequest, statementsPerRequest }
}

let statusConnection: Connection | undefined

/**
 * The statements the MySQL server has run (its `Questions` counter: text queries, prepared executions, begin and
 * commit), read around a load run to count what a request sends. Everything on the server counts, the services'
 * background work too: on a quiet machine that is the polling of the outbox and the feed, a few a second.
 */
async function serverStatements(): Promise<number | undefined> {
  statusConnection ??= await createConnection(SERVER)
  const [rows] = await statusConnection.query("show global status like 'Questions'") as unknown as [Array<{ Value: string }>]
  return rows[0] ? Number(rows[0].Value) - 1 : undefined
}

/**
 * Rounds of one scenario over several targets, alternating their order (ABC, then CBA) so that a change in the
 * machine's speed during the run weighs on all alike.
 */
async function alternate<T extends string>(
  order: readonly T[], targets: Record<T, { url: string; pid: number }>, label: string, adminToken: string,
  options: { scenario?: string; tokensFile?: string; before?: () => Promise<Record<string, unknown>> } = {}
): Promise<Array<Record<T, Measured>>> {
  const rounds: Array<Record<T, Measured>> = []
  for (let round = 1; round <= ROUNDS; round++) {
    const sequence = round % 2 === 1 ? order : [...order].reverse()
    log(`${label} round ${round}/${ROUNDS}: ${sequence.join(', then ')}, ${DURATION} s each at ${CONNECTIONS} connections`)
    const measured: Partial<Record<T, Measured>> = {}
    for (const target of sequence) {
      const extra = (await options.before?.()) ?? {}
      measured[target] = await load(targets[target], options.scenario ?? 'self-read', DURATION, adminToken, options.tokensFile ?? TOKENS, extra)
    }
    rounds.push(measured as Record<T, Measured>)
  }
  return rounds
}

/** The medians of a target's per-round ratios to a reference: throughput and p99. */
function ratiosOf<T extends string>(rounds: Array<Record<T, Measured>>, target: T, reference: T) {
  const perRound = rounds.map((r) => ({ throughput: r[target].rps / r[reference].rps, p99: r[target].p99 / Math.max(r[reference].p99, 1) }))
  return { throughput: median(perRound.map((r) => r.throughput)), p99: median(perRound.map((r) => r.p99)), rounds: perRound }
}

const METRICS_TARGETS = ['roster', 'roster-metrics-off'] as const
type MetricsTarget = typeof METRICS_TARGETS[number]

/**
 * The cost of the metrics: the self-read on MySQL by Roster as it runs by default (metrics on, every answer timed)
 * against the same build with METRICS_PORT=0, in alternating rounds. Both are started for it, so that neither carries
 * what the scenarios before left (a heap grown by the writes, the background work of their events and tokens), and
 * both are warmed up alike. The metrics' own port is taken by the main instance, so the one started here serves them
 * on another.
 */
async function metricsOnOff(adminToken: string): Promise<Array<Record<MetricsTarget, Measured>>> {
  const on = startRoster(DATABASE_URL, METRICS_ON_PORT, { METRICS_PORT: String(METRICS_ON_METRICS_PORT) })
  const off = startRoster(DATABASE_URL, METRICS_OFF_PORT, { METRICS_PORT: '0' })
  try {
    await waitFor(`http://127.0.0.1:${METRICS_ON_PORT}/health/ready`)
    await waitFor(`http://127.0.0.1:${METRICS_OFF_PORT}/health/ready`)
    const targets: Record<MetricsTarget, { url: string; pid: number }> = {
      roster: { url: `http://127.0.0.1:${METRICS_ON_PORT}`, pid: on.pid! },
      'roster-metrics-off': { url: `http://127.0.0.1:${METRICS_OFF_PORT}`, pid: off.pid! }
    }
    for (const target of METRICS_TARGETS) await load(targets[target], 'self-read', 3, adminToken)
    return await alternate(METRICS_TARGETS, targets, 'self-read, metrics on and off', adminToken)
  } finally {
    on.kill('SIGTERM')
    off.kill('SIGTERM')
  }
}

/**
 * The outbox's drain: the main instance (mail to its log) is stopped so that it takes no message, and one with
 * SMTP_URL at a sink in this process, and webhooks allowed to this machine, drains a full outbox and serves the
 * rename load while users sign up.
 */
async function drainScenario(main: ChildProcess, adminToken: string): Promise<DrainFigures> {
  main.kill('SIGTERM')
  await new Promise((resolve) => (main.exitCode !== null ? resolve(null) : main.once('exit', resolve)))
  const smtp = await smtpSink()
  const drain = startRoster(DATABASE_URL, DRAIN_PORT, {
    SMTP_URL: smtp.url, WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', MAIL_MAX_PER_CLIENT: '100000', METRICS_PORT: '0'
  })
  try {
    const url = `http://127.0.0.1:${DRAIN_PORT}`
    await waitFor(`${url}/health/ready`, drain)
    log(`drain: mail and webhook deliveries through an outbox of 2,000, then sign-ups under the rename load (${DURATION} s)`)
    return await measureDrain({
      url, databaseUrl: DATABASE_URL, adminToken, duration: DURATION,
      renameLoad: () => load({ url, pid: drain.pid! }, 'rename', DURATION, adminToken)
    }, smtp)
  } finally {
    drain.kill('SIGTERM')
    await smtp.close()
  }
}

const WRITE_TARGETS = ['baseline-writes', 'roster'] as const
type WriteTarget = typeof WRITE_TARGETS[number]
/** The login alternates over the design's minimum too: the floor the design puts under it. */
const LOGIN_TARGETS = ['baseline-writes', 'design-login', 'roster'] as const
type LoginTarget = typeof LOGIN_TARGETS[number]

/**
 * The bare write baseline (bench/baseline-writes.mjs) on the same database, with as many connections as Roster's two
 * pools hold together (DB_POOL_SIZE for statements and as many for transactions).
 */
function startWriteBaseline(): ChildProcess {
  return fork('bench/baseline-writes.mjs', [], {
    env: { ...process.env, MYSQL_URL: DATABASE_URL, PORT: String(WRITE_BASELINE_PORT), POOL_SIZE: '20' },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc']
  })
}

/**
 * The design's minimum login (bench/baseline-design-login.mjs): Fastify, TypeBox, Fastify's logger with an access
 * line, and Kysely's own MySQL dialect, with as many connections as the bare write baseline.
 */
function startDesignLogin(): ChildProcess {
  return fork('bench/baseline-design-login.mjs', [], {
    env: { ...process.env, MYSQL_URL: DATABASE_URL, PORT: String(DESIGN_LOGIN_PORT), POOL_SIZE: '20' },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc']
  })
}

/**
 * Sessions started before a refresh run, one per seeded user, twice as many as there are connections, written
 * straight to the tables as a login leaves them: the run measures refreshes and nothing else.
 */
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
  const file = `${RESULTS}/sessions.jsonl`
  writeFileSync(file, lines.join('\n') + '\n')
  return { sessionsFile: file }
}

const WRITE_SCENARIOS = ['rename', 'refresh'] as const
type WriteScenario = typeof WRITE_SCENARIOS[number]
const isWriteScenario = (scenario: string): scenario is WriteScenario => (WRITE_SCENARIOS as readonly string[]).includes(scenario)

/** A write scenario (rename, refresh) on Roster and on the bare write baseline, in alternating rounds. */
async function writes(scenario: WriteScenario, roster: { url: string; pid: number }, baseline: ChildProcess, adminToken: string) {
  const targets: Record<WriteTarget, { url: string; pid: number }> = {
    'baseline-writes': { url: `http://127.0.0.1:${WRITE_BASELINE_PORT}`, pid: baseline.pid! }, roster
  }
  const before = scenario === 'refresh' ? freshSessions : undefined
  for (const target of WRITE_TARGETS) await load(targets[target], scenario, 2, adminToken, TOKENS, (await before?.()) ?? {})
  return alternate(WRITE_TARGETS, targets, scenario, adminToken, { scenario, before })
}

/** The login on Roster, on the bare write baseline and on the design's minimum, in alternating rounds. */
async function logins(roster: { url: string; pid: number }, baseline: ChildProcess, design: ChildProcess, adminToken: string) {
  const targets: Record<LoginTarget, { url: string; pid: number }> = {
    'baseline-writes': { url: `http://127.0.0.1:${WRITE_BASELINE_PORT}`, pid: baseline.pid! },
    'design-login': { url: `http://127.0.0.1:${DESIGN_LOGIN_PORT}`, pid: design.pid! },
    roster
  }
  for (const target of LOGIN_TARGETS) await load(targets[target], 'login', 2, adminToken)
  return alternate(LOGIN_TARGETS, targets, 'login', adminToken, { scenario: 'login' })
}

const EMBEDDED_TARGETS = ['baseline-sqlite', 'roster-sqlite', 'roster-sqlite-warn', 'contract-sqlite'] as const
type EmbeddedTarget = typeof EMBEDDED_TARGETS[number]

/**
 * Scenario 1 on the embedded engine: Roster on the SQLite default against the bare better-sqlite3 server, Roster
 * twice: at the run's log level (`info`, the default: one access line a request) and at `warn` (none), the level
 * of the target; and the contract's minimum at `warn`, the floor under the target.
 */
async function embedded(): Promise<{ rows: Array<Measured & { target: string }>; rounds: Array<Record<EmbeddedTarget, Measured>> }> {
  await prepareSqlite()
  // Its metrics off: the MySQL Roster of the run holds METRICS_PORT's default.
  const roster = startRoster(`sqlite:${SQLITE_FILE}`, EMBEDDED_ROSTER_PORT, { METRICS_PORT: '0' })
  const quiet = startRoster(`sqlite:${SQLITE_FILE}`, EMBEDDED_WARN_PORT, { METRICS_PORT: '0', LOG_LEVEL: 'warn' })
  const baseline = startSqliteBaseline()
  const contract = startContractMinimum()
  try {
    await waitFor(`http://127.0.0.1:${EMBEDDED_ROSTER_PORT}/health/ready`)
    await waitFor(`http://127.0.0.1:${EMBEDDED_CONTRACT_PORT}/`)
    await waitFor(`http://127.0.0.1:${EMBEDDED_WARN_PORT}/health/ready`)
    await waitFor(`http://127.0.0.1:${EMBEDDED_BASELINE_PORT}/`)
    const targets: Record<EmbeddedTarget, { url: string; pid: number }> = {
      'baseline-sqlite': { url: `http://127.0.0.1:${EMBEDDED_BASELINE_PORT}`, pid: baseline.pid! },
      'roster-sqlite': { url: `http://127.0.0.1:${EMBEDDED_ROSTER_PORT}`, pid: roster.pid! },
      'roster-sqlite-warn': { url: `http://127.0.0.1:${EMBEDDED_WARN_PORT}`, pid: quiet.pid! },
      'contract-sqlite': { url: `http://127.0.0.1:${EMBEDDED_CONTRACT_PORT}`, pid: contract.pid! }
    }
    log('warming up the embedded targets (3 s each)')
    for (const target of EMBEDDED_TARGETS) await load(targets[target], 'self-read', 3, '', SQLITE_TOKENS)
    const rounds = await alternate(EMBEDDED_TARGETS, targets, 'embedded self-read', '', { tokensFile: SQLITE_TOKENS })
    const rows = EMBEDDED_TARGETS.map((target) => ({ target, ...combine(rounds.map((r) => r[target])), scenario: 'self-read (SQLite)' }))
    return { rows, rounds }
  } finally {
    roster.kill('SIGTERM')
    quiet.kill('SIGTERM')
    baseline.kill('SIGTERM')
    contract.kill('SIGTERM')
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** Several rounds of one scenario as one row: mean throughput, median latencies and CPU, summed counts. */
function combine(rounds: Measured[]): Measured {
  const sum = (key: 'errors' | 'timeouts' | 'non2xx' | 'total') => rounds.reduce((n, r) => n + r[key], 0)
  return {
    scenario: rounds[0]!.scenario,
    rps: rounds.reduce((n, r) => n + r.rps, 0) / rounds.length,
    p50: median(rounds.map((r) => r.p50)),
    p99: median(rounds.map((r) => r.p99)),
    errors: sum('errors'), timeouts: sum('timeouts'), non2xx: sum('non2xx'), total: sum('total'),
    peakRssMb: Math.max(...rounds.map((r) => r.peakRssMb)),
    cpuUsPerRequest: median(rounds.map((r) => r.cpuUsPerRequest)),
    mainThreadCpuUsPerRequest: median(rounds.map((r) => r.mainThreadCpuUsPerRequest))
  }
}

interface Plan { query: string; plan: Array<Record<string, unknown>>; fullScan: boolean; rowsRead: number }

/**
 * The rows the storage engine reads for one execution of a statement as Roster runs it (prepared, with its
 * values bound): the growth of the session's Handler_read_* counters, less what reading those counters costs.
 */
async function rowsRead(conn: Connection, sql: string, parameters: readonly unknown[]): Promise<number> {
  const counters = async () => {
    const [rows] = await conn.query("show session status like 'Handler_read%'") as unknown as [Array<{ Value: string }>]
    return rows.reduce((n, r) => n + Number(r.Value), 0)
  }
  await conn.execute(sql, parameters as never) // prepares it
  const before = await counters()
  await conn.execute(sql, parameters as never)
  const after = await counters()
  const overhead = (await counters()) - after
  return after - before - overhead
}

async function explain(sample: SeededUser, narrow: SeededUser): Promise<Plan[]> {
  const { db } = createDatabase({ url: DATABASE_URL })
  const conn = await createConnection(DATABASE_URL)
  const deep = Math.max(0, USERS - 100)
  const queries = {
    'first page': listUsersQuery(db, {}, 0, 50),
    [`deep page (after id ${deep})`]: listUsersQuery(db, {}, deep, 50),
    [`name prefix, narrow ("${narrow.name.toLowerCase().slice(0, -1)}*")`]: listUsersQuery(db, { name: { mode: 'prefix', text: narrow.name.toLowerCase().slice(0, -1) } }, 0, 50),
    [`name prefix, broad ("${sample.name.toLowerCase().replace(/\d+$/, '')}*")`]: listUsersQuery(db, { name: { mode: 'prefix', text: sample.name.toLowerCase().replace(/\d+$/, '') } }, 0, 50),
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
    await conn.end()
    await db.destroy()
  }
  return out
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })

async function main() {
  mkdirSync(RESULTS, { recursive: true })
  log('building the service (npm run build)')
  execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' })
  await prepareDatabase()

  const roster = startRoster()
  const baseline = startBaseline('text', BASELINE_PORT)
  const preparedBaseline = startBaseline('prepared', PREPARED_BASELINE_PORT)
  const design = startDesign()
  const writeBaseline = startWriteBaseline()
  const scenarios = args.scenarios.split(',').filter(Boolean)
  const designLogin = scenarios.includes('login') ? startDesignLogin() : undefined
  const stop = () => { for (const child of [roster, baseline, preparedBaseline, design, writeBaseline, designLogin]) child?.kill('SIGTERM') }
  process.on('exit', stop)
  try {
    await waitFor(`http://127.0.0.1:${ROSTER_PORT}/health/ready`)
    await waitFor(`http://127.0.0.1:${BASELINE_PORT}/`)
    await waitFor(`http://127.0.0.1:${PREPARED_BASELINE_PORT}/`)
    await waitFor(`http://127.0.0.1:${DESIGN_PORT}/`)
    await waitFor(`http://127.0.0.1:${WRITE_BASELINE_PORT}/`)
    if (designLogin) await waitFor(`http://127.0.0.1:${DESIGN_LOGIN_PORT}/`)
    const adminToken = await adminLogin(`http://127.0.0.1:${ROSTER_PORT}`)
    const targets: Record<Target, { url: string; pid: number }> = {
      baseline: { url: `http://127.0.0.1:${BASELINE_PORT}`, pid: baseline.pid! },
      'baseline-prepared': { url: `http://127.0.0.1:${PREPARED_BASELINE_PORT}`, pid: preparedBaseline.pid! },
      design: { url: `http://127.0.0.1:${DESIGN_PORT}`, pid: design.pid! },
      roster: { url: `http://127.0.0.1:${ROSTER_PORT}`, pid: roster.pid! }
    }
    const rosterTarget = targets.roster

    if (args.scenarios) {
      log('warming up (3 s each)')
      for (const target of TARGETS) await load(targets[target], 'self-read', 3, adminToken)
    }

    const rows: Array<Measured & { target: string }> = []
    const rounds: Array<Record<Target, Measured>> = []
    const embeddedRounds: Array<Record<EmbeddedTarget, Measured>> = []
    const metricsRounds: Array<Record<MetricsTarget, Measured>> = []
    const writeRounds: Partial<Record<WriteScenario, Array<Record<WriteTarget, Measured>>>> = {}
    const loginRounds: Array<Record<LoginTarget, Measured>> = []
    for (const scenario of new Set(scenarios)) {
      if (scenario === 'login' && designLogin) {
        loginRounds.push(...await logins(rosterTarget, writeBaseline, designLogin, adminToken))
        for (const target of LOGIN_TARGETS) rows.push({ target, ...combine(loginRounds.map((r) => r[target])) })
        continue
      }
      if (isWriteScenario(scenario)) {
        const measured = writeRounds[scenario] = await writes(scenario, rosterTarget, writeBaseline, adminToken)
        for (const target of WRITE_TARGETS) rows.push({ target, ...combine(measured.map((r) => r[target])) })
        continue
      }
      if (scenario === 'drain') continue // below, once the main instance is stopped
      if (scenario === 'metrics') {
        metricsRounds.push(...await metricsOnOff(adminToken))
        for (const target of METRICS_TARGETS) rows.push({ target, ...combine(metricsRounds.map((r) => r[target])), scenario: 'self-read (metrics on/off)' })
        continue
      }
      if (scenario === 'self-read') {
        rounds.push(...await alternate(TARGETS, targets, scenario, adminToken))
        for (const target of TARGETS) rows.push({ target, ...combine(rounds.map((r) => r[target])) })
        continue
      }
      if (scenario === 'embedded') {
        const result = await embedded()
        rows.push(...result.rows)
        embeddedRounds.push(...result.rounds)
        continue
      }
      log(`roster: ${scenario}, ${DURATION} s at ${CONNECTIONS} connections`)
      rows.push({ target: 'roster', ...(await load(rosterTarget, scenario, DURATION, adminToken)) })
    }
    const peakRssMb = Math.round(memoryKb(roster.pid!, 'VmHWM') / 1024)
    let drained: DrainFigures | undefined
    if (args.scenarios.split(',').includes('drain')) drained = await drainScenario(roster, adminToken)

    const seeded = readFileSync(TOKENS, 'utf8').split('\n', 2000).filter(Boolean).map((l) => JSON.parse(l) as SeededUser)
    const active = seeded.filter((u) => u.status === 'ACTIVE')
    const plans = await explain(active[0]!, active[active.length - 1]!)

    console.log(`\n## Roster benchmark: ${USERS} users, ${DURATION} s per scenario (scenario 1: ${ROUNDS} rounds each), ${CONNECTIONS} connections, LOG_LEVEL=${args['log-level']}`)
    console.log(`Roster runs as: node ${startCommand().join(' ')}${args['node-options'] ? ` (NODE_OPTIONS=${args['node-options']})` : ''}`)
    console.log(`Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}\n`)
    console.log('| target | scenario | req/s | p50 ms | p99 ms | errors | timeouts | non-2xx | CPU µs/req | peak RSS MB |')
    console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|')
    for (const r of rows) {
      console.log(`| ${r.target} | ${r.scenario} | ${fmt(r.rps)} | ${r.p50} | ${r.p99} | ${r.errors} | ${r.timeouts} | ${r.non2xx} | ${r.cpuUsPerRequest} | ${r.peakRssMb} |`)
    }
    let ratios
    if (rounds.length) {
      ratios = {
        baseline: ratiosOf(rounds, 'roster', 'baseline'), 'baseline-prepared': ratiosOf(rounds, 'roster', 'baseline-prepared'),
        design: ratiosOf(rounds, 'roster', 'design'), 'design-prepared': ratiosOf(rounds, 'design', 'baseline-prepared')
      }
      const selfReadRss = rows.find((r) => r.target === 'roster' && r.scenario === 'self-read')!.peakRssMb
      const { baseline: text, 'baseline-prepared': prepared } = ratios
      console.log(`\nScenario 1 (self-read) against the baseline, median of ${rounds.length} rounds: throughput ${fmt(text.throughput, 2)}× ` +
        `(target ≥ 0.90), p99 ${fmt(text.p99, 2)}× (target ≤ 1.20); Roster peak RSS ${selfReadRss} MB during it, ` +
        `${peakRssMb} MB over the whole run (target ≤ 150 MB)`)
      console.log(`Against the baseline on prepared statements too (the framework's own cost): throughput ${fmt(prepared.throughput, 2)}× ` +
        `(target ≥ 0.95), p99 ${fmt(prepared.p99, 2)}× (target ≤ 1.10)`)
      console.log(`Against the design's minimum (Fastify, TypeBox, the two auth hooks, an access line; prepared): throughput ${fmt(ratios.design.throughput, 2)}×, ` +
        `p99 ${fmt(ratios.design.p99, 2)}×; the design's minimum against the prepared baseline: ` +
        `throughput ${fmt(ratios['design-prepared'].throughput, 2)}×, p99 ${fmt(ratios['design-prepared'].p99, 2)}×`)
      console.log(`Rounds (req/s of ${TARGETS.join(', ')}): ${rounds.map((r, i) => `${i + 1}: ${TARGETS.map((t) => fmt(r[t].rps)).join(' / ')}`).join('; ')}`)
    }
    const writeRatios: Record<string, ReturnType<typeof ratiosOf>> = {}
    for (const [scenario, measured] of Object.entries(writeRounds)) {
      const ratio = writeRatios[scenario] = ratiosOf(measured, 'roster', 'baseline-writes')
      const cpu = (target: WriteTarget) => combine(measured.map((r) => r[target])).cpuUsPerRequest
      const mainCpu = (target: WriteTarget) => combine(measured.map((r) => r[target])).mainThreadCpuUsPerRequest
      const statements = (target: WriteTarget) => median(measured.map((r) => r[target].statementsPerRequest ?? 0))
      const rounds = `Rounds (req/s of baseline-writes, roster): ${measured.map((r, i) => `${i + 1}: ${WRITE_TARGETS.map((t) => fmt(r[t].rps)).join(' / ')}`).join('; ')}`
      const counted = `statements a request (the server's count) ${fmt(statements('roster'), 1)} / ${fmt(statements('baseline-writes'), 1)}`
      console.log(`\n${scenario} against the bare write baseline (same durable work, same tables), median of ${measured.length} rounds: ` +
        `throughput ${fmt(ratio.throughput, 2)}× (target ≥ ${scenario === 'refresh' ? '0.70' : '0.85'}), p99 ${fmt(ratio.p99, 2)}×; ` +
        `CPU ${cpu('roster')} / ${cpu('baseline-writes')} µs a request (the main thread's ${mainCpu('roster')} / ${mainCpu('baseline-writes')}); ${counted}`)
      console.log(rounds)
    }
    let loginRatios
    if (loginRounds.length) {
      // All three verify the same stored argon2id hash on libuv's threads: what the main thread spends is the rest.
      const mainCpu = (target: LoginTarget) => combine(loginRounds.map((r) => r[target])).mainThreadCpuUsPerRequest
      const mainRatio = (target: LoginTarget, reference: LoginTarget) =>
        median(loginRounds.map((r) => r[target].mainThreadCpuUsPerRequest / Math.max(1, r[reference].mainThreadCpuUsPerRequest)))
      const statements = (target: LoginTarget) => median(loginRounds.map((r) => r[target].statementsPerRequest ?? 0))
      loginRatios = {
        baseline: { ...ratiosOf(loginRounds, 'roster', 'baseline-writes'), mainThreadCpu: mainRatio('roster', 'baseline-writes') },
        design: { ...ratiosOf(loginRounds, 'roster', 'design-login'), mainThreadCpu: mainRatio('roster', 'design-login') },
        'design-baseline': { ...ratiosOf(loginRounds, 'design-login', 'baseline-writes'), mainThreadCpu: mainRatio('design-login', 'baseline-writes') }
      }
      console.log(`\nlogin against the bare login baseline (the same hash, the same durable work), median of ${loginRounds.length} rounds: ` +
        `the main thread's CPU a login (all but the hash) ${mainCpu('roster')} / ${mainCpu('baseline-writes')} µs, ` +
        `${fmt(loginRatios.baseline.mainThreadCpu, 2)}× (target ≤ 1.30); throughput ${fmt(loginRatios.baseline.throughput, 2)}×, ` +
        `p99 ${fmt(loginRatios.baseline.p99, 2)}×; statements a request (the server's count) ${fmt(statements('roster'), 1)} / ${fmt(statements('baseline-writes'), 1)}`)
      console.log(`The design's minimum login (Fastify, TypeBox, an access line, Kysely's own MySQL dialect): main thread ${mainCpu('design-login')} µs, ` +
        `${fmt(loginRatios['design-baseline'].mainThreadCpu, 2)}× the bare login's; Roster ${fmt(loginRatios.design.mainThreadCpu, 2)}× the design's minimum; ` +
        `its statements ${fmt(statements('design-login'), 1)}`)
      console.log(`Rounds (req/s of ${LOGIN_TARGETS.join(', ')}): ${loginRounds.map((r, i) => `${i + 1}: ${LOGIN_TARGETS.map((t) => fmt(r[t].rps)).join(' / ')}`).join('; ')}`)
    }
    let embeddedRatios
    if (embeddedRounds.length) {
      embeddedRatios = {
        info: ratiosOf(embeddedRounds, 'roster-sqlite', 'baseline-sqlite'), warn: ratiosOf(embeddedRounds, 'roster-sqlite-warn', 'baseline-sqlite'),
        contract: ratiosOf(embeddedRounds, 'contract-sqlite', 'baseline-sqlite'), 'warn-contract': ratiosOf(embeddedRounds, 'roster-sqlite-warn', 'contract-sqlite')
      }
      console.log(`\nEmbedded engine (self-read on SQLite) against node:http + better-sqlite3, median of ${embeddedRounds.length} rounds: ` +
        `at LOG_LEVEL=warn throughput ${fmt(embeddedRatios.warn.throughput, 2)}× (target ≥ 0.85), p99 ${fmt(embeddedRatios.warn.p99, 2)}×; ` +
        `at ${args['log-level']} throughput ${fmt(embeddedRatios.info.throughput, 2)}×, p99 ${fmt(embeddedRatios.info.p99, 2)}×`)
      console.log('The contract\'s minimum at warn (the design\'s minimum with the other per-answer outputs of the contract and Roster\'s rules, in the fewest steps) against ' +
        `node:http + better-sqlite3: throughput ${fmt(embeddedRatios.contract.throughput, 2)}×, p99 ${fmt(embeddedRatios.contract.p99, 2)}×; ` +
        `Roster at warn against it: throughput ${fmt(embeddedRatios['warn-contract'].throughput, 2)}×, p99 ${fmt(embeddedRatios['warn-contract'].p99, 2)}×`)
      console.log(`Rounds (req/s of ${EMBEDDED_TARGETS.join(', ')}): ${embeddedRounds.map((r, i) => `${i + 1}: ${EMBEDDED_TARGETS.map((t) => fmt(r[t].rps)).join(' / ')}`).join('; ')}`)
    }
    let metricsRatios
    if (metricsRounds.length) {
      metricsRatios = ratiosOf(metricsRounds, 'roster', 'roster-metrics-off')
      console.log(`\nMetrics on against off (self-read on MySQL), median of ${metricsRounds.length} rounds: ` +
        `throughput ${fmt(metricsRatios.throughput, 3)}× (target ≥ 0.97), p99 ${fmt(metricsRatios.p99, 2)}×`)
      console.log(`Rounds (req/s of roster, roster-metrics-off): ${metricsRounds.map((r, i) => `${i + 1}: ${METRICS_TARGETS.map((t) => fmt(r[t].rps)).join(' / ')}`).join('; ')}`)
    }
    if (drained) {
      const d = drained
      console.log(`\nOutbox drain (MySQL, receivers on this machine that answer at once): mail ${fmt(d.mail.perSecond)}/s ` +
        `(${d.mail.count} in ${d.mail.seconds} s, target ≥ 200/s); webhook deliveries ${fmt(d.webhookOne.perSecond)}/s to one webhook ` +
        `(one in flight, in order), ${fmt(d.webhookEight.perSecond)}/s to eight`)
      console.log(`A sign-up's mail under the rename load (${CONNECTIONS} connections): median ${d.signupMail.medianMs} ms, ` +
        `at most ${d.signupMail.maxMs} ms from the answer to the SMTP server (target ≤ 2,000 ms), ${d.signupMail.count} sign-ups, ${d.signupMail.missing} not arrived`)
    }
    console.log('\n### Query plans (EXPLAIN), and the rows one prepared execution read\n')
    for (const p of plans) {
      const text = (v: unknown) => (typeof v === 'string' || typeof v === 'number' ? String(v) : '-')
      const step = (r: Record<string, unknown>) => `${text(r.table)} ${text(r.type)} via ${text(r.key)} (~${text(r.rows)} rows${r.Extra ? `; ${text(r.Extra)}` : ''})`
      console.log(`- ${p.query}: ${p.plan.map(step).join(' → ')}${p.fullScan ? '  **FULL SCAN**' : ''}; ` +
        `${p.rowsRead} rows read`)
    }
    // Every request of every scenario should succeed: a refusal (an expired or foreign token, a saturated pool)
    // measures the wrong thing, so such a run is reported as invalid and the command fails.
    const failed = rows.filter((r) => r.errors + r.timeouts + r.non2xx > 0)
    if (failed.length) {
      console.log(`\n**INVALID RUN**: requests failed in ${failed.map((r) => `${r.target} ${r.scenario} (${r.errors} errors, ${r.timeouts} timeouts, ${r.non2xx} non-2xx)`).join(', ')}` +
        (args.reuse ? '; with --reuse the seeded tokens may have expired: run without it to seed afresh' : ''))
      process.exitCode = 1
    }
    writeFileSync(`${RESULTS}/latest.json`, JSON.stringify({
      at: new Date().toISOString(), users: USERS, duration: DURATION, rounds: ROUNDS, connections: CONNECTIONS, logLevel: args['log-level'],
      machine: { cpus: cpus().length, model: cpus()[0]?.model, memGiB: Math.round(totalmem() / 2 ** 30), node: process.version },
      rows, selfReadRounds: rounds, ratios, writeRounds, writeRatios, loginRounds, loginRatios, embeddedRounds, embeddedRatios, metricsRounds, metricsRatios,
      peakRssMb,
      drained, plans, valid: failed.length === 0
    }, null, 2))
    log(`figures in ${RESULTS}/latest.json`)
  } finally {
    stop()
    await statusConnection?.end()
  }
}

await main()
process.exit(process.exitCode ?? 0)
