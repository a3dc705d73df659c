import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import net from 'node:net'
import { join } from 'node:path'
import type { Test } from 'tap'
import { ADMIN, ENGINE, freePort, sharedDatabase } from '../helpers.js'
import { PROJECT_DIR } from '../../src/common/project.js'

export const root = PROJECT_DIR
export const entry = join(root, 'dist', 'src', 'server.js')

/**
 * The Node options `npm start` runs the service with, read from package.json so that the black-box leg runs the
 * built service exactly as production does.
 */
export function startArgs(): string[] {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }
  const words = pkg.scripts.start.split(/\s+/)
  if (words[0] !== 'node' || words[words.length - 1] !== 'dist/src/server.js') throw new Error(`unexpected start script: ${pkg.scripts.start}`)
  return words.slice(1, -1)
}

/** What the process uses now: open file descriptors and resident memory (KiB), from /proc. */
export interface Usage {
  fds: number
  rssKb: number
}

export interface RunningService {
  child: ChildProcess
  pid: number
  port: number
  base: string
  /** Where its Prometheus metrics are (METRICS_PORT, a free port of its own unless the test set one). */
  metricsUrl: string
  /** The database the service was started on. */
  databaseUrl: string
  /** Every line the service wrote to stdout and stderr so far. */
  lines: string[]
  /** Settles with the exit code (or signal) once the process has ended. */
  exited: Promise<number | string | null>
  usage(): Usage
  /** Whether the process is still running (it has not exited). */
  running(): boolean
  /** The statuses /health/ready answered while the service was starting (refused connections not counted). */
  startup: number[]
}

/**
 * The built service (`dist/`, made by `npm test` before the legs run) started as `npm start` starts it, on a real
 * port, a fresh database of the leg's engine and the test's own settings; stopped with SIGTERM when the test ends.
 * `output.onLine` is told each line it writes, as it comes. With `output.stdoutFd`, its standard output goes to that
 * open file instead, and only standard error's lines are gathered.
 */
