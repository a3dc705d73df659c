#!/usr/bin/env node
// The test command: lint, and the build of everything (the type check), side by side, then every tap test file on
// the embedded SQLite and on MySQL/MariaDB, the two legs side by side (much of a file's time is spent waiting on
// deadlines, child processes and MySQL, which the other files fill), then, alone, the timing measurements on each
// engine, the SDK matrix on each engine and the browser test of /docs on SQLite.
// MySQL comes from TEST_MYSQL_URL (default mysql://root@127.0.0.1:3306); the suite creates and drops its own
// databases there. When it is unreachable that leg is skipped with a notice, or fails when REQUIRE_MYSQL=1.
// Prints one line per test file as it finishes, the details of each failure, and ends with one line:
// "N passed, N failed". The whole TAP stream of each leg is kept in .tap/<leg>.tap.
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { createConnection } from 'mysql2/promise'

const mysqlUrl = process.env.TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306'
const requireMysql = process.env.REQUIRE_MYSQL === '1'
const extraArgs = process.argv.slice(2)
if (extraArgs.some((arg) => arg.startsWith('-'))) {
  console.log('npm test takes test files and folders only: run one file with options of its own as `npx tap <options> dist/test/<file>.test.js`')
  process.exit(2)
}

/**
 * Runs a command; its standard output is gathered, and each complete line is shown to `show` as it arrives. With
 * `killAfterMs`, a command still running then is killed.
 */
function run(cmd, args, env, show = (line) => console.log(line), killAfterMs = undefined) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    let partial = ''
    let killed = false
    const timer = killAfterMs && setTimeout(() => { killed = true; child.kill('SIGKILL') }, killAfterMs)
    child.stdout.on('data', (chunk) => {
      out += chunk
      const lines = (partial + chunk).split('\n')
      partial = lines.pop()
      for (const line of lines) show(line)
    })
    child.on('close', (code) => {
      clearTimeout(timer)
      if (partial) show(partial)
      resolve({ code: code ?? 1, out, killed })
    })
  })
}

/** Whether a failure at `indent` on line `at` closes a subtest in which something deeper failed. */
function failedWithin(lines, at, indent) {
  for (let j = at - 1; j >= 0; j--) {
    if (lines[j].trim() === '') continue
    const depth = lines[j].search(/\S/)
    if (depth <= indent) return false
    if (/^\s*not ok /.test(lines[j])) return true
  }
  return false
}

/** Each failed assertion with its diagnostics: a `not ok` line and the lines indented under it. */
function failures(tap, most = 300) {
  const lines = tap.split('\n')
  const out = []
  for (let i = 0; i < lines.length && out.length < most; i++) {
    const m = /^(\s*)not ok /.exec(lines[i])
    if (!m) continue
    const indent = m[1].length
    // A failed parent follows its children's failures: only the innermost ones are shown.
    if (failedWithin(lines, i, indent)) continue
    out.push(lines[i])
    while (i + 1 < lines.length && (lines[i + 1].trim() === '' || lines[i + 1].search(/\S/) > indent)) out.push(lines[++i])
  }
  return out.join('\n')
}

