import type { OutboxKind } from '../../db/types.js'
import type { Db } from '../database/index.js'
import type { DeliveryResult } from '../metrics/kinds.js'
import { DeliveryFailure, type Kind, type Lane } from './kind.js'
import { markFailed, markRetry, markSent, purgeFinished, releaseClaims, type OutboxRow } from './repository.js'

export interface DelivererLog {
  info(details: object, message: string): void
  warn(details: object, message: string): void
  error(details: object, message: string): void
}

export interface DelivererOptions {
  /** How often the outbox is looked at when nothing woke the deliverer. */
  pollMs: number
  /** Lanes of one kind in flight at once (mails being sent, webhooks being posted to). */
  lanes: number
  /** Sent and given-up messages are kept this long, then dropped. */
  keepFinishedMs: number
}

export const DELIVERY_DEFAULTS: DelivererOptions = { pollMs: 1000, lanes: 8, keepFinishedMs: 7 * 86_400_000 }

const PURGE_EVERY_MS = 3_600_000

/** The delay before retry number `attempts` (1, 2, …): doubling from `base`, at most `max`, with ±20% jitter. */
export function retryDelay(attempts: number, base: number, max: number, random = Math.random): number {
  const plain = Math.min(max, base * 2 ** Math.min(attempts - 1, 30))
  return Math.round(plain * (0.8 + 0.4 * random()))
}

/**
 * Delivers the outbox in the background, in this process, while the service runs: every kind (mail, webhook
 * deliveries) through the same claim, lease, retry and purge machinery. Each kind's due messages are claimed into
 * lanes (one instance per message: see the kinds' `claim`); up to `lanes` lanes of a kind are in flight at once, and
 * a new claim is made as soon as one finishes, so a slow receiver holds up only its own lane. A temporary failure
 * is retried with growing, jittered delays; a permanent one, or temporary failures past the kind's give-up age, is
 * given up and logged as an error. A message is marked sent only after the receiver accepted it: a crash between
 * the two sends it again once its lease ends (at least once, never lost).
 */
export class Deliverer {
  private stopped = true
  private lastPurge = 0
  private readonly kinds: Kind[] = []
  /** Each kind's own loop, so that one kind's backlog never holds back another's claims. */
  private readonly loops = new Map<Kind, { timer?: NodeJS.Timeout; running?: Promise<void>; again: boolean }>()
  private readonly options: DelivererOptions
  /** The drains waiting for a lane to finish, told when new messages are due instead. */
  private readonly waiting = new Set<() => void>()

  constructor(
    private readonly db: Db, private readonly log: DelivererLog, options: Partial<DelivererOptions> = {},
    /** Told how each attempt ended (the metrics). */
    private readonly attempted: (kind: OutboxKind, result: DeliveryResult) => void = () => {}
  ) {
    this.options = { ...DELIVERY_DEFAULTS, ...options }
  }

  /** A kind of message this deliverer sends. */
  add<C>(kind: Kind<C>): void {
    this.kinds.push(kind)
    this.loops.set(kind, { again: false })
  }

  start(): void {
    this.stopped = false
    for (const kind of this.kinds) this.schedule(kind, 0)
  }

  /** New messages were committed: look at the outbox now rather than at the next poll. */
  wake(): void {
    if (this.stopped) return
    this.nudge()
    for (const [kind, loop] of this.loops) {
      if (loop.running) loop.again = true
      else this.schedule(kind, 0)
    }
  }

  /** Stops claiming and waits for the lanes in flight; what they did not reach stays in the outbox for the next start. */
  async stop(): Promise<void> {
    this.stopped = true
    for (const loop of this.loops.values()) clearTimeout(loop.timer)
    this.nudge()
    await Promise.all([...this.loops.values()].map((loop) => loop.running ?? Promise.resolve()))
    for (const kind of this.kinds) kind.close()
  }

  private nudge(): void {
    for (const resume of this.waiting) resume()
    this.waiting.clear()
  }

  private schedule(kind: Kind, ms: number): void {
    const loop = this.loops.get(kind)!
    clearTimeout(loop.timer)
    loop.timer = setTimeout(() => this.run(kind), ms)
    loop.timer.unref()
  }

  private run(kind: Kind): void {
    const loop = this.loops.get(kind)!
    if (loop.running || this.stopped) return
    loop.again = false
    loop.running = this.purgeIfDue().then(() => this.drain(kind))
      .catch((err: unknown) => this.log.warn({ err, kind: kind.name }, 'outbox: could not be read; trying again'))
      .finally(() => {
        loop.running = undefined
        if (!this.stopped) this.schedule(kind, loop.again ? 0 : this.options.pollMs)
      })
  }

