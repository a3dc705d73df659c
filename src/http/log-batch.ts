import pino from 'pino'

type Destination = ReturnType<typeof pino.destination>

/**
 * A pino destination that gathers log lines and writes them to standard output in batches of about `batchChars`
 * characters, one system call per batch, and at least every `flushMs`. The write is synchronous, like pino's
 * default destination: a batch handed to an asynchronous write could still be in flight when the process dies,
 * and be lost. Standard output's own buffer (sonic-boom) measures the bytes of everything it holds at each write,
 * so feeding it line by line would cost more with every line held; a batch costs that once. What is gathered is
 * also written when the process exits, however it exits (short of SIGKILL).
 */
export class LogBatch {
  private lines: string[] = []
  private size = 0
  private closed = false
  private ended = false
  private readonly out: Destination
  private readonly timer: NodeJS.Timeout
  private readonly onExit = () => this.flushSync()

  constructor(private readonly batchChars: number, flushMs: number) {
    // 'exit' comes however the process ends (process.exit, an uncaught exception, a signal handler's exit).
    process.on('beforeExit', this.onExit)
    process.on('exit', this.onExit)
    this.out = pino.destination({ dest: 1, sync: true })
    this.out.on('close', () => { this.ended = true })
    this.timer = setInterval(() => this.flush(), flushMs)
    this.timer.unref()
  }

  write(line: string): void {
    // Once closed, lines are written one by one, at once.
    if (this.closed) return void this.out.write(line)
    this.lines.push(line)
    this.size += line.length
    if (this.size >= this.batchChars) this.flush()
  }

  /** Writes what is gathered. */
  flush(): void {
    if (this.lines.length === 0) return
    const batch = this.lines.length === 1 ? this.lines[0]! : this.lines.join('')
    this.lines = []
    this.size = 0
    this.out.write(batch)
  }

  /** Writes what is gathered, and whatever standard output still holds (a write it had to retry). */
  flushSync(): void {
    if (this.ended) return
    this.flush()
    this.out.flushSync()
  }

  close(): void {
    clearInterval(this.timer)
    this.flushSync()
    this.closed = true
    process.off('beforeExit', this.onExit)
    process.off('exit', this.onExit)
  }
}
