import type { FastifyBaseLogger } from 'fastify'

/** How often, while the database is down, a count of the refused requests is logged; and how often it is probed. */
const REPORT_EVERY_MS = 10_000
const PROBE_EVERY_MS = 1000

/**
 * The log of a database outage: one line when it starts (with the first error), a count of the requests refused
 * every REPORT_EVERY_MS while it lasts, one line when the database answers again (a ping every PROBE_EVERY_MS while
 * it is down), instead of an error with a stack for every 503.
 */
export class OutageLog {
  private since = 0
  private refusedCount = 0
  private lastReport = 0
  private probe: NodeJS.Timeout | undefined

  constructor(private readonly log: FastifyBaseLogger, private readonly ping: () => Promise<void>) {}

  /** A request answered 503 because the database could not be reached. */
  refused(err: unknown): void {
    const now = Date.now()
    this.refusedCount++
    if (!this.since) {
      this.since = now
      this.lastReport = now
      this.log.error({ err }, 'database unavailable: answering 503 until it is back')
      this.probe = setInterval(() => void this.check(), PROBE_EVERY_MS)
      this.probe.unref()
    } else if (now - this.lastReport >= REPORT_EVERY_MS) {
      this.lastReport = now
      this.log.warn({ refused: this.refusedCount, downMs: now - this.since }, 'database still unavailable')
    }
  }

  private async check(): Promise<void> {
    try {
      await this.ping()
    } catch {
      return
    }
    if (!this.since) return
    this.log.warn({ refused: this.refusedCount, downMs: Date.now() - this.since }, 'database available again')
    this.close()
  }

  close(): void {
    clearInterval(this.probe)
    this.probe = undefined
    this.since = 0
    this.refusedCount = 0
  }
}
