import { sql } from 'kysely'
import type { EventType } from '../../schemas/event.js'
import type { Db, Trx } from '../database/index.js'
import { inTransaction, locksRows } from '../database/transaction.js'
import { deleteInBatches, PURGE_BATCH } from '../database/batches.js'

export interface SequencerLog {
  warn(details: object, message: string): void
}

export interface SequencerOptions {
  /** How often committed events are looked for when nothing woke the sequencer (another instance's, say). */
  pollMs: number
  /**
   * The least time from the end of one background run to the start of the next: a write that wakes an idle
   * sequencer has its events placed at once, and under a stream of writes each run places what the gap gathered,
   * rather than a sequencing transaction (six statements on MySQL) running for each write.
   */
  gapMs: number
  /** Events given their place per transaction. */
  batch: number
  /** Events are kept this long (EVENT_RETENTION_SECONDS), then purged in batches. */
  retentionMs: number
  /** Events deleted per purge statement: short statements, short locks. */
  purgeBatch: number
  /** Between two purges (PURGE_INTERVAL_SECONDS). */
  purgeEveryMs: number
}

export const SEQUENCER_DEFAULTS: SequencerOptions = {
  pollMs: 1000, gapMs: 20, batch: 500, retentionMs: 30 * 86_400_000, purgeBatch: PURGE_BATCH, purgeEveryMs: 60_000
}

/** The counter row, locked (MySQL) for the rest of the sequencing transaction. */
function lockedCounter(trx: Trx) {
  const q = trx.selectFrom('event_sequence').select('value').where('name', '=', 'events')
  return (locksRows(trx) ? q.forUpdate() : q).executeTakeFirst()
}

/** Committed events without a place yet, oldest first. */
function unplacedEvents(db: Db | Trx, limit: number) {
  return db.selectFrom('events').select(['id', 'type']).where('position', 'is', null).orderBy('id').limit(limit).execute()
}

/** An event just given its place, as what follows the feed (webhook deliveries) needs it. */
export interface Sequenced {
  id: number
  type: EventType
  position: number
}

/**
 * Runs in the sequencing transaction, with the events it placed: what must follow the feed in its order. Resolves
 * to whether it wrote anything that someone must be told of once the transaction has committed.
 */
export type OnSequenced = (trx: Trx, events: Sequenced[]) => Promise<boolean>

interface Follower {
  follow: OnSequenced
  committed: () => void
}

/**
 * Gives committed events their place in the feed, in the background. An event is written in its change's
 * transaction without a position; a sequencing transaction locks the counter row (`event_sequence`), reads the
 * events committed so far that have none, and numbers them after the last position given. Transactions that
 * commit in another order than they began, and auto-increment ids with gaps (Galera), do not matter: a position is
 * given only to a committed event, and always after every position given before it. So a reader that follows the
 * feed by position never misses an event and never sees one twice. With several instances, the counter's row lock
 * (on a cluster, certification at commit) lets one sequencing transaction through at a time.
 */
export class Sequencer {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private again = false
  private stopped = true
  private lastPurge = 0
  /** When the last background run ended (performance.now()). */
  private lastEnded = -Infinity
  /** Whether the timer is set to run within the gap already (a later wake need not set it again). */
  private soon = false
  private readonly options: SequencerOptions

  private readonly followers: Follower[] = []

  constructor(private readonly db: Db, private readonly log: SequencerLog, options: Partial<SequencerOptions> = {}) {
    this.options = { ...SEQUENCER_DEFAULTS, ...options }
  }

  /**
   * Runs `follow` in every sequencing transaction, with the events it placed (webhook deliveries are written so), and
   * `committed` once such a transaction has committed, if `follow` wrote something in it.
   */
  follow(follow: OnSequenced, committed: () => void = () => {}): void {
    this.followers.push({ follow, committed })
  }

  /** Starts the background runs: the first at once, or at the first poll when `caughtUp` (catchUp() just ran). */
  start(caughtUp = false): void {
    this.stopped = false
    this.schedule(caughtUp ? this.options.pollMs : 0)
  }