  /** Drops what was delivered or given up long enough ago, once an hour. */
  private async purgeIfDue(): Promise<void> {
    const now = Date.now()
    if (now - this.lastPurge <= PURGE_EVERY_MS) return
    this.lastPurge = now
    await purgeFinished(this.db, now - this.options.keepFinishedMs)
  }

  /** Delivers every message due now, of every kind side by side; resolves when none is left and none is in flight. */
  async deliverDue(): Promise<void> {
    await this.purgeIfDue()
    await Promise.all(this.kinds.map((kind) => this.drain(kind)))
  }

  /** Keeps up to `lanes` lanes of a kind in flight, claiming again whenever one finishes or new messages are due. */
  private async drain(kind: Kind): Promise<void> {
    const inFlight = new Set<Promise<void>>()
    for (;;) {
      const room = this.options.lanes - inFlight.size
      let lanes: Lane[] = []
      try {
        if (room > 0 && !this.stopped) lanes = await kind.claim(this.db, Date.now(), room)
      } catch (err) {
        // The lanes in flight finish before the loop is run again: never more than `lanes` of a kind at once.
        await Promise.allSettled(inFlight)
        throw err
      }
      for (const lane of lanes) {
        const running: Promise<void> = this.runLane(kind, lane).finally(() => inFlight.delete(running))
        inFlight.add(running)
      }
      if (inFlight.size === 0) return
      if (lanes.length === 0 || inFlight.size >= this.options.lanes) {
        // Wait for a lane to finish, for new messages (a wake), or for retries coming due (a poll).
        let resume: () => void = () => {}
        const woken = new Promise<void>((resolve) => { resume = resolve })
        this.waiting.add(resume)
        const timer = setTimeout(resume, this.options.pollMs)
        await Promise.race([...inFlight, woken])
        clearTimeout(timer)
        this.waiting.delete(resume)
      }
    }
  }

  private async runLane(kind: Kind, lane: Lane): Promise<void> {
    try {
      for (const [i, row] of lane.rows.entries()) {
        if (this.stopped || (kind.proceed && !(await kind.proceed(lane)))) {
          // Stopping, or the lane's receiver withdrawn: what it claimed and did not reach is given back, not left
          // leased for minutes.
          await releaseClaims(this.db, lane.rows.slice(i).map((r) => r.id), lane.claim, Date.now())
          return
        }
        await this.deliver(kind, lane, row)
      }
    } catch (err) {
      this.log.warn({ err, kind: kind.name }, 'outbox: a delivery could not be recorded; it is sent again once its lease ends')
    } finally {
      await lane.finish?.().catch((err: unknown) => this.log.warn({ err, kind: kind.name }, 'outbox: a lease could not be given back; it ends by itself'))
    }
  }

  private async deliver(kind: Kind, lane: Lane, row: OutboxRow): Promise<void> {
    const attempts = row.attempts + 1
    const details = { outbox: row.id, kind: kind.name, template: row.template, attempts }
    let statusCode: number | null
    try {
      statusCode = await kind.send(row, lane)
    } catch (err) {
      const failure = err instanceof DeliveryFailure ? err : new DeliveryFailure(String((err as Error)?.message ?? err).slice(0, 500), false)
      const at = Date.now()
      const outcome = { attempts, at, statusCode: failure.statusCode }
      if (failure.permanent || at - row.created_at >= kind.retry.giveUpAfterMs) {
        await markFailed(this.db, row.id, lane.claim, outcome, failure.message, kind.dropsData)
        this.attempted(kind.name, 'failed')
        this.log.error({ ...details, error: failure.message, permanent: failure.permanent }, `${kind.name}: given up`)
        await kind.settled?.(row, lane, 'failed', at)
        return
      }
      const delay = retryDelay(attempts, kind.retry.baseMs, kind.retry.maxMs)
      await markRetry(this.db, row.id, lane.claim, outcome, at + delay, failure.message)
      this.attempted(kind.name, 'retried')
      this.log.warn({ ...details, error: failure.message, retryInMs: delay }, `${kind.name}: not delivered; will retry`)
      await kind.settled?.(row, lane, 'retried', at)
      return
    }
    const at = Date.now()
    this.attempted(kind.name, 'delivered')
    if (!(await markSent(this.db, row.id, lane.claim, { attempts, at, statusCode }, kind.dropsData))) {
      this.log.warn(details, `${kind.name}: delivered after its lease ended; another instance may deliver it again`)
    }
    await kind.settled?.(row, lane, 'delivered', at)
  }
}
