import { randomBytes } from 'node:crypto'
import type { Db } from '../database/index.js'
import { inTransaction } from '../database/transaction.js'
import type { DeliveryResult } from '../metrics/kinds.js'
import { claimDue, markFailed, markRetry, markSent, purgeFinished, releaseClaims, type OutboxRow } from './repository.js'
import { mailOf, render } from './templates.js'
import { DeliveryFailure, type MailTransport } from './transports.js'

export interface DelivererLog {
  info(details: object, message: string): void
  warn(details: object, message: string): void
  error(details: object, message: string): void
}

export interface DelivererOptions {
  /** How often the outbox is looked at when nothing woke the deliverer. */
  pollMs: number
  /** Mails taken per claim. */
  batch: number
  /** How long a claim holds a mail before another instance may take it (longer than any SMTP timeout). */
  leaseMs: number
  /** The first retry's delay; each further one doubles, up to retryMaxMs. */
  retryBaseMs: number
  retryMaxMs: number
  /** A mail still failing this long after it was written is given up. */
  giveUpAfterMs: number
  /** Sent and given-up mail is kept this long, then dropped. */
  keepFinishedMs: number
}

export const DELIVERY_DEFAULTS: DelivererOptions = {
  pollMs: 1000,
  batch: 20,
  leaseMs: 120_000,
  retryBaseMs: 1000,
  retryMaxMs: 300_000,
  giveUpAfterMs: 86_400_000,
  keepFinishedMs: 7 * 86_400_000
}

const PURGE_EVERY_MS = 3_600_000

/** The delay before retry number `attempts` (1, 2, …): doubling from `base`, at most `max`, with ±20% jitter. */
export function retryDelay(attempts: number, base: number, max: number, random = Math.random): number {
  const plain = Math.min(max, base * 2 ** Math.min(attempts - 1, 30))
  return Math.round(plain * (0.8 + 0.4 * random()))
}

/**
 * Delivers the outbox in the background, in this process, while the service runs. Each run claims due mails (one
 * instance per mail: see claimDue), renders them and hands them to the transport one by one. A temporary failure
 * (server away, 4xx) is retried with growing delays; a permanent one (5xx), or temporary failures past
 * giveUpAfterMs, is given up and logged as an error. A mail is marked sent only after the server accepted it: a
 * crash between the two sends it again once its lease ends (at least once, never lost).
 */
export class MailDeliverer {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private again = false
  private stopped = true
  private lastPurge = 0
  private readonly options: DelivererOptions

  constructor(
    private readonly db: Db, readonly transport: MailTransport, private readonly log: DelivererLog, options: Partial<DelivererOptions> = {},
    /** Told how each attempt ended (the metrics). */
    private readonly attempted: (result: DeliveryResult) => void = () => {}
  ) {
    this.options = { ...DELIVERY_DEFAULTS, ...options }
  }

  start(): void {
    this.stopped = false
    this.schedule(0)
  }

  /** New mail was committed: look at the outbox now rather than at the next poll. */
  wake(): void {
    if (this.stopped) return
    if (this.running) this.again = true
    else this.schedule(0)
  }

  /** Stops polling and waits for the run in progress; mail it did not reach stays in the outbox for the next start. */
  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.running
    this.transport.close()
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer)
    this.timer = setTimeout(() => this.run(), ms)
    this.timer.unref()
  }

  private run(): void {
    if (this.running || this.stopped) return
    this.again = false
    this.running = this.deliverDue()
      .catch((err: unknown) => this.log.warn({ err }, 'mail: the outbox could not be read; trying again'))
      .finally(() => {
        this.running = undefined
        if (!this.stopped) this.schedule(this.again ? 0 : this.options.pollMs)
      })
  }

  /** Delivers every mail due now; resolves when none is left. */
  async deliverDue(): Promise<void> {
    const now = Date.now()
    if (now - this.lastPurge > PURGE_EVERY_MS) {
      this.lastPurge = now
      await purgeFinished(this.db, now - this.options.keepFinishedMs)
    }
    for (;;) {
      const claim = randomBytes(12).toString('base64url')
      const started = Date.now()
      const rows = await inTransaction(this.db, (trx) => claimDue(trx, started, this.options.batch, claim, started + this.options.leaseMs))
      for (const [i, row] of rows.entries()) {
        if (this.stopped) {
          // Stopping: what this run claimed and did not reach is given back, not left leased for minutes.
          await releaseClaims(this.db, rows.slice(i).map((r) => r.id), claim, Date.now())
          return
        }
        await this.deliver(row, claim)
      }
      if (rows.length < this.options.batch || this.stopped) return
    }
  }

  private async deliver(row: OutboxRow, claim: string): Promise<void> {
    const attempts = row.attempts + 1
    const mail = mailOf(row.kind, row.recipient, row.data)
    const details = { mail: row.id, kind: row.kind, attempts }
    if (!mail) {
      // Written by a version that no longer knows it, or damaged: no delivery could ever succeed.
      await markFailed(this.db, row.id, claim, attempts, 'the outbox row is not a mail this version can render')
      this.attempted('failed')
      this.log.error(details, 'mail: given up: not a mail this version can render')
      return
    }
    try {
      await this.transport.send({ to: row.recipient, ...render(mail) })
    } catch (err) {
      const failure = err instanceof DeliveryFailure ? err : new DeliveryFailure(String((err as Error)?.message ?? err).slice(0, 500), false)
      const now = Date.now()
      if (failure.permanent || now - row.created_at >= this.options.giveUpAfterMs) {
        await markFailed(this.db, row.id, claim, attempts, failure.message)
        this.attempted('failed')
        this.log.error({ ...details, error: failure.message, permanent: failure.permanent }, 'mail: given up')
        return
      }
      const delay = retryDelay(attempts, this.options.retryBaseMs, this.options.retryMaxMs)
      await markRetry(this.db, row.id, claim, attempts, now + delay, failure.message)
      this.attempted('retried')
      this.log.warn({ ...details, error: failure.message, retryInMs: delay }, 'mail: not delivered; will retry')
      return
    }
    this.attempted('delivered')
    if (!(await markSent(this.db, row.id, claim, Date.now()))) {
      this.log.warn(details, 'mail: delivered after its lease ended; another instance may deliver it again')
    }
  }
}
