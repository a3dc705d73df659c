// npm run bench:profile [-- --rounds 3 --seconds 6 --warmup 7 --users 20000 --targets bare,fastify,roster --reuse]
//
// The embedded self-read's CPU per request, with the host's drift taken out. On a shared host the speed of
// consecutive wall-clock rounds differs by up to half, more than the gap the embedded target is about. Here each
// server is profiled alone under the scenario's load (`perf record`, the server on one core and the load generator
// on another where there are two), and its samples per request are scaled by its SQLite share: every target runs
// the same statement on the same file, so the samples in `better_sqlite3.node` measure the host's speed at that
// moment. That takes out most of the drift, not all: compare medians of several rounds. Figures are µs per request
// with SQLite's share set to 8 µs (about what it costs on this machine), and ratios to the bare server. Needs Linux
// `perf` (Debian: linux-perf). See BENCHMARKS.md.
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, rmSync } from 'node:fs'
import { cpus } from 'node:os'
import { parseArgs } from 'node:util'
import { seed } from '../scripts/seed.js'
import { startCommand, waitFor } from './processes.js'

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '6' },
    warmup: { type: 'string', default: '7' },
    users: { type: 'string', default: '20000' },
    targets: { type: 'string', default: 'bare,fastify,roster' },
    reuse: { type: 'boolean', default: false },
    'sqlite-file': { type: 'string', default: 'bench/results/roster_profile.sqlite' }
  }
})
const ROUNDS = Math.max(1, Number(args.rounds))
const SECONDS = Number(args.seconds)
const WARMUP = Number(args.warmup)
const SQLITE_FILE = args['sqlite-file']!
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

/** Each target: how it starts (all on the same SQLite file, on PORT). */
const TARGETS: Record<string, { argv: string[]; env: Record<string, string> }> = {
  bare: { argv: ['bench/baseline-sqlite.mjs'], env: { SQLITE_FILE } },
  fastify: { argv: ['bench/baseline-fastify.mjs'], env: { SQLITE_FILE } },
  roster: {
    argv: startCommand(),
    env: { DATABASE_URL: `sqlite:${SQLITE_FILE}`, HOST: '127.0.0.1', LOG_LEVEL: 'info', NODE_ENV: 'production', RATE_LIMIT_MAX: '100000000' }
  }
}
const targets = args.targets!.split(',').filter(Boolean)
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

/** One profiled run of a target: its CPU per request, scaled by its SQLite share. */
async function profile(name: string, round: number): Promise<{ scaled: number; rps: number }> {
  const target = TARGETS[name]!
  const [cmd, ...rest] = onCore(SERVER_CORE, [process.execPath, ...target.argv])
  const server = spawn(cmd!, rest, { env: { ...process.env, ...target.env, PORT: String(PORT) }, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  try {
    await waitFor(`http://127.0.0.1:${PORT}/`, server)
    const load = loadFor(WARMUP + SECONDS)
    await new Promise((r) => setTimeout(r, WARMUP * 1000))
    const file = `bench/results/profile-${name}-${round}.perf`
    execFileSync('perf', ['record', '-q', '-F', '4000', '-p', String(server.pid), '-o', file, '--', 'sleep', String(SECONDS)], { stdio: 'ignore' })
    const figures = await load
    if (figures.non2xx || figures.errors) throw new Error(`${name}: ${figures.non2xx} non-2xx answers, ${figures.errors} errors: INVALID RUN`)
    const samples = samplesByObject(file)
    rmSync(file, { force: true })
    const total = [...samples.values()].reduce((a, b) => a + b, 0)
    const sqlite = [...samples].filter(([object]) => object.includes('better_sqlite3')).reduce((a, [, n]) => a + n, 0)
    if (sqlite === 0) throw new Error(`${name}: no samples in better_sqlite3.node`)
    return { scaled: (total / sqlite) * SQLITE_NOMINAL_US, rps: figures.rps }
  } finally {
    server.kill()
    await new Promise((r) => (server.exitCode !== null ? r(undefined) : server.once('exit', r)))
  }
}

async function main() {
  mkdirSync('bench/results', { recursive: true })
  if (targets.includes('roster')) {
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
  const runs: Record<string, Array<{ scaled: number; rps: number }>> = Object.fromEntries(targets.map((t) => [t, []]))
  for (let round = 1; round <= ROUNDS; round++) {
    for (const name of round % 2 ? targets : [...targets].reverse()) {
      const run = await profile(name, round)
      runs[name]!.push(run)
      log(`round ${round}: ${name} ${run.rps.toFixed(0)} req/s, ${run.scaled.toFixed(1)} µs a request scaled`)
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const reference = runs.bare ? median(runs.bare.map((r) => r.scaled)) : undefined
  console.log(`\n| target | CPU µs per self-read, SQLite's share = ${SQLITE_NOMINAL_US} µs (median) | range | against bare | req/s of the runs |`)
  console.log('|---|---:|---:|---:|---|')
  for (const name of targets) {
    const scaled = runs[name]!.map((r) => r.scaled)
    const m = median(scaled)
    console.log(`| ${name} | ${m.toFixed(1)} | ${Math.min(...scaled).toFixed(1)}–${Math.max(...scaled).toFixed(1)} | ` +
      `${reference ? `${(m / reference).toFixed(2)}×` : '–'} | ${runs[name]!.map((r) => r.rps.toFixed(0)).join(', ')} |`)
  }
  if (reference && runs.roster) console.log(`\nRoster's throughput at equal host speed, against the bare server: about ${(reference / median(runs.roster.map((r) => r.scaled))).toFixed(2)}× (target ≥ 0.90)`)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
