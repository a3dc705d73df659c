import { fstatSync, writeSync } from 'node:fs'
import { Socket } from 'node:net'

/** Bytes of log lines kept while the sink does not read; beyond, lines are dropped and counted. */
const MAX_PENDING_BYTES = 1 << 20
/** How soon a sink that was full is tried again. */
const RETRY_MS = 50

/**
 * Puts a pipe or socket into non-blocking mode (libuv does so for a pipe it opens), so that a write to a full pipe
 * fails at once with EAGAIN instead of blocking the process. Files and terminals are left as they are: they do not
 * fill up. The handle is kept by the caller and never read from.
 */
function nonBlocking(fd: number): Socket | undefined {
  const stat = fstatSync(fd)
  if (!stat.isFIFO() && !stat.isSocket()) return undefined
  const handle = new Socket({ fd, readable: false, writable: true })
  handle.unref()
  return handle
}

/**
 * A pino destination that gathers log lines and writes them to standard output in batches of about `batchChars`
 * characters, one system call per batch, and at least every `flushMs`. Writes are synchronous, so what is written is
 * out of the process at once (a crash right after loses nothing), and what is gathered is written when the process
 * exits, however it exits (short of SIGKILL).
 *
 * A sink that stops reading (a stuck log shipper) never stops the service: the pipe is non-blocking, a batch it
 * cannot take waits (at most MAX_PENDING_BYTES, tried again every RETRY_MS), and past that lines are dropped and
 * counted; once the sink reads again, one line says how many were lost.
 */
export class LogBatch {
  private lines: string[] = []
  private size = 0
  private closed = false
  private ended = false
  private readonly pending: Buffer[] = []
  private pendingBytes = 0
  private dropped = 0
  private retry: NodeJS.Timeout | undefined
  /** The non-blocking handle on the sink, kept as long as the batch (closing it would close standard output). */
  readonly handle: Socket | undefined
  private readonly timer: NodeJS.Timeout
  private readonly onExit = () => this.flushSync()

  constructor(private readonly batchChars: number, flushMs: number, private readonly fd = 1) {
    this.handle = nonBlocking(fd)
    // 'exit' comes however the process ends (process.exit, an uncaught exception, a signal handler's exit).
    process.on('beforeExit', this.onExit)
    process.on('exit', this.onExit)
    this.timer = setInterval(() => this.flush(), flushMs)
    this.timer.unref()
  }

  write(line: string): void {
    this.lines.push(line)
    this.size += line.length
    // Once closed, lines are written one by one, at once.
    if (this.closed || this.size >= this.batchChars) this.flush()
  }

  /** Writes what is gathered (or queues it while the sink is full). */
  flush(): void {
    if (this.lines.length === 0) return
    const batch = Buffer.from(this.lines.length === 1 ? this.lines[0]! : this.lines.join(''))
    const count = this.lines.length
    this.lines = []
    this.size = 0
    if (this.ended) return
    if (this.pendingBytes + batch.length > MAX_PENDING_BYTES) {
      this.dropped += count
      return
    }
    this.pending.push(batch)
    this.pendingBytes += batch.length
    this.drain()
  }

  /** Writes queued batches until the sink is full; then tries again shortly. */
  private drain(): void {
    while (this.pending.length > 0) {
      const head = this.pending[0]!
      let written: number
      try {
        written = writeSync(this.fd, head)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN') {
          this.retry ??= setTimeout(() => { this.retry = undefined; this.drain() }, RETRY_MS).unref()
          return
        }
        // The sink is gone (EPIPE): nothing more can be written.
        this.ended = true
        this.pending.length = 0
        this.pendingBytes = 0
        return
      }
      this.pendingBytes -= written
      if (written < head.length) this.pending[0] = head.subarray(written)
      else this.pending.shift()
    }
    if (this.dropped > 0) {
      const report = `{"level":40,"time":${Date.now()},"msg":"log lines dropped: standard output was not being read","dropped":${this.dropped}}\n`
      this.dropped = 0
      this.pending.push(Buffer.from(report))
      this.pendingBytes += report.length
      this.drain()
    }
  }

  /** Writes what is gathered and queued, as far as the sink takes it now: never waits for it. */
  flushSync(): void {
    this.flush()
    this.drain()
  }

  close(): void {
    clearInterval(this.timer)
    clearTimeout(this.retry)
    this.flushSync()
    this.closed = true
    process.off('beforeExit', this.onExit)
    process.off('exit', this.onExit)
  }
}