  /** Events were committed: place them now (or once the gap since the last run has passed) rather than at the next poll. */
  wake(): void {
    if (this.stopped) return
    if (this.running) this.again = true
    else if (!this.soon) this.schedule(this.gapLeft())
  }

  private gapLeft(): number {
    return Math.max(0, Math.ceil(this.lastEnded + this.options.gapMs - performance.now()))
  }

  /**
   * Places every event committed before this call (the feed's reads call it, so a reader sees what committed before
   * it asked): nothing to do, and no lock taken, when every committed event has its place. It does not wait for the
   * background run (nor its purge): sequencing transactions take turns on the counter's lock.
   */
  async catchUp(): Promise<void> {
    if ((await unplacedEvents(this.db, 1)).length > 0) await this.sequenceAll()
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.running
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer)
    this.soon = ms <= this.options.gapMs
    this.timer = setTimeout(() => this.run(), ms)
    this.timer.unref()
  }

  private run(): void {
    this.soon = false
    if (this.running || this.stopped) return
    this.again = false
    this.running = this.sequenceAll().then(() => this.purgeIfDue())
      .catch((err: unknown) => this.log.warn({ err }, 'events: could not place committed events in the feed; trying again'))
      .finally(() => {
        this.running = undefined
        this.lastEnded = performance.now()
        if (!this.stopped) this.schedule(this.again ? this.options.gapMs : this.options.pollMs)
      })
  }

  /** Places committed events until none is left without a place. */
  private async sequenceAll(): Promise<void> {
    for (;;) {
      const { placed, told } = await inTransaction(this.db, (trx) => this.sequence(trx))
      for (const tell of told) {
        try {
          tell()
        } catch (err) {
          this.log.warn({ err }, 'events: a follower could not be told of a placing; what it wrote waits for its next poll')
        }
      }
      if (placed < this.options.batch) return
    }
  }

  /** One sequencing transaction: how many events it placed, and whom to tell once it has committed. */
  private async sequence(trx: Trx): Promise<{ placed: number; told: Array<() => void> }> {
    const told: Array<() => void> = []
    const counter = await lockedCounter(trx)
    if (!counter) throw new Error('event_sequence has no row for the events')
    const last = Number(counter.value)
    // Read after the lock is held: every event committed by now is seen, and any committed later gets a later place.
    const rows = await unplacedEvents(trx, this.options.batch)
    if (rows.length === 0) return { placed: 0, told }
    const placed = rows.map((r, i) => ({ id: r.id, type: r.type, position: last + i + 1 }))
    await trx.updateTable('events')
      .set({ position: sql<number>`case id ${sql.join(placed.map((e) => sql`when ${e.id} then ${e.position}`), sql` `)} end` })
      .where('id', 'in', placed.map((e) => e.id)).execute()
    await trx.updateTable('event_sequence').set({ value: last + placed.length }).where('name', '=', 'events').execute()
    for (const follower of this.followers) if (await follower.follow(trx, placed)) told.push(follower.committed)
    return { placed: placed.length, told }
  }

  /** Deletes events older than the retention, a batch per statement, at most once every purgeEveryMs. */
  private async purgeIfDue(): Promise<void> {
    const now = Date.now()
    if (now - this.lastPurge < this.options.purgeEveryMs) return
    this.lastPurge = now
    await purgeEvents(this.db, now - this.options.retentionMs, this.options.purgeBatch, () => this.stopped)
  }
}

/** Deletes placed events that occurred before `before`, `batch` at a time, until none is left or `stop()` says so. */
export function purgeEvents(db: Db, before: number, batch: number, stop: () => boolean = () => false): Promise<number> {
  return deleteInBatches(batch,
    async (limit) => (await db.selectFrom('events').select('id').where('occurred_at', '<', before).where('position', 'is not', null)
      .orderBy('occurred_at').limit(limit).execute()).map((r) => r.id),
    async (ids) => {
      await db.deleteFrom('events').where('id', 'in', ids).execute()
      return ids.length
    }, stop)
}
