import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import net from 'node:net'
import { join } from 'node:path'
import t from 'tap'
import { entry, root } from '../blackbox/service.js'
import { ENGINE, MYSQL_URL } from '../helpers.js'

/** Runs a built command of the project (`npm start`'s own files, no compile on each start) to its end. */
function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  if (!existsSync(args[0]!)) throw new Error(`${args[0]} is missing: npm test builds it (or run npm run build)`)
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, {
      cwd: root, env: { ...process.env, LOG_LEVEL: 'silent', MAX_EVENT_LOOP_DELAY_MS: '0', METRICS_PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe']
    })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { out += d })
    // A start that hangs is killed and fails its case.
    const timer = setTimeout(() => child.kill('SIGKILL'), 45_000)
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, out }) })
  })
}

t.test('a start that cannot succeed says in one line which setting to change, without a stack trace', async (t) => {
  const busy = net.createServer().listen(0, '127.0.0.1')
  await new Promise((r) => busy.once('listening', r))
  t.teardown(() => busy.close())
  const busyPort = String((busy.address() as net.AddressInfo).port)
  // Once each: the cases that need a MySQL server on the MySQL leg, the others (which need none) on the SQLite leg,
  // which every machine runs; the same start on the other leg tests nothing more.
  const anywhere: Array<[string, Record<string, string>, RegExp]> = [
    ['a port in use', { DATABASE_URL: 'sqlite::memory:', PORT: busyPort }, new RegExp(`PORT=${busyPort} is in use`)],
    ['a metrics port in use', { DATABASE_URL: 'sqlite::memory:', PORT: '0', METRICS_PORT: busyPort }, new RegExp(`METRICS_PORT=${busyPort} is in use on 127\\.0\\.0\\.1: .*or to 0 to turn the metrics off`)],
    ['an address not of this machine', { DATABASE_URL: 'sqlite::memory:', HOST: '999.1.1.1', PORT: '0' }, /HOST=999\.1\.1\.1 is not an address/],
    ['a TRUST_PROXY that is not a list of addresses', { DATABASE_URL: 'sqlite::memory:', TRUST_PROXY: 'garbage' }, /TRUST_PROXY must be/],
    ['a boolean spelt otherwise', { DATABASE_URL: 'sqlite::memory:', SIGNUP_OPEN: 'maybe' }, /SIGNUP_OPEN must be true or false \(also 1\/0, yes\/no, on\/off\)/],
    ['an SMTP CA file that cannot be read', { DATABASE_URL: 'sqlite::memory:', SMTP_CA_FILE: '/nonexistent/ca.pem' }, /SMTP_CA_FILE=\/nonexistent\/ca\.pem cannot be read \(ENOENT\)/],
    ['MySQL out of reach', { DATABASE_URL: 'mysql://root@127.0.0.1:1/roster' }, /DATABASE_URL: cannot reach MySQL at 127\.0\.0\.1:1/],
    ['a MySQL URL without a database', { DATABASE_URL: 'mysql://root:secret@127.0.0.1:3306' }, /DATABASE_URL must name a database, .*\(got "mysql:\/\/root:\*\*\*@127\.0\.0\.1:3306"\)/],
    ['a URL of another database', { DATABASE_URL: 'postgres://x' }, /DATABASE_URL must be mysql:\/\/user:password@host:3306\/database, or sqlite: and a path/],
    ['a SQLite file under a file', { DATABASE_URL: 'sqlite:/etc/passwd/x.sqlite' }, /DATABASE_URL: cannot create the SQLite file \/etc\/passwd\/x\.sqlite \(ENOTDIR\)/],
    // Node's recursive mkdir never returns under /proc: this one hung without a word.
    ['a SQLite file under /proc', { DATABASE_URL: 'sqlite:/proc/nope/x.sqlite' }, /DATABASE_URL: cannot create the SQLite file \/proc\/nope\/x\.sqlite \(ENOENT/]
  ]
  const needingMysql: Array<[string, Record<string, string>, RegExp]> = [
    ['a user the server refuses', { DATABASE_URL: `${MYSQL_URL.replace('//root@', '//nobody:bad@')}/x` }, /DATABASE_URL: the server refused the user or password/],
    ['a database that does not exist', { DATABASE_URL: `${MYSQL_URL}/roster_no_such_database` }, /DATABASE_URL names a database that does not exist/]
  ]
  const cases = ENGINE === 'mysql' ? needingMysql : anywhere
  // Three at a time: all the starts at once on two cores took longer than a start may.
  const results: Array<{ code: number | null; out: string }> = []
  for (let i = 0; i < cases.length; i += 3) results.push(...await Promise.all(cases.slice(i, i + 3).map(([, env]) => run([entry], env))))
  for (const [i, [name, , message]] of cases.entries()) {
    const { code, out } = results[i]!
    t.equal(code, 1, `${name}: exit 1`)
    t.match(out, message, `${name}: says so`)
    t.notMatch(out, /^\s+at /m, `${name}: no stack trace (${out.trim().slice(0, 160)})`)
    t.equal(out.trim().split('\n').length, 1, `${name}: one line`)
  }
})

const seed = join(root, 'dist', 'scripts', 'seed.js')

t.test('npm run db:seed -- --help prints its usage', async (t) => {
  const [help, wrong] = await Promise.all([run([seed, '--help'], {}), run([seed, '--userz', '5'], {})])
  t.equal(help.code, 0)
  t.match(help.out, /--users N/)
  t.equal(wrong.code, 2, 'an unknown option: exit 2')
  t.match(wrong.out, /Unknown option '--userz'[\s\S]*--users N/, 'with the usage')
})