export async function startBuilt(
  t: Pick<Test, 'teardown'>, env: Record<string, string> = {}, nodeArgs: string[] = [],
  output: { onLine?: (line: string) => void; stdoutFd?: number } = {}
): Promise<RunningService> {
  const { onLine = () => {}, stdoutFd } = output
  if (!existsSync(entry)) throw new Error(`${entry} is missing: npm test builds it (or run npm run build)`)
  const port = await freePort()
  const metricsPort = env.METRICS_PORT ?? String(await freePort())
  const url = env.DATABASE_URL ?? await sharedDatabase(t)
  const child = spawn(process.execPath, [...nodeArgs, ...startArgs(), entry], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '', PORT: String(port), HOST: '127.0.0.1', DATABASE_URL: url,
      ADMIN_EMAIL: ADMIN.email, ADMIN_PASSWORD: ADMIN.password, LOG_LEVEL: 'warn',
      // A host running both legs side by side can take seconds to answer a connection at start; the deadline's own
      // behaviour is held by test/http/faults.test.ts.
      DB_TIMEOUT_MS: '10000',
      // Load shedding off: on such a host the process can wait a second for a core, and the next 250 ms of requests
      // would be answered 503, whatever the test is about. Shedding is tested by itself (overload.test.ts), and the
      // soak runs with the production default.
      MAX_EVENT_LOOP_DELAY_MS: '0',
      METRICS_PORT: metricsPort, ...env
    },
    stdio: ['ignore', stdoutFd ?? 'pipe', 'pipe']
  })
  const lines: string[] = []
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue
    let pending = ''
    stream.on('data', (chunk: Buffer) => {
      const parts = (pending + chunk.toString()).split('\n')
      pending = parts.pop() ?? ''
      lines.push(...parts)
      for (const line of parts) onLine(line)
    })
  }
  let ended = false
  const exited = new Promise<number | string | null>((resolve) => child.on('exit', (code, signal) => {
    ended = true
    resolve(code ?? signal)
  }))
  const base = `http://127.0.0.1:${port}`
  let up = false
  const startup: number[] = []
  for (let i = 0; i < 600 && !up && !ended; i++) {
    try {
      const status = (await fetch(`${base}/health/ready`)).status
      startup.push(status)
      up = status === 200
    } catch { /* not listening yet */ }
    if (!up) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  if (!up) {
    child.kill('SIGKILL')
    throw new Error(`the service did not start:\n${lines.slice(-20).join('\n')}`)
  }
  t.teardown(async () => {
    if (ended) return
    child.kill('SIGTERM')
    await exited
  })
  const pid = child.pid!
  return {
    child, pid, port, base, lines, exited, startup, databaseUrl: url, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    running: () => !ended,
    usage: () => ({
      fds: readdirSync(`/proc/${pid}/fd`).length,
      rssKb: Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN)
    })
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * After a group of abuse: the same process (same pid, never exited) still answers, and within `settleMs` (past the
 * server's 10 s keep-alive timeout, so that clients' idle pooled connections are gone too) its open descriptors come
 * back to the baseline (plus `fdSlack`, for the database pool's own connections) and
 * its resident memory stays within `rssSlackKb` of it.
 */
export async function assertRecovered(
  t: Test, service: RunningService, baseline: Usage, what: string,
  bounds: { fdSlack?: number; rssSlackKb?: number; settleMs?: number } = {}
): Promise<void> {
  // On MySQL the pool opens up to DB_POOL_SIZE (10) connections as concurrency asks for them, and keeps them.
  const fdSlack = bounds.fdSlack ?? (ENGINE === 'mysql' ? 14 : 4)
  const rssSlackKb = bounds.rssSlackKb ?? 48 * 1024
  const until = Date.now() + (bounds.settleMs ?? 12_000)
  t.ok(service.running(), `${what}: the process ${service.pid} is still running`)
  let live = 0
  try { live = (await fetch(`${service.base}/health/live`)).status } catch { /* refused */ }
  t.equal(live, 200, `${what}: the same process answers`)
  let usage = service.usage()
  while (usage.fds > baseline.fds + fdSlack && Date.now() < until) {
    await sleep(100)
    usage = service.usage()
  }
  t.ok(usage.fds <= baseline.fds + fdSlack, `${what}: open descriptors back to ${usage.fds} (baseline ${baseline.fds})`)
  t.ok(usage.rssKb <= baseline.rssKb + rssSlackKb, `${what}: resident memory ${Math.round(usage.rssKb / 1024)} MiB (baseline ${Math.round(baseline.rssKb / 1024)} MiB)`)
}

/**
 * One exchange over a raw socket: everything the server sent until it closed, `waitMs` passed, or `until` says it
 * has come. With `allowHalfOpen` the client's side stays open for writing after the server has ended its own (Node
 * ends it at once otherwise), as a client still uploading does.
 */
export function rawExchange(
  port: number, send: (socket: net.Socket) => void, waitMs = 5_000,
  options: { until?: (answer: string) => boolean; allowHalfOpen?: boolean } = {}
): Promise<{ answer: string; closed: boolean; error?: string }> {
  return new Promise((resolve) => {
    let answer = ''
    let error: string | undefined
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: options.allowHalfOpen ?? false }, () => send(socket))
    const timer = setTimeout(() => {
      socket.destroy()
      resolve({ answer, closed: false, error })
    }, waitMs)
    socket.on('data', (d) => {
      answer += d.toString('latin1')
      if (options.until?.(answer)) {
        clearTimeout(timer)
        socket.destroy()
        resolve({ answer, closed: false, error })
      }
    })
    socket.on('error', (err) => { error = (err as NodeJS.ErrnoException).code ?? err.message })
    socket.on('close', () => {
      clearTimeout(timer)
      resolve({ answer, closed: true, error })
    })
  })
}

/** Whether a raw answer holds one whole response: its head and as many bytes of body as it declares. */
export function wholeAnswer(answer: string): boolean {
  const end = answer.indexOf('\r\n\r\n')
  if (end < 0) return false
  const length = /\r\ncontent-length: *(\d+)/i.exec(answer.slice(0, end))
  return length !== null && answer.length - end - 4 >= Number(length[1])
}

/** The status line's code of a raw answer (0 when none came). */
export const statusOf = (answer: string): number => Number(/^HTTP\/1\.[01] (\d{3}) /.exec(answer)?.[1] ?? 0)

/** A request to a running service, its JSON answer parsed. */
export async function call(service: RunningService, method: string, path: string, options: { headers?: Record<string, string>; body?: unknown } = {}) {
  const res = await fetch(`${service.base}${path}`, {
    method,
    headers: { ...(options.body === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers },
    body: options.body === undefined ? undefined : JSON.stringify(options.body)
  })
  const text = await res.text()
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) as Record<string, unknown> : {} }
}

/** A new user signed up and logged in through a running service. */
export async function signUp(service: RunningService, email: string, headers: Record<string, string> = {}) {
  const created = await call(service, 'POST', '/users', { headers, body: { name: 'Probe', email, password: 'password-123' } })
  if (created.status !== 201) throw new Error(`sign-up: ${created.status} ${JSON.stringify(created.body)}`)
  const login = await call(service, 'POST', '/auth/tokens', { headers, body: { email, password: 'password-123' } })
  return { id: created.body.id as number, auth: { authorization: `Bearer ${String(login.body.token)}` } }
}
