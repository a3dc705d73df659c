import { RateLimited } from '../common/errors.js'
import type { Hit, WindowCounter } from './counters.js'

/** One limit: at most `max` events per `windowMs` under a key, refused with `detail` past it. */
export interface Limit {
  key: string
  max: number
  windowMs: number
  detail: string
}

/** Events counted by `take`, as far as the store counted them (a failing store counted none). */
export interface Taken {
  /** Takes the events back under every key but `except`. */
  release(except?: string): Promise<void>
}

/**
 * Several limits over the shared counters, taken together: the one algorithm behind the login guard and the mail
 * limits. An event counts against every limit at once (the increments are atomic on both stores, so however many
 * events arrive at once, no more than a limit's `max` pass it); past any of them it is refused (429). What a refused
 * event leaves counted is the caller's choice: nothing (`refused: 'uncounted'`, a password check that was never
 * made), or only the limit that refused it (`'counted'`, a request that must keep counting where it is over).
 *
 * A store that fails lets events through and says so in the log: limits fail open.
 */
export class Limits {
  constructor(private readonly counter: WindowCounter, private readonly warn: (details: object, message: string) => void) {}

  async take(limits: Limit[], refused: 'uncounted' | 'counted'): Promise<Taken> {
    const hits = await Promise.all(limits.map((limit) => this.safely('count', () => this.counter.hit(limit.key, limit.windowMs))))
    const counted = limits.filter((_, i) => hits[i] !== undefined).map((limit) => limit.key)
    const taken: Taken = { release: (except) => this.releaseAll(counted.filter((key) => key !== except)) }
    const over = limits.findIndex((limit, i) => (hits[i]?.count ?? 0) > limit.max)
    if (over < 0) return taken
    const refusing = limits[over]!
    await taken.release(refused === 'counted' ? refusing.key : undefined)
    throw new RateLimited(refusing.detail, (hits[over] as Hit).ttlMs)
  }

  /** Takes back one event counted under `key` (one that did nothing after all). */
  async release(key: string): Promise<void> {
    await this.safely('release', () => this.counter.release(key))
  }

  /** Forgets every event under `key`. */
  async clear(key: string): Promise<void> {
    await this.safely('clear', () => this.counter.clear(key))
  }

  private async releaseAll(keys: string[]): Promise<void> {
    await Promise.all(keys.map((key) => this.release(key)))
  }

  private async safely<T>(what: string, fn: () => Promise<T>): Promise<T | undefined> {
    try {
      return await fn()
    } catch (err) {
      this.warn({ err }, `limits: ${what} failed`)
      return undefined
    }
  }
}
