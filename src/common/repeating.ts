/**
 * A background job run again and again while the service runs (the purges of expired rows): each run starts
 * `everyMs` after the previous one ended, so two never overlap however long one takes, and a run that fails is
 * reported and tried again at the next turn. The timer never holds the process open; `stop()` cancels the next run
 * and settles once a run under way has ended, so that nothing touches the database after it closes.
 */
export class Repeating {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private stopped = false

  constructor(
    private readonly everyMs: number,
    private readonly job: () => Promise<unknown>,
    private readonly failed: (err: unknown) => void
  ) {}

  /** Schedules the first run, `everyMs` from now. */
  start(): void {
    this.stopped = false
    this.schedule()
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.running
  }

  private schedule(): void {
    this.timer = setTimeout(() => this.run(), this.everyMs)
    this.timer.unref()
  }

  private run(): void {
    // Called from the timer: a job that throws before it returns its promise is reported like one that rejects,
    // never an uncaught exception that would end the process.
    this.running = Promise.resolve().then(() => this.job())
      .then(() => undefined, (err: unknown) => this.failed(err))
      .finally(() => {
        this.running = undefined
        if (!this.stopped) this.schedule()
      })
  }
}
