import { fstatSync } from 'node:fs'
import { Socket } from 'node:net'
import sonicBoom from 'sonic-boom'

/** Characters of log lines gathered before they are written out, at most a second late. */
const BATCH_CHARS = 4096
const FLUSH_MS = 1000
/** Characters of log lines kept while the sink does not read; beyond, lines are dropped and counted. */
const MAX_PENDING_CHARS = 1 << 20
/** How long the app's close (and the process's exit) waits for a full pipe to take what is gathered. */
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

/**
 * Standard output as pino's own destination (sonic-boom) writes it: at `info` and above a busy service writes one
 * line per request, and a system call per line would cost one per request. Lines are gathered up to BATCH_CHARS
 * and written together, at least every FLUSH_MS, when the app closes and when the process exits (however it exits,
 * short of SIGKILL).
 *
 * A sink that stops reading (a stuck log shipper) never stops the service: the pipe is non-blocking, at most
 * MAX_PENDING_CHARS wait for it, and past that lines are dropped and counted; once the sink reads again, one line
 * says how many were lost. Once the app is closing, a full pipe is waited for CLOSE_PATIENCE_MS at most: a sink
 * that reads takes what is gathered, and a stuck one cannot hold a shutdown.
 */
export function stdoutDestination(fd = 1): LogSink & { close(): Promise<void> } {
  nonBlocking(fd)
  let giveUpAt = Infinity
  let dropped = 0
  const stream = new sonicBoom.SonicBoom({
    fd, sync: false, minLength: BATCH_CHARS, maxLength: MAX_PENDING_CHARS, periodicFlush: FLUSH_MS,
    // A full pipe is tried again shortly while the service runs; once it is closing, until its patience ends.
    retryEAGAIN: () => Date.now() < giveUpAt
  })
  // The sink is gone (EPIPE) or refused a write while closing: nothing more can be written, and nothing fails.
  stream.on('error', () => {})
  // A report refused in its turn gives its count back, so that the next one still says how many were lost.
  let report: { line: string; count: number } | undefined
  stream.on('drop', (data: unknown) => {
    if (report && data === report.line) dropped += report.count
    else dropped++
  })
  const reporter = setInterval(() => {
    if (dropped === 0) return
    report = { line: `{"level":40,"time":${Date.now()},"msg":"log lines dropped: standard output was not being read","dropped":${dropped}}\n`, count: dropped }
    dropped = 0
    stream.write(report.line)
    report = undefined
  }, FLUSH_MS)
  reporter.unref()
  const flushNow = () => {
    giveUpAt = Math.min(giveUpAt, Date.now() + CLOSE_PATIENCE_MS)
    try {
      stream.flushSync()
    } catch {
      // Still refused when the patience ended: what is gathered is lost, the process is not held.
    }
  }
  process.once('exit', flushNow)
  return {
    write: (line: string) => stream.write(line),
    /**
     * Writes what is gathered, a write in flight included, waiting for a full pipe CLOSE_PATIENCE_MS at most; later
     * lines (a shutdown's last words) go out at exit.
     */
    close: () => new Promise<void>((resolve) => {
      clearInterval(reporter)
      giveUpAt = Math.min(giveUpAt, Date.now() + CLOSE_PATIENCE_MS)
      let finished = false
      const finish = () => {
        if (finished) return
        finished = true
        clearTimeout(patience)
        flushNow()
        resolve()
      }
      const patience = setTimeout(finish, CLOSE_PATIENCE_MS)
      stream.flush(finish)
    })
  }
}
