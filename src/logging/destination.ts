import { fstatSync } from 'node:fs'
import { Socket } from 'node:net'
import sonicBoom from 'sonic-boom'

/** Characters of log lines gathered before they are written out, at most a second late. */
const BATCH_CHARS = 4096
const FLUSH_MS = 1000
/** Characters of log lines kept while the sink does not read; beyond, lines are dropped and counted. */
const MAX_PENDING_CHARS = 1 << 20

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
 * says how many were lost.
 */
export function stdoutDestination(fd = 1): LogSink & { close(): void } {
  nonBlocking(fd)
  let exiting = false
  let dropped = 0
  const stream = new sonicBoom.SonicBoom({
    fd, sync: false, minLength: BATCH_CHARS, maxLength: MAX_PENDING_CHARS, periodicFlush: FLUSH_MS,
    // A full pipe is tried again shortly; when the process exits, what it does not take now is given up.
    retryEAGAIN: () => !exiting
  })
  // The sink is gone (EPIPE) or the exit's last write was refused: nothing more can be written, and nothing fails.
  stream.on('error', () => {})
  stream.on('drop', () => { dropped++ })
  const report = setInterval(() => {
    if (dropped === 0) return
    const line = `{"level":40,"time":${Date.now()},"msg":"log lines dropped: standard output was not being read","dropped":${dropped}}\n`
    dropped = 0
    stream.write(line)
  }, FLUSH_MS)
  report.unref()
  const flushNow = () => {
    try {
      stream.flushSync()
    } catch {
      // Not ready, or refused at exit: what is gathered is lost, the process is not held.
    }
  }
  const onExit = () => {
    exiting = true
    flushNow()
  }
  process.on('exit', onExit)
  return {
    write: (line: string) => stream.write(line),
    /** Writes what is gathered; later lines (a shutdown's last words) go out with the next flush or at exit. */
    close: flushNow
  }
}
