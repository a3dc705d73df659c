/**
 * The operators' tool for moving users in and out of a running Roster over its HTTP API:
 *
 *   npm run roster -- import users.json --format auth0 --url http://127.0.0.1:3000 --token <admin token>
 *   npm run roster -- export --include-password-hash > users.ndjson
 *
 * Exit codes: 0 the import succeeded with no failed line (or the export ended), 1 some lines failed (the report says
 * which), 2 the import failed as a whole, the request was refused, or the service could not be reached.
 * A client of the API only: the service never imports this file.
 */
import { createReadStream, createWriteStream, statSync } from 'node:fs'
import { Readable, Transform, type Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { ReadableStream as WebReadableStream } from 'node:stream/web'
import { setTimeout as sleep } from 'node:timers/promises'
import { SingleBar } from 'cli-progress'
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander'
import { IMPORT_CONFLICTS, IMPORT_FORMATS, type Import, type ImportLineError } from '../schemas/import.js'

const EXIT = { ok: 0, linesFailed: 1, refused: 2 } as const

/** Why the tool stops with exit code 2: printed as it is. */
class Refused extends Error {}
/** The service did not answer at all: worth waiting out while an import runs, as it may be restarting. */
class Unreachable extends Refused {}

interface Problem { status?: number; title?: string; code?: string; detail?: string; errors?: Array<{ path?: string; message?: string }> }

async function problemOf(res: Response, what: string): Promise<Refused> {
  const text = await res.text().catch(() => '')
  let problem: Problem = {}
  try {
    problem = JSON.parse(text) as Problem
  } catch {
    // Not a problem document (a proxy's page, say): its first line says enough.
  }
  const reason = problem.detail ?? problem.title ?? (text.split('\n')[0]?.slice(0, 200) || res.statusText)
  const fields = (problem.errors ?? []).map((e) => `\n  ${e.path || '(body)'}: ${e.message ?? ''}`).join('')
  return new Refused(`${what} was refused: ${res.status}${problem.code ? ` ${problem.code}` : ''}: ${reason}${fields}`)
}

/** A network failure as one line: undici hides the reason (ECONNREFUSED, a reset) in `cause`. */
function unreachable(err: unknown, url: string): Unreachable {
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err
  const reason = cause instanceof Error ? ('code' in cause && typeof cause.code === 'string' ? cause.code : cause.message) : String(cause)
  return new Unreachable(`cannot reach ${url}: ${reason}`)
}

/** Requests to one service with one admin token; only paths are followed, so the token never leaves --url's host. */
class Client {
  private readonly base: string

  constructor(url: string, private token = '') {
    this.base = url.replace(/\/+$/, '')
  }

  async request(path: string, init: RequestInit & { duplex?: 'half' } = {}): Promise<Response> {
    const url = this.base + path
    try {
      return await fetch(url, { ...init, headers: { ...(this.token ? { authorization: `Bearer ${this.token}` } : {}), ...init.headers } })
    } catch (err) {
      throw unreachable(err, url)
    }
  }

  async json<T>(path: string, what: string): Promise<T> {
    const res = await this.request(path)
    if (!res.ok) throw await problemOf(res, what)
    return await res.json() as T
  }

  /** Signs in with an admin's address and password; the token is revoked again by `signOut`. */
  async signIn(email: string, password: string): Promise<void> {
    const res = await this.request('/auth/tokens', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) })
    if (res.status !== 201) throw await problemOf(res, 'signing in')
    this.token = (await res.json() as { token: string }).token
  }

  async signOut(): Promise<void> {
    await this.request('/auth/tokens/current', { method: 'DELETE' }).then((res) => res.body?.cancel(), () => undefined)
  }
}

interface Connection { url: string; token?: string; email?: string; password?: string }

