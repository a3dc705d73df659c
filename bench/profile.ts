// npm run bench:profile [-- --rounds 3 --seconds 6 --warmup 7 --users 20000 --reuse
//   --targets bare,fastify,design-nolog,design-contract,design,roster-warn,roster]
// (also design-contract-info: the contract's minimum with the design's access line; roster-metrics-off: Roster with
// METRICS_PORT=0; contract-no-<part>: the contract's minimum without one part, for logger, nosniff, ids, limit,
// metrics, timeouts, shed)
//
// The embedded self-read's CPU per request, for the bare server, a one-route Fastify server, the design's minimum
// (bench/baseline-design.mjs, with and without its access line), the contract's minimum (the design's minimum at
// `warn` with the rest of what the contract and Roster's security and reliability rules ask of each answer, in the
// fewest steps) and Roster (at `warn` and at `info`). Each server is profiled alone under the scenario's load
// (`perf record`, the server on one core and the load generator on another where there are two), in alternating
// rounds. Two figures per target: the CPU it used per request (from /proc, over the profiled
// seconds), and its perf samples per request scaled so that its SQLite share (`better_sqlite3.node`, the same
// statement on the same file in every target) weighs 8 µs, which takes out most of the host's drift between rounds
// but flatters the servers that do more per request, in which the same statement runs slower (BENCHMARKS.md).
// Compare medians of several rounds. Needs Linux `perf` (Debian: linux-perf).
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, rmSync } from 'node:fs'
import { cpus } from 'node:os'
import { parseArgs } from 'node:util'
import { seed } from '../scripts/seed.js'
import { weighParts } from './parts.js'
import { cpuMicros, startCommand, waitFor } from './processes.js'

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '6' },
    warmup: { type: 'string', default: '7' },
    users: { type: 'string', default: '20000' },
    targets: { type: 'string', default: 'bare,fastify,design-nolog,design-contract,design,roster-warn,roster' },
    reuse: { type: 'boolean', default: false },
    'sqlite-file': { type: 'string', default: 'bench/results/roster_profile.sqlite' }
  }
})
const ROUNDS = Math.max(1, Number(args.rounds))
const SECONDS = Number(args.seconds)
const WARMUP = Number(args.warmup)
const SQLITE_FILE = args['sqlite-file']
const TOKENS = `${SQLITE_FILE}.tokens.jsonl`
const PORT = 3309
const SQLITE_NOMINAL_US = 8
const log = (line: string) => console.log(`# ${line}`)

