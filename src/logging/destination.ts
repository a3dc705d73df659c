import { fstatSync, writeSync } from 'node:fs'
import { Socket } from 'node:net'
import sonicBoom from 'sonic-boom'

/** Characters of log lines gathered before they are written out, at most a second late. */
const BATCH_CHARS = 4096
const FLUSH_MS = 1000
/** Characters of log lines kept while the sink does not read; beyond, lines are dropped and counted. */
const MAX_PENDING_CHARS = 1 << 20
/** How long the app's close (and the process's exit) waits for a full pipe that takes nothing. */
const CLOSE_PATIENCE_MS = 2000

/** Where log lines go: the logger's destination, or a test's stream. */
export interface LogSink {
  write(line: string): unknown
}

/**
 * Puts a pipe or socket into non-blocking mode (libuv does so for a pipe it opens), so that a write to a full pipe
 * fails at once with EAGAIN instead of blocking. Files and terminals are left as they are: they do not fill up.
 */
function nonBlocking(fd: number): void {
  const stat = fstatSync(fd)
  if (!stat.isFIFO() && !stat.isSocket()) return
  // Kept open for the life of the process (closing it would close standard output), never read from.
  new Socket({ fd, readable: false, writable: true }).unref()
}

/** How many lines a batch of them holds. */
function linesIn(text: string): number {
  let count = 0
  for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', at + 1)) count++
  return count
}

/**
 * Standard output as pino's own destination (sonic-boom) writes it: at `info` and above a busy service writes one
 * line per request, and a system call per line would cost one per request. Lines are gathered up to BATCH_CHARS
 * and written together, at least every FLUSH_MS, when the app closes and when the process exits (however it exits,
 * short of SIGKILL). Writes are synchronous, as pino's are by default, so that none is ever in flight when the
 * process exits; on a pipe they never block (see nonBlocking).
 *
 * Lines are gathered in an array, joined once a batch is full, and handed to sonic-boom as one write. Gathered by
 * sonic-boom itself (its `minLength`), each line measured the byte length of the whole batch so far again: on the
 * embedded self-read at `info` that took 4 % of the throughput (bench `embedded`, 2026-11-25: 8 µs for the access
 * line against 11–12 µs).
 *
 * A sink that stops reading (a stuck log shipper) never stops the service: a full pipe refuses at once, at most
 * MAX_PENDING_CHARS wait for it, tried again with the next line and every FLUSH_MS, and past that lines are dropped
 * and counted; once the sink reads again, one line says how many were lost. Once the app is closing, a sink that
 * still takes lines is waited for, however slowly it reads (what waits is bounded by MAX_PENDING_CHARS); one that
 * took nothing for CLOSE_PATIENCE_MS is given up on, so a stuck sink cannot hold a shutdown. What could not be
 * written or reported then is said once on standard error.
 */
export function stdoutDestination(fd = 1): LogSink & { close(): void } {
  nonBlocking(fd)
  let closing = false
  /** Until a closing sink is given up on: after that, nothing waits for it again. */
  let patient = true
  let giveUpAt = 0
  /** Characters waiting for the sink at its last refusal: fewer than the time before means it reads. */
  let waiting = Infinity
  let dropped = 0
  const stream = new sonicBoom.SonicBoom({
    // A batch is written as it comes (minLength 1, not 0: at 0 sonic-boom's flush does nothing, and the timer below
    // relies on it to try a refused batch again).
    fd, sync: true, minLength: 1, maxLength: MAX_PENDING_CHARS,
    // While the service runs, a full pipe is tried again later, never waited for; once it closes, while the sink reads.
    retryEAGAIN: (_error: Error, writing: number, rest: number) => {
      if (!closing) return false
      if (patient && writing + rest < waiting) giveUpAt = Date.now() + CLOSE_PATIENCE_MS
      waiting = writing + rest
      return Date.now() < giveUpAt
    }
  })
  // A full pipe while running, the sink gone (EPIPE), or a refusal while closing: nothing fails, what waits stays.
  stream.on('error', () => {})
  // A report refused in its turn gives its count back, so that the next one still says how many were lost.
  let report: { line: string; count: number } | undefined
  stream.on('drop', (data: unknown) => {
    if (report && data === report.line) dropped += report.count
    else dropped += typeof data === 'string' ? linesIn(data) : 1
  })
  let gathered: string[] = []
  let gatheredChars = 0
  const writeGathered = () => {
    if (gathered.length === 0) return
    const batch = gathered.join('')
    gathered = []
    gatheredChars = 0
    stream.write(batch)
  }
  const reportDrops = () => {
    if (dropped === 0) return
    report = { line: `{"level":40,"time":${Date.now()},"msg":"log lines dropped: standard output was not being read","dropped":${dropped}}\n`, count: dropped }
    dropped = 0
    stream.write(report.line)
    report = undefined
  }
  // The one timer: every FLUSH_MS, what is gathered goes out, what a full pipe refused is tried again, and what was
  // dropped is reported. Stopped when the app closes; later lines go out as they come.
  const reporter = setInterval(() => {
    writeGathered()
    stream.flush()
    reportDrops()
  }, FLUSH_MS)
  reporter.unref()
  /**
   * Reports what was dropped and writes what is gathered, when the app closes; again at exit, for later lines (a
   * shutdown's last words), then saying on standard error what was lost.
   */
  const flushNow = (exiting: boolean) => {
    writeGathered()
    if (!closing) {
      closing = true
      clearInterval(reporter)
      reportDrops()
    }
    waiting = Infinity
    let unwritten = 0
    try {
      stream.flushSync()
    } catch {
      // Refused for CLOSE_PATIENCE_MS on end: what is gathered is lost, the process is not held.
      patient = false
      unwritten = waiting
    }
    if (!exiting || (unwritten === 0 && dropped === 0)) return
    try {
      writeSync(2, `{"level":40,"time":${Date.now()},"msg":"log lines lost at shutdown: standard output did not take them",` +
        `"dropped":${dropped},"unwrittenChars":${unwritten}}\n`)
    } catch {
      // Standard error is gone too: there is nowhere left to say it.
    }
    dropped = 0
  }
  process.once('exit', () => flushNow(true))
  return {
    write: (line: string) => {
      gathered.push(line)
      gatheredChars += line.length
      // Once the app is closing (the gathering timer is stopped), a line goes out as it comes.
      if (closing || gatheredChars >= BATCH_CHARS) writeGathered()
    },
    close: () => flushNow(false)
  }
}
