#!/usr/bin/env node
// The test command: typecheck, then the whole tap suite on the embedded SQLite, then again on MySQL/MariaDB.
// MySQL comes from TEST_MYSQL_URL (default mysql://root@127.0.0.1:3306); the suite creates and drops its own
// databases there. When it is unreachable that leg is skipped with a notice, or fails when REQUIRE_MYSQL=1.
// Ends with one line: "N passed, N failed".
import { spawn } from 'node:child_process'
import { createConnection } from 'mysql2/promise'

const mysqlUrl = process.env.TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306'
const requireMysql = process.env.REQUIRE_MYSQL === '1'
const extraArgs = process.argv.slice(2)

function run(cmd, args, env) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (chunk) => { out += chunk; process.stdout.write(chunk) })
    child.on('close', (code) => resolve({ code: code ?? 1, out }))
  })
}

/** tap's closing summary line: "# { total: 73, pass: 72, fail: 1, skip: 0 }". */
function count(tap) {
  const lines = tap.trim().split('\n').filter((l) => /^# \{ total: \d+/.test(l))
  const last = lines[lines.length - 1]
  if (!last) return { passed: 0, failed: 0, found: false }
  const num = (key) => Number(new RegExp(`${key}: (\\d+)`).exec(last)?.[1] ?? 0)
  return { passed: num('pass'), failed: num('fail'), found: true }
}

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

console.log('# typecheck (tsc --noEmit)')
const tsc = await run('npx', ['--no-install', 'tsc', '--noEmit', '-p', '.'], {})
if (tsc.code !== 0) { console.log('# typecheck failed'); totals.failed++; exitCode = 1 } else totals.passed++

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

for (const leg of legs) {
  console.log(`\n# ===== suite on ${leg.name} =====`)
  const res = await run('npx', ['--no-install', 'tap', '--reporter=tap', '--disable-coverage', '--allow-empty-coverage', ...extraArgs], leg.env)
  const c = count(res.out)
  console.log(`# ${leg.name}: ${c.passed} passed, ${c.failed} failed`)
  totals.passed += c.passed
  totals.failed += c.failed
  if (!c.found || c.passed === 0) { exitCode = 1; totals.failed++; console.log(`# ${leg.name}: no test ran`) }
  if (res.code !== 0) {
    exitCode = 1
    if (c.failed === 0) { totals.failed++; console.log(`# ${leg.name}: tap exited ${res.code}`) }
  }
}

console.log(`${totals.passed} passed, ${totals.failed} failed`)
process.exit(exitCode || (totals.failed ? 1 : 0))