/** A client signed in as the options say, given to `work`, and signed out after it if it signed in. */
async function withClient<T>(options: Connection, work: (client: Client) => Promise<T>): Promise<T> {
  if (!/^https?:\/\//.test(options.url)) throw new Refused(`--url must be an http(s) URL, not ${options.url}`)
  const client = new Client(options.url, options.token)
  if (options.token) return work(client)
  if (!options.email || !options.password) throw new Refused('an admin is needed: give --token (or ROSTER_TOKEN), or --email and --password')
  await client.signIn(options.email, options.password)
  try {
    return await work(client)
  } finally {
    await client.signOut()
  }
}

// Progress: a redrawn bar on a terminal, a plain line at most once a second otherwise (a CI log, a file).

const duration = (seconds: number): string => {
  const s = Math.max(0, Math.round(seconds))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`
  return `${Math.floor(s / 3600)}h ${String(Math.floor(s / 60) % 60).padStart(2, '0')}m`
}
const bytes = (n: number) => n >= 1e9 ? `${(n / 1e9).toFixed(2)} GB` : n >= 1e6 ? `${(n / 1e6).toFixed(1)} MB` : `${Math.ceil(n / 1e3)} kB`
const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`
/** Smaller files go up in a moment: no bar for their upload. */
const UPLOAD_BAR_BYTES = 1e6

/** How fast `done` grows, over the last few seconds rather than since the start: an import's pace changes. */
class Pace {
  private samples: Array<{ at: number; done: number }> = []

  constructor(private readonly windowMs = 5000) {}

  add(done: number, at = Date.now()): void {
    this.samples.push({ at, done })
    while (this.samples.length > 2 && at - this.samples[1]!.at > this.windowMs) this.samples.shift()
  }

  /** Per second; null until there are two samples apart. */
  get rate(): number | null {
    const first = this.samples[0]
    const last = this.samples[this.samples.length - 1]
    if (!first || !last || last.at === first.at) return null
    return Math.max(0, (last.done - first.done) * 1000 / (last.at - first.at))
  }
}

interface Reading { done: number; total: number; errors?: number }

/** One progress: a bar redrawn in place on a terminal, else a plain line at most once a second. */
class Meter {
  private readonly pace = new Pace()
  private readonly bar: SingleBar | null
  private started = false
  private printedAt = 0
  private printed = ''
  private last: Reading = { done: 0, total: 0 }

  constructor(private readonly phase: string, private readonly unit: 'lines' | 'bytes', private readonly out: NodeJS.WriteStream = process.stderr) {
    this.bar = out.isTTY ? new SingleBar({ stream: out, format: `${phase} [{bar}] {percentage}% | {info}`, hideCursor: true, barsize: 30, fps: 5 }) : null
  }

  update(reading: Reading): void {
    this.pace.add(reading.done)
    this.last = reading
    if (this.bar) {
      const info = { info: this.parts().join(' | ') }
      if (!this.started) this.bar.start(Math.max(reading.total, 1), reading.done, info)
      this.bar.setTotal(Math.max(reading.total, 1))
      this.bar.update(reading.done, info)
      this.started = true
    } else if (Date.now() - this.printedAt >= 1000) {
      this.print()
    }
  }

  /** The last reading drawn in full, and the terminal's line given back. */
  stop(): void {
    if (this.bar) {
      if (this.started) this.bar.stop()
    } else {
      this.print(true)
    }
  }

  /** A line unless (`unlessSame`, at the end) it counts what the last one counted. */
  private print(unlessSame = false): void {
    const [progress = '', ...rest] = this.parts()
    const { done, total } = this.last
    const counts = `${this.phase}: ${progress}${total > 0 ? ` (${Math.floor(done * 100 / total)}%)` : ''}`
    if (unlessSame && counts === this.printed) return
    this.printed = counts
    this.printedAt = Date.now()
    this.out.write([counts, ...rest].join(', ') + '\n')
  }

  /** What the reading says: the counts, then errors so far, the pace and the time left when they are known. */
  private parts(): string[] {
    const { done, total, errors } = this.last
    const rate = this.pace.rate
    return [
      this.unit === 'bytes' ? `${bytes(done)} of ${bytes(total)}` : `${done}/${total} lines`,
      errors === undefined ? '' : count(errors, 'error'),
      rate === null ? '' : this.unit === 'bytes' ? `${bytes(rate)}/s` : `${Math.round(rate)} lines/s`,
      rate && total > done ? `${duration((total - done) / rate)} left` : ''
    ].filter((part) => part !== '')
  }
}

// Import: the file streamed up, then the import followed until it ends, then its error report.

interface ImportOptions extends Connection {
  format: (typeof IMPORT_FORMATS)[number]
  dryRun?: boolean
  onConflict: (typeof IMPORT_CONFLICTS)[number]
  firebaseSignerKey?: string
  firebaseSaltSeparator?: string
  firebaseRounds?: number
  firebaseMemCost?: number
  interval: number
}

function importQuery(o: ImportOptions): string {
  const query = new URLSearchParams({ format: o.format, on_conflict: o.onConflict })
  if (o.dryRun) query.set('dry_run', 'true')
  const firebase = {
    firebase_signer_key: o.firebaseSignerKey, firebase_salt_separator: o.firebaseSaltSeparator,
    firebase_rounds: o.firebaseRounds, firebase_mem_cost: o.firebaseMemCost
  }
  for (const [name, value] of Object.entries(firebase)) if (value !== undefined) query.set(name, String(value))
  return query.toString()
}

/** Streams the file as the request's body, never whole in memory, counting the bytes sent for the upload's bar. */
async function upload(client: Client, file: string, options: ImportOptions): Promise<Import> {
  const fromStdin = file === '-'
  let size = 0
  if (!fromStdin) {
    try {
      size = statSync(file).size
    } catch (err) {
      throw new Refused(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`)
    }
  }
  const meter = new Meter('uploading', 'bytes')
  let sent = 0
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      sent += chunk.length
      if (size >= UPLOAD_BAR_BYTES) meter.update({ done: sent, total: size })
      done(null, chunk)
    }
  })
  const source = fromStdin ? process.stdin : createReadStream(file)
  source.on('error', (err: Error) => counted.destroy(err))
  source.pipe(counted)
  let res: Response
  try {
    res = await client.request(`/imports?${importQuery(options)}`, {
      method: 'POST',
      headers: { 'content-type': options.format === 'roster' ? 'application/x-ndjson' : 'application/json' },
      body: Readable.toWeb(counted) as ReadableStream<Uint8Array>,
      // A stream as a fetch body must say so: the request goes out while the file is still being read.
      duplex: 'half'
    })
  } finally {
    if (size >= UPLOAD_BAR_BYTES) meter.stop()
  }
  if (res.status !== 202) throw await problemOf(res, 'the import')
  return await res.json() as Import
}

/** GET /imports/{id} through a restart of the service or a proxy's hiccup: an import outlives its instance. */
async function poll(client: Client, id: number, patienceMs = 60_000): Promise<Import> {
  const since = Date.now()
  for (;;) {
    try {
      const res = await client.request(`/imports/${id}`)
      if (res.ok) return await res.json() as Import
      if (![502, 503, 504].includes(res.status)) throw await problemOf(res, `reading import ${id}`)
      await res.body?.cancel()
    } catch (err) {
      if (!(err instanceof Unreachable) || Date.now() - since > patienceMs) throw err
    }
    if (Date.now() - since > patienceMs) throw new Refused(`import ${id} could not be read for ${duration(patienceMs / 1000)}; it goes on on the server`)
    await sleep(1000)
  }
}

/** Every failed line, page after page: only the query of `next` is taken, on the import's own path. */
async function printErrors(client: Client, id: number, out: Writable): Promise<void> {
  let query = '?limit=200'
  for (;;) {
    const page = await client.json<{ items: ImportLineError[]; next: string | null }>(`/imports/${id}/errors${query}`, `reading the errors of import ${id}`)
    for (const e of page.items) {
      const who = [e.email, e.external_id].filter((v) => v !== null).join(', ')
      out.write(`line ${e.line}: ${e.code}${who ? ` (${who})` : ''}: ${e.detail}\n`)
    }
    if (!page.next) return
    query = new URL(page.next, 'http://next.invalid').search
  }
}

const ended = (i: Import) => i.status === 'succeeded' || i.status === 'failed'

/** Follows an import until it ends: the bar, then the counts and the error report on stdout; the exit code. */
async function follow(client: Client, first: Import, interval: number): Promise<number> {
  const meter = new Meter(`import ${first.id}`, 'lines')
  let current = first
  const interrupted = () => {
    meter.stop()
    process.stderr.write(`\nroster: stopped following; import ${first.id} goes on on the server (follow it again: roster follow ${first.id})\n`)
    process.exit(130)
  }
  process.once('SIGINT', interrupted)
  try {
    while (!ended(current)) {
      if (current.status === 'running' || current.lines > 0) meter.update({ done: current.processed, total: current.lines, errors: current.failed })
      await sleep(interval)
      current = await poll(client, current.id)
    }
    if (current.status === 'succeeded') meter.update({ done: current.processed, total: current.lines, errors: current.failed })
    meter.stop()
  } finally {
    process.removeListener('SIGINT', interrupted)
  }
  if (current.status === 'failed') throw new Refused(`import ${current.id} failed: ${current.detail ?? 'no reason given'}`)
  const out = process.stdout
  out.write(`import ${current.id} succeeded${current.dry_run ? ' (dry run: nothing was changed)' : ''}: ${count(current.lines, 'line')}, ` +
    `${current.created} created, ${current.updated} updated, ${current.skipped} skipped, ${current.failed} failed\n`)
  if (current.failed === 0) return EXIT.ok
  await printErrors(client, current.id, out)
  return EXIT.linesFailed
}

// Export: the response's body piped to stdout (or a file), so a slow disk slows the export instead of filling memory.

async function exportUsers(client: Client, options: { includePasswordHash?: boolean; output?: string }): Promise<number> {
  const res = await client.request(`/exports/users${options.includePasswordHash ? '?include=password_hash' : ''}`)
  if (!res.ok || !res.body) throw await problemOf(res, 'the export')
  let users = 0
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) users++
      done(null, chunk)
    }
  })
  const out = options.output ? createWriteStream(options.output) : process.stdout
  try {
    await pipeline(Readable.fromWeb(res.body as WebReadableStream<Uint8Array>), counted, out)
  } catch (err) {
    // A reader that has seen enough (`| head`) is not a failure.
    if ((err as NodeJS.ErrnoException).code === 'EPIPE') return EXIT.ok
    throw new Refused(`the export was cut short after ${users} users: ${err instanceof Error ? err.message : String(err)}`)
  }
  process.stderr.write(`exported ${count(users, 'user')}${options.output ? ` to ${options.output}` : ''}\n`)
  return EXIT.ok
}

// The command line.

const integer = (name: string, min: number, max: number) => (value: string): number => {
  const n = Number(value)
  if (!/^\d+$/.test(value) || n < min || n > max) throw new InvalidArgumentError(`${name} is a whole number from ${min} to ${max}`)
  return n
}

function withConnection(command: Command): Command {
  return command
    .addOption(new Option('--url <url>', 'the service').env('ROSTER_URL').default('http://127.0.0.1:3000'))
    .addOption(new Option('--token <token>', 'an admin\'s access token').env('ROSTER_TOKEN'))
    .addOption(new Option('--email <email>', 'sign in as this admin instead of a token').env('ROSTER_EMAIL'))
    .addOption(new Option('--password <password>', 'the admin\'s password (ROSTER_PASSWORD keeps it out of the process list)').env('ROSTER_PASSWORD'))
}

let exitCode: number = EXIT.ok

const program = new Command('roster')
  .description('Bring users into a Roster service from a file, and take them out again')
  .exitOverride()
  .showHelpAfterError('(roster help <command> says more)')

withConnection(program.command('import')
  .description('Upload a file of users and follow the import until it ends; print the lines that failed')
  .argument('<file>', 'the file (- for stdin)')
  .addOption(new Option('--format <format>', 'the file\'s format').choices(IMPORT_FORMATS).default('roster'))
  .option('--dry-run', 'check every line, change nothing')
  .addOption(new Option('--on-conflict <what>', 'a user already here: skip it or update it').choices(IMPORT_CONFLICTS).default('skip'))
  .option('--firebase-signer-key <base64>', 'Firebase: the project\'s base64_signer_key')
  .option('--firebase-salt-separator <base64>', 'Firebase: base64_salt_separator')
  .option('--firebase-rounds <n>', 'Firebase: rounds', integer('--firebase-rounds', 1, 64))
  .option('--firebase-mem-cost <n>', 'Firebase: mem_cost', integer('--firebase-mem-cost', 1, 20))
  .option('--interval <ms>', 'how often the import is read', integer('--interval', 10, 60_000), 500))
  .action(async (file: string, options: ImportOptions) => {
    exitCode = await withClient(options, async (client) => follow(client, await upload(client, file, options), options.interval))
  })

withConnection(program.command('follow')
  .description('Follow an import already started, as import does after its upload')
  .argument('<id>', 'the import\'s id', integer('<id>', 1, Number.MAX_SAFE_INTEGER))
  .option('--interval <ms>', 'how often the import is read', integer('--interval', 10, 60_000), 500))
  .action(async (id: number, options: Connection & { interval: number }) => {
    exitCode = await withClient(options, async (client) => follow(client, await poll(client, id, 0), options.interval))
  })

withConnection(program.command('export')
  .description('Write every user as NDJSON (the roster import format) to stdout')
  .option('--include-password-hash', 'each line carries its password hash, as an import reads it back')
  .option('-o, --output <file>', 'write to this file instead of stdout'))
  .action(async (options: Connection & { includePasswordHash?: boolean; output?: string }) => {
    exitCode = await withClient(options, async (client) => exportUsers(client, options))
  })

try {
  await program.parseAsync()
  process.exitCode = exitCode
} catch (err) {
  if (err instanceof CommanderError) {
    // Help and version end well; a mistake on the command line is refused like a request.
    process.exitCode = err.exitCode === 0 ? EXIT.ok : EXIT.refused
  } else {
    process.stderr.write(`roster: ${err instanceof Refused ? err.message : err instanceof Error ? err.stack ?? err.message : String(err)}\n`)
    process.exitCode = EXIT.refused
  }
}