const has = (cmd: string, ...a: string[]) => {
  try {
    execFileSync(cmd, a, { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}
if (!has('perf', '--version')) {
  console.error('bench:profile needs Linux perf (Debian: apt-get install linux-perf)')
  process.exit(2)
}
// Server and load generator each on a core of their own where there are two.
const pin = cpus().length >= 2 && has('taskset', '--version')
const onCore = (core: number, argv: string[]) => (pin ? ['taskset', '-c', String(core), ...argv] : argv)
const SERVER_CORE = cpus().length - 1

/** Roster as `npm start` starts it, on the same file, at `info`, with a rate limit the load never reaches; `env` on top. */
function roster(env: Record<string, string> = {}) {
  return {
    argv: startCommand(),
    env: { DATABASE_URL: `sqlite:${SQLITE_FILE}`, HOST: '127.0.0.1', LOG_LEVEL: 'info', NODE_ENV: 'production', RATE_LIMIT_MAX: '100000000', ...env }
  }
}

/** Each target: how it starts (all on the same SQLite file, on PORT). */
const TARGETS: Record<string, { argv: string[]; env: Record<string, string> }> = {
  bare: { argv: ['bench/baseline-sqlite.mjs'], env: { SQLITE_FILE } },
  fastify: { argv: ['bench/baseline-fastify.mjs'], env: { SQLITE_FILE } },
  design: { argv: ['bench/baseline-design.mjs'], env: { SQLITE_FILE } },
  'design-nolog': { argv: ['bench/baseline-design.mjs'], env: { SQLITE_FILE, DESIGN_LOG: 'off' } },
  // The design's minimum with the rest of what the contract and Roster's rules ask of each answer, in the fewest steps,
  // at `warn`: the floor under roster-warn.
  'design-contract': { argv: ['bench/baseline-design.mjs'], env: { SQLITE_FILE, DESIGN_LOG: 'off', DESIGN_CONTRACT: 'on' } },
  // The same at `info`, with the design's minimum's access line: the floor under roster.
  'design-contract-info': { argv: ['bench/baseline-design.mjs'], env: { SQLITE_FILE, DESIGN_CONTRACT: 'on' } },
  // The contract's minimum without one of its parts: against design-contract, what that part costs at its least.
  ...Object.fromEntries(['logger', 'nosniff', 'ids', 'limit', 'metrics', 'timeouts', 'shed'].map((part) =>
    [`contract-no-${part}`, { argv: ['bench/baseline-design.mjs'], env: { SQLITE_FILE, DESIGN_LOG: 'off', DESIGN_CONTRACT: 'on', DESIGN_WITHOUT: part } }])),
  roster: roster(),
  // Roster at LOG_LEVEL=warn: no access line, the figure the embedded target of `npm run bench` is about.
  'roster-warn': roster({ LOG_LEVEL: 'warn' }),
  // Roster with its metrics off (METRICS_PORT=0): against `roster`, what timing every answer costs.
  'roster-metrics-off': roster({ METRICS_PORT: '0' })
}
const targets = args.targets.split(',').filter(Boolean)
for (const t of targets) if (!TARGETS[t]) throw new Error(`unknown target ${t}; known: ${Object.keys(TARGETS).join(', ')}`)

function loadFor(seconds: number): Promise<{ total: number; rps: number; non2xx: number; errors: number }> {
  const input = JSON.stringify({ url: `http://127.0.0.1:${PORT}`, scenario: 'self-read', duration: seconds, connections: 50, tokensFile: TOKENS })
  const [cmd, ...rest] = onCore(0, [process.execPath, 'bench/load.mjs', input])
  return new Promise((resolve, reject) => {
    const child = spawn(cmd!, rest, { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop()!)) : reject(new Error(`load exited ${code}`))))
  })
}

/** Samples per shared object in a perf recording. */
function samplesByObject(file: string): Map<string, number> {
  const report = execFileSync('perf', ['report', '-i', file, '--no-children', '--sort', 'dso', '--stdio', '-n'], { encoding: 'utf8', maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'ignore'] })
  const samples = new Map<string, number>()
  for (const line of report.split('\n')) {
    const m = /^\s+[\d.]+%\s+(\d+)\s+(.+?)\s*$/.exec(line)
    if (m) samples.set(m[2]!, (samples.get(m[2]!) ?? 0) + Number(m[1]))
  }
  return samples
}

/**
 * One profiled run of a target: its CPU per request as measured (from /proc, over the profiled seconds, divided by
 * the requests of those seconds at the run's mean rate; perf's sampling itself is in it, so it reads higher than an
 * unprofiled run), and scaled by its SQLite share.
 */
