import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { ENGINE, freshDatabase, tempDir } from '../helpers.js'
import { PROJECT_DIR as root } from '../../src/common/project.js'

// The built script: a process that compiles nothing first.
const script = join(root, 'dist', 'scripts', 'migrate.js')

/**
 * Runs `npm run db:migrate`'s script as a process in `cwd`: its exit code, or null when it was still running at the
 * deadline (a connection left open keeps it alive) and was killed.
 */
function migrate(cwd: string, env: Record<string, string | undefined>): Promise<{ code: number | null; out: string }> {
  if (!existsSync(script)) throw new Error(`${script} is missing: npm test builds it (or run npm run build)`)
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script], {
      cwd, env: { ...process.env, DATABASE_URL: undefined, ...env }, stdio: ['ignore', 'pipe', 'pipe']
    })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { out += d })
    // A migration here takes a few seconds.
    const timer = setTimeout(() => child.kill('SIGKILL'), 40_000)
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, out }) })
  })
}

t.test('npm run db:migrate applies the migrations and exits, on an empty database and on one up to date', async (t) => {
  const cwd = tempDir(t)
  let env: Record<string, string | undefined> = {}
  if (ENGINE === 'mysql') {
    const db = await freshDatabase()
    t.teardown(db.drop)
    env = { DATABASE_URL: db.url }
  }

  const first = await migrate(cwd, env)
  t.equal(first.code, 0, `exits on its own with 0 on an empty database: ${first.out}`)
  t.match(first.out, new RegExp(`^${ENGINE}: applied 0001_initial, `, 'm'))
  // Without DATABASE_URL the embedded file is made under the working directory.
  if (ENGINE === 'sqlite') t.ok(existsSync(join(cwd, 'data/roster.sqlite')), 'writes ./data/roster.sqlite')

  const again = await migrate(cwd, env)
  t.equal(again.code, 0, `exits on its own with 0 when up to date: ${again.out}`)
  t.match(again.out, new RegExp(`^${ENGINE}: already up to date$`, 'm'))
})