/** tap's closing summary line: "# { total: 73, pass: 72, fail: 1, skip: 0 }". */
function count(tap) {
  const lines = tap.trim().split('\n').filter((l) => /^# \{ total: \d+/.test(l))
  const last = lines[lines.length - 1]
  if (!last) return { passed: 0, failed: 0, skipped: 0, found: false }
  const num = (key) => Number(new RegExp(`${key}: (\\d+)`).exec(last)?.[1] ?? 0)
  return { passed: num('pass'), failed: num('fail'), skipped: num('skip'), found: true }
}

/** The reasons tap gave for the tests it skipped, each once. */
const skipReasons = (tap) => [...new Set([...tap.matchAll(/ # SKIP (.+)$/gm)].map((m) => m[1]))]

async function mysqlReachable() {
  try {
    const conn = await createConnection({ uri: mysqlUrl, connectTimeout: 3000 })
    await conn.end()
    return true
  } catch (err) {
    return err
  }
}

const totals = { passed: 0, failed: 0 }
let exitCode = 0
const started = Date.now()
/** Seconds since the run began, for each phase's heading: where a slow run's time went. */
const at = () => `[${Math.round((Date.now() - started) / 1000)}s]`

// tap's test class with the plugins package.json names, built into node_modules, where the type check reads it.
const tapBuilt = await run('npx', ['--no-install', 'tap', 'build'], {})
if (tapBuilt.code !== 0) { console.log('# tap build failed'); totals.failed++; exitCode = 1 }
// The lint (zero warnings), and the build of dist/ with the tests and benchmarks, which is the type check: the
// compiled tests run, and the tests that start the service and its scripts as processes run what `npm start` runs.
console.log(`# ${at()} lint (eslint), and typecheck and build (tsc -p tsconfig.json into dist/)`)
const checks = await Promise.all([
  ['lint', run('npx', ['--no-install', 'eslint', '--max-warnings', '0', '.'], {})],
  ['typecheck and build', run(process.execPath, ['scripts/build-if-stale.mjs', '--always', '--tests'], {})]
].map(async ([name, done]) => [name, await done]))
for (const [name, result] of checks) {
  if (result.code !== 0) { console.log(`# ${name} failed`); totals.failed++; exitCode = 1 } else totals.passed++
}

const legs = [{ name: 'sqlite', env: { TEST_DB: 'sqlite' } }]
const reachable = await mysqlReachable()
if (reachable === true) legs.push({ name: 'mysql', env: { TEST_DB: 'mysql', TEST_MYSQL_URL: mysqlUrl } })
else if (requireMysql) {
  console.log(`# MySQL at ${mysqlUrl} is unreachable (${reachable.code ?? reachable.message}) and REQUIRE_MYSQL=1`)
  totals.failed++
  exitCode = 1
} else {
  console.log(`# MySQL at ${mysqlUrl} is unreachable (${reachable.code ?? reachable.message}): skipping the MySQL leg`)
}

/**
 * Each test file runs as `node <file>`: a tap test prints its own TAP and ends itself at TAP_TIMEOUT. tap's runner is
 * not used because it loads its coverage tracker into every test process and, through NODE_OPTIONS, into every
 * service and CLI process a test starts, which doubles the CPU each one spends loading its modules; no coverage is
 * collected here. `@tapjs/mock`'s loader is what `t.mockImport` needs.
 */
const NODE_ARGS = ['--enable-source-maps', '--import=@tapjs/mock/import']
const TIMEOUT_S = 120
const JOBS = 2
/**
 * Measurements of time (test/timing/): run after the legs, one engine at a time and one file at a time, with nothing
 * else running. The soak is among them for its bound on the event loop's delay.
 */
const TIMING = 'test/timing'
/**
 * The page in a real browser (test/browser/): after the legs, alone, on the first engine only. Chromium takes both
 * cores while it renders: beside the legs it starved their black-box tests of their deadlines, and what it tests (the
 * /docs page) is the same on either engine.
 */
const BROWSER = 'test/browser'
/**
 * The SDK matrix (five generators, the TypeScript compiler over what they generate, two linters): after the legs too,
 * one engine after the other. Generating takes both cores for half a minute; beside the legs it took four times as
 * long, past tap's deadline on a fresh clone, and slowed the legs' own deadlines. The second engine finds the
 * clients generated by the first and only drives its service with them.
 */
const SDK = 'test/http/sdk-matrix.test.ts'
/** The SDK matrix's own timeout (its `t.setTimeout`): on a fresh clone it installs its generators first. */
const SDK_TIMEOUT_S = 600
/** A path as given, without a leading ./ or a trailing /. */
const normal = (arg) => arg.replace(/^\.\//, '').replace(/\/+$/, '')
const positional = extraArgs.filter((arg) => !arg.startsWith('-')).map(normal)
/** Whether `path` is `dir` itself or lies under it. */
const within = (path, dir) => path === dir || path.startsWith(`${dir}/`)
/** The test files under a folder, at any depth, fixtures aside, in a stable order. */
const testsIn = (dir) => readdirSync(dir, { recursive: true }).map(String)
  .filter((f) => f.endsWith('.test.ts') && !f.split('/').some((part) => part === 'fixtures' || part === 'node_modules')).sort().map((f) => `${dir}/${f}`)
/** Of `files`, those the arguments name (a file, or a folder holding it): all of them when none is named. */
const named = (files) => positional.length === 0 ? files : files.filter((file) => positional.some((arg) => within(file, arg)))
const alone = named([...testsIn(TIMING), SDK])
const browserFiles = named(testsIn(BROWSER))
/** A named folder stands for the test files under it (fixtures aside). */
const filesOf = (path) => existsSync(path) && statSync(path).isDirectory() ? testsIn(path) : [path]
/** The files the legs run, all or those named: not those run alone or in the browser. */
const legFiles = (positional.length === 0 ? testsIn('test') : positional.flatMap(filesOf))
  .filter((file) => ![TIMING, BROWSER, SDK].some((path) => within(file, path)))
/** Where the build puts a test file or folder: the compiled tests run. */
const built = (path) => `dist/${path.replace(/\.ts$/, '.js')}`

/**
 * Runs each `{ label, env, file }` of `work` in the order given, `jobs` at a time, and gathers each label's files into
 * one TAP stream as tap's runner would: each file a subtest, ended by one summary line of every assertion's count.
 */
async function runFiles(work, jobs) {
  const queue = [...work]
  const byLabel = new Map(work.map(({ label }) => [label, { parts: [], pass: 0, fail: 0, skip: 0, n: 0 }]))
  const worker = async () => {
    for (let item = queue.shift(); item; item = queue.shift()) {
      const { label, env, file, timeoutS = TIMEOUT_S } = item
      const begun = Date.now()
      // tap ends a file at its own timeout; one that outlives it by half a minute is killed.
      const res = await run(process.execPath, [...NODE_ARGS, file], { ...env, TAP_TIMEOUT: String(TIMEOUT_S) }, () => {}, (timeoutS + 30) * 1000)
      const ms = Date.now() - begun
      const leg = byLabel.get(label)
      const c = count(res.out)
      const ok = res.code === 0 && c.found && c.failed === 0
      leg.pass += c.passed
      leg.skip += c.skipped
      // A file that failed without a failed assertion (it crashed, or was killed) counts as one failure.
      leg.fail += c.failed + (ok || c.failed > 0 ? 0 : 1)
      const why = res.killed ? ' (killed: it outlived its timeout)'
        : !c.found ? ` (exited ${res.code} before its summary)`
          : res.code !== 0 && c.failed === 0 ? ` (exited ${res.code})` : ''
      const line = `${ok ? 'ok' : 'not ok'} ${++leg.n} - ${file}${why}`
      console.log(`# ${label}: ${line}`)
      const body = res.out.trimEnd().split('\n').map((l) => (l ? `    ${l}` : l)).join('\n')
      leg.parts.push(`# Subtest: ${file}\n${body}\n${line} # time=${ms}ms\n`)
    }
  }
  await Promise.all(Array.from({ length: jobs }, worker))
  mkdirSync('.tap', { recursive: true })
  return [...byLabel].map(([label, leg]) => {
    const total = leg.pass + leg.fail + leg.skip
    const out = `TAP version 14\n${leg.parts.join('')}1..${leg.n}\n# { total: ${total}, pass: ${leg.pass}, fail: ${leg.fail}, skip: ${leg.skip} }\n`
    writeFileSync(`.tap/${label}.tap`, out)
    return { label, out }
  })
}

const runs = []
if (legFiles.length > 0) {
  console.log(`\n# ===== ${at()} suite on ${legs.map((leg) => leg.name).join(' and ')} =====`)
  // One queue for both legs, a file of each in turn, the last leg's first: the legs end together, every job busy
  // to the end, where a pool of their own left the slower leg's tail to two jobs.
  const work = legFiles.flatMap((file) => [...legs].reverse().map((leg) => ({ label: leg.name, env: leg.env, file: built(file) })))
  runs.push(...await runFiles(work, JOBS * legs.length))
}
if (alone.length > 0) {
  console.log(`\n# ===== ${at()} ${alone.join(', ')}: alone, one file at a time, on ${legs.map((leg) => leg.name).join(' then ')} =====`)
  for (const leg of legs) {
    runs.push(...await runFiles(alone.map((file) => ({ label: `${leg.name}-alone`, env: leg.env, file: built(file), timeoutS: file === SDK ? SDK_TIMEOUT_S : undefined })), 1))
  }
}
if (browserFiles.length > 0) {
  console.log(`\n# ===== ${at()} ${BROWSER}, alone, on ${legs[0].name} =====`)
  runs.push(...await runFiles(browserFiles.map((file) => ({ label: 'browser', env: legs[0].env, file: built(file) })), JOBS))
}
for (const res of runs) {
  const { label } = res
  const c = count(res.out)
  if (c.failed > 0) console.log(`\n# failures on ${label} (the whole TAP stream is in .tap/${label}.tap):\n${failures(res.out)}\n`)
  console.log(`# ${label}: ${c.passed} passed, ${c.failed} failed`)
  totals.passed += c.passed
  totals.failed += c.failed
  // A leg whose every test skipped itself (the browser's, where no chromium is installed) says so and stays green;
  // REQUIRE_BROWSER=1 turns that skip into a failure inside the test.
  if (c.found && c.passed === 0 && c.failed === 0 && c.skipped > 0) console.log(`# ${label}: skipped (${skipReasons(res.out).join('; ')})`)
  else if (!c.found || c.passed === 0) { exitCode = 1; totals.failed++; console.log(`# ${label}: no test ran`) }
}

console.log(`# ${at()} done`)
console.log(`${totals.passed} passed, ${totals.failed} failed`)
process.exit(exitCode || (totals.failed ? 1 : 0))
