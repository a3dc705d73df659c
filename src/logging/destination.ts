import { fstatSync, writeSync } from 'node:fs'
import { Socket } from 'node:net'
import pino from 'pino'

/** Characters gathered before a write, and how often what is gathered goes out anyway (ms). */
const BATCH_CHARS = 4096
const FLUSH_MS = 1000
/** Characters kept while the sink does not read; beyond, lines are dropped and counted. */
const MAX_PENDING_CHARS = 1 << 20
/** How long a closing app (and the exit) waits for a full pipe that takes nothing. */
const CLOSE_PATIENCE_MS = 2000

/** Where log lines go: the logger's destination, or a test's stream. */
export interface LogSink {
  write(line: string): unknown
}

/**
 * A pipe or socket made non-blocking (libuv does so for a pipe it opens), so that a write to a full one fails at once
 * with EAGAIN instead of stopping the process. Files and terminals are left as they are.
 */
function nonBlocking(fd: number): void {
  const stat = fstatSync(fd)
  if (!stat.isFIFO() && !stat.isSocket()) return
  // Kept open for the life of the process (closing it would close standard output), never read from.
  new Socket({ fd, readable: false, writable: true }).unref()
}

const linesIn = (text: string) => text.split('\n').length - 1

/**
 * Standard output through pino's own destination, batched by its `minLength` and `periodicFlush`. Writes are
 * synchronous, so that none is in flight when the process exits, and `flushSync` at exit writes what is gathered.
 * A sink that stops reading (a stuck log shipper) never stops the service: a full pipe is tried again with later
 * lines, at most MAX_PENDING_CHARS wait, past that lines are dropped, and one line says how many once it reads
 * again. A closing app waits for a sink while it reads, and gives up on one that took nothing for
 * CLOSE_PATIENCE_MS; what was lost then is said on standard error.
 */
export function stdoutDestination(fd = 1): LogSink & { close(): void } {
  nonBlocking(fd)
  let closing = false
  /** Until a closing sink is given up on: after that, nothing waits for it again. */
  let patient = true
  let giveUpAt = 0
  /** Characters waiting at the sink's last refusal: fewer than that the next time means it reads. */
  let waiting = Infinity
  let dropped = 0
  const stream = pino.destination({
    dest: fd, sync: true, minLength: BATCH_CHARS, maxLength: MAX_PENDING_CHARS, periodicFlush: FLUSH_MS,
    retryEAGAIN: (_err: Error, writing: number, rest: number) => {
      if (!closing) return false
      if (patient && writing + rest < waiting) giveUpAt = Date.now() + CLOSE_PATIENCE_MS
      waiting = writing + rest
      return Date.now() < giveUpAt
    }
  })
  // A full pipe while running, or the sink gone: nothing fails, what waits stays.
  stream.on('error', () => {})
  // A report refused in its turn gives its count back, so that the next one still says how many were lost.
  let report: { line: string; count: number } | undefined
  stream.on('drop', (data: string) => { dropped += data === report?.line ? report.count : linesIn(data) })
  const reportDrops = () => {
    if (dropped === 0) return
    report = { line: `${JSON.stringify({ level: 40, time: Date.now(), msg: 'log lines dropped: standard output was not being read', dropped })}\n`, count: dropped }
    dropped = 0
    stream.write(report.line)
    report = undefined
  }
  // Once the sink takes a write again, it hears what it missed.
  stream.on('write', reportDrops)
  const flushNow = (exiting: boolean) => {
    closing = true
    waiting = Infinity
    let unwritten = 0
    try {
      reportDrops()
      stream.flushSync()
    } catch {
      // The sink took nothing for CLOSE_PATIENCE_MS: what is gathered is lost, the process is not held.
      patient = false
      unwritten = waiting
    }
    if (!exiting || (unwritten === 0 && dropped === 0)) return
    try {
      writeSync(2, `${JSON.stringify({ level: 40, time: Date.now(), msg: 'log lines lost at shutdown: standard output did not take them', dropped, unwrittenChars: unwritten })}\n`)
    } catch {
      // Standard error is gone too: there is nowhere left to say it.
    }
  }
  process.once('exit', () => flushNow(true))
  return { write: (line) => stream.write(line), close: () => flushNow(false) }
}
