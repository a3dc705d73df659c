import type { Redis } from 'ioredis'

/** The count in a key's current window and the milliseconds left in it. */
export interface Hit {
  count: number
  ttlMs: number
}

/** Counts events per key over a fixed window that starts with the first event. */
export interface WindowCounter {
  /** Adds one event. */
  hit(key: string, windowMs: number): Promise<Hit>
  /** Takes one event back (a reservation that turned out not to count); never below zero. */
  release(key: string): Promise<void>
  clear(key: string): Promise<void>
  close(): void
}

/**
 * In-process counters: right for a single instance. Expired windows are swept every minute; past `maxKeys` live
 * windows (a flood of distinct callers), the oldest are dropped, so memory stays bounded.
 */
export class MemoryCounter implements WindowCounter {
  private readonly entries = new Map<string, { count: number; expires: number }>()
  private readonly sweeper: NodeJS.Timeout

  constructor(private readonly maxKeys = 100_000, sweepEveryMs = 60_000) {
    this.sweeper = setInterval(() => this.sweep(), sweepEveryMs)
    this.sweeper.unref()
  }

  private sweep(now = Date.now()) {
    for (const [key, entry] of this.entries) if (entry.expires <= now) this.entries.delete(key)
  }

  async hit(key: string, windowMs: number): Promise<Hit> {
    const now = Date.now()
    let entry = this.entries.get(key)
    if (!entry || entry.expires <= now) {
      if (entry) this.entries.delete(key) // re-inserted below: the map stays ordered by window start
      else if (this.entries.size >= this.maxKeys) this.evict(now)
      entry = { count: 0, expires: now + windowMs }
      this.entries.set(key, entry)
    }
    entry.count += 1
    return { count: entry.count, ttlMs: entry.expires - now }
  }

  /** Drops expired windows, then the oldest live ones until a tenth of the room is free. */
  private evict(now: number) {
    this.sweep(now)
    for (const key of this.entries.keys()) {
      if (this.entries.size < this.maxKeys * 0.9) break
      this.entries.delete(key)
    }
  }

  get size(): number {
    return this.entries.size
  }

  /** Takes one hit back; a window back at zero is gone, so the next hit starts a new one (as in Redis). */
  async release(key: string): Promise<void> {
    const entry = this.entries.get(key)
    if (!entry) return
    entry.count -= 1
    if (entry.count <= 0) this.entries.delete(key)
  }

  async clear(key: string) {
    this.entries.delete(key)
  }

  close() {
    clearInterval(this.sweeper)
  }
}

const HIT = `local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('PTTL', KEYS[1])}`

const RELEASE = `local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n > 0 then redis.call('DECR', KEYS[1]) end
return 0`

type Scripts = {
  rosterHit: (key: string, windowMs: string) => Promise<[number, number]>
  rosterRelease: (key: string) => Promise<number>
}

/** Counters in Redis: shared by every instance behind the same Redis. */
export class RedisCounter implements WindowCounter {
  constructor(private readonly redis: Redis, private readonly prefix: string) {
    // Sent once, then run by its digest (EVALSHA): a hit is one short round trip.
    if (!('rosterHit' in redis)) redis.defineCommand('rosterHit', { numberOfKeys: 1, lua: HIT })
    if (!('rosterRelease' in redis)) redis.defineCommand('rosterRelease', { numberOfKeys: 1, lua: RELEASE })
  }

  private get scripts(): Scripts {
    return this.redis as unknown as Scripts
  }

  async hit(key: string, windowMs: number): Promise<Hit> {
    const [count, ttl] = await this.scripts.rosterHit(this.prefix + key, String(windowMs))
    return { count, ttlMs: Math.max(ttl, 0) }
  }

  async release(key: string): Promise<void> {
    await this.scripts.rosterRelease(this.prefix + key)
  }

  async clear(key: string) {
    await this.redis.del(this.prefix + key)
  }

  close() {}
}
