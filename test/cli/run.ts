import { spawn } from 'node:child_process'
import { closeSync, existsSync, openSync } from 'node:fs'
import { join } from 'node:path'
import type { Test } from 'tap'
import type { App } from '../../src/app.js'
import { adminUser, build, sharedDatabase, type TestUser } from '../helpers.js'
import { PROJECT_DIR as ROOT } from '../../src/common/project.js'

// The built CLI: a process that compiles nothing first.
const CLI = join(ROOT, 'dist', 'scripts', 'roster.js')

export interface Run { code: number | null; stdout: string; stderr: string }

/**
 * The CLI as an operator runs it: a process of its own, against the app listening in this one (so it must not block
 * this event loop). `stdoutFile` takes its stdout as `> file` would.
 */
export async function roster(args: string[], options: { env?: Record<string, string>; stdoutFile?: string; npm?: boolean } = {}): Promise<Run> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: npm test builds it (or run npm run build)`)
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('ROSTER_')))
  const out = options.stdoutFile ? openSync(options.stdoutFile, 'w') : 'pipe'
  const [command, argv] = options.npm
    ? ['npm', ['run', '--silent', 'roster', '--', ...args]]
    : [process.execPath, [CLI, ...args]]
  const child = spawn(command, argv, { cwd: ROOT, env: { ...env, ...options.env }, stdio: ['ignore', out, 'pipe'] })
  if (typeof out === 'number') closeSync(out)
  let stdout = ''
  let stderr = ''
  child.stdout?.setEncoding('utf8').on('data', (s: string) => { stdout += s })
  child.stderr?.setEncoding('utf8').on('data', (s: string) => { stderr += s })
  const timer = setTimeout(() => child.kill('SIGKILL'), 90_000)
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  clearTimeout(timer)
  return { code, stdout, stderr }
}

/** An app on a database of its own that an export can read through a second connection, listening on a real port. */
export async function running(t: Test, env: Record<string, string> = {}): Promise<{ app: App; admin: TestUser; url: string }> {
  const app = await build(t, { imports: { pollMs: 20 }, url: await sharedDatabase(t), env })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  if (!address || typeof address === 'string') throw new Error('not listening')
  return { app, admin: await adminUser(app), url: `http://127.0.0.1:${address.port}` }
}

export const ndjson = (...lines: unknown[]) => lines.map((l) => typeof l === 'string' ? l : JSON.stringify(l)).join('\n') + '\n'

export async function userByEmail(app: App, admin: TestUser, email: string) {
  const res = await app.inject({ method: 'GET', url: `/users?email=${encodeURIComponent(email)}`, headers: admin.headers })
  return res.json<{ items: Array<{ id: number; name: string; status: string }> }>().items[0]
}

export const signIn = (app: App, email: string, password: string) =>
  app.inject({ method: 'POST', url: '/auth/tokens', payload: { email, password } })