async function profile(name: string, round: number): Promise<{ scaled: number; raw: number; rps: number }> {
  const target = TARGETS[name]!
  const [cmd, ...rest] = onCore(SERVER_CORE, [process.execPath, ...target.argv])
  const server = spawn(cmd!, rest, { env: { ...process.env, MYSQL_URL: '', ...target.env, PORT: String(PORT) }, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  try {
    await waitFor(`http://127.0.0.1:${PORT}/`, server)
    const load = loadFor(WARMUP + SECONDS)
    await new Promise((r) => setTimeout(r, WARMUP * 1000))
    const file = `bench/results/profile-${name}-${round}.perf`
    const cpuBefore = cpuMicros(server.pid!)
    execFileSync('perf', ['record', '-q', '-F', '4000', '-p', String(server.pid), '-o', file, '--', 'sleep', String(SECONDS)], { stdio: 'ignore' })
    const cpu = cpuMicros(server.pid!) - cpuBefore
    const figures = await load
    if (figures.non2xx || figures.errors) throw new Error(`${name}: ${figures.non2xx} non-2xx answers, ${figures.errors} errors: INVALID RUN`)
    const samples = samplesByObject(file)
    rmSync(file, { force: true })
    const total = [...samples.values()].reduce((a, b) => a + b, 0)
    const sqlite = [...samples].filter(([object]) => object.includes('better_sqlite3')).reduce((a, [, n]) => a + n, 0)
    if (sqlite === 0) throw new Error(`${name}: no samples in better_sqlite3.node`)
    return { scaled: (total / sqlite) * SQLITE_NOMINAL_US, raw: cpu / (figures.rps * SECONDS), rps: figures.rps }
  } finally {
    server.kill()
    await new Promise((r) => (server.exitCode !== null ? r(undefined) : server.once('exit', r)))
  }
}

async function main() {
  mkdirSync('bench/results', { recursive: true })
  if (targets.some((t) => t.startsWith('roster'))) {
    log('building the service (npm run build)')
    execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' })
  }
  // Seeded afresh unless --reuse: the seeded tokens expire after a week, and a run on expired ones is invalid.
  if (!args.reuse || !existsSync(SQLITE_FILE) || !existsSync(TOKENS)) {
    for (const suffix of ['', '-wal', '-shm']) rmSync(SQLITE_FILE + suffix, { force: true })
    log(`seeding ${args.users} users into ${SQLITE_FILE}`)
    await seed({ url: `sqlite:${SQLITE_FILE}`, users: Number(args.users), tokensFile: TOKENS, password: 'seed-password-1', log })
  }
  log(`${ROUNDS} rounds of ${targets.join(', ')}: ${WARMUP} s of load, then ${SECONDS} s profiled${pin ? `; server on core ${SERVER_CORE}, load on core 0` : ''}`)
  const runs: Record<string, Array<{ scaled: number; raw: number; rps: number }>> = Object.fromEntries(targets.map((t) => [t, []]))
  for (let round = 1; round <= ROUNDS; round++) {
    for (const name of round % 2 ? targets : [...targets].reverse()) {
      const run = await profile(name, round)
      runs[name]!.push(run)
      log(`round ${round}: ${name} ${run.rps.toFixed(0)} req/s, ${run.raw.toFixed(1)} µs a request measured, ${run.scaled.toFixed(1)} scaled`)
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const of = (name: string, key: 'raw' | 'scaled') => runs[name]!.map((r) => r[key])
  const against = (name: string, key: 'raw' | 'scaled') => (runs.bare ? `${(median(of(name, key)) / median(of('bare', key))).toFixed(2)}×` : '–')
  console.log('\n| target | CPU µs per self-read, measured (median, range) | against bare | scaled to SQLite\'s share = ' +
    `${SQLITE_NOMINAL_US} µs (median, range) | against bare | req/s of the runs |`)
  console.log('|---|---:|---:|---:|---:|---|')
  const cell = (xs: number[]) => `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)})`
  for (const name of targets) {
    console.log(`| ${name} | ${cell(of(name, 'raw'))} | ${against(name, 'raw')} | ${cell(of(name, 'scaled'))} | ${against(name, 'scaled')} | ` +
      `${runs[name]!.map((r) => r.rps.toFixed(0)).join(', ')} |`)
  }
  if (runs.bare && runs.roster) {
    const ratio = (key: 'raw' | 'scaled') => (median(of('bare', key)) / median(of('roster', key))).toFixed(2)
    console.log(`\nRoster's throughput per core against the bare server's: ${ratio('raw')}× measured, ${ratio('scaled')}× scaled (target ≥ 0.90)`)
  }
  if (runs.roster) {
    // The home-grown parts, against Roster's CPU per self-read as measured above: a part worth less than 2 % goes.
    const perRead = median(of('roster', 'raw'))
    log('weighing the home-grown parts against what they stand in for')
    console.log(`\n| part | Roster's way | µs | the other way | µs | Roster's way saves, of its ${perRead.toFixed(1)} µs a self-read |`)
    console.log('|---|---|---:|---|---:|---:|')
    for (const w of await weighParts()) {
      const saved = w.otherUs - w.rosterUs
      console.log(`| ${w.part} | ${w.roster} | ${w.rosterUs.toFixed(2)} | ${w.other} | ${w.otherUs.toFixed(2)} | ${saved.toFixed(2)} µs, ${(100 * saved / perRead).toFixed(1)} % |`)
    }
    console.log('\nTimed alone, on a hot loop. Under load in the service a part costs more: BENCHMARKS.md ("Home-grown parts") has A/B runs of the whole service.')
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
