import { RateLimited } from '../common/errors.js'
import type { Hit, WindowCounter } from './counters.js'

/** One limit: at most `max` requests per `windowMs` under a key, refused with `detail` past it. */
export interface Limit {
  key: string
  max: number
  windowMs: number
  detail: string
}

/**
 * Plain request limits over the shared counters (password reset requests, per address and per client). Each
 * request counts against every limit at once; past any of them the request is refused (429), does nothing, and
 * counts only against that limit. A
 * failing store lets requests through and says so in the log, as the login guard does.
 */
export class Throttle {
  constructor(private readonly counter: WindowCounter, private readonly warn: (details: object, message: string) => void) {}

  async take(...limits: Limit[]): Promise<void> {
    const hits = await Promise.all(limits.map((limit) => this.hit(limit)))
    const over = limits.findIndex((limit, i) => (hits[i]?.count ?? 0) > limit.max)
    if (over < 0) return
    // A refused request did nothing: it counts only against the limit that refused it.
    await Promise.all(limits.map((limit, i) => (i !== over && hits[i] ? this.release(limit.key) : undefined)))
    throw new RateLimited(limits[over]!.detail, hits[over]!.ttlMs)
  }

  /** Takes back one request counted under `key` (one that did nothing after all). */
  async release(key: string): Promise<void> {
    try {
      await this.counter.release(key)
    } catch (err) {
      this.warn({ err }, 'throttle: release failed')
    }
  }

  private async hit(limit: Limit): Promise<Hit | undefined> {
    try {
      return await this.counter.hit(limit.key, limit.windowMs)
    } catch (err) {
      this.warn({ err }, 'throttle: count failed')
      return undefined
    }
  }
}
