import { Redis } from 'ioredis'
import { MemoryCounter, RedisCounter, type Hit, type WindowCounter } from './counters.js'

export interface CounterStore {
  /** Requests per caller (the general rate limit). */
  requests: WindowCounter
  /** Password checks per account and per client (the login guard). */
  logins: WindowCounter
  close(): Promise<void>
}

export interface StoreOptions {
  /** `redis://…`: counters shared by every instance; in process when unset. */
  redisUrl?: string | undefined
  keyPrefix: string
  warn: (details: object, message: string) => void
}

/** How long a Redis command may take before the in-process counters answer instead (a hung Redis). */
const COMMAND_TIMEOUT_MS = 250

/**
 * Counters in Redis while it answers, in process while it does not: a request never waits for an unreachable Redis
 * (no offline queue, a short command timeout), and the limits keep applying, per process, meanwhile. Redis is taken
 * up again by itself once it answers.
 */
class FallbackCounter implements WindowCounter {
  constructor(private readonly shared: RedisCounter, private readonly local: MemoryCounter, private readonly usable: () => boolean) {}

  hit(key: string, windowMs: number): Promise<Hit> {
    if (!this.usable()) return this.local.hit(key, windowMs)
    return this.shared.hit(key, windowMs).catch(() => this.local.hit(key, windowMs))
  }

  release(key: string): Promise<void> {
    if (!this.usable()) return this.local.release(key)
    return this.shared.release(key).catch(() => this.local.release(key))
  }

  async clear(key: string): Promise<void> {
    await this.local.clear(key)
    if (this.usable()) await this.shared.clear(key).catch(() => undefined)
  }

  close(): void {
    this.local.close()
  }
}

/**
 * Opens the counters: in memory for one instance, in Redis when several share the limits. An unreachable Redis,
 * at start or later, is logged once when it goes and once when it comes back; requests never wait for it.
 */
export async function openCounters(options: StoreOptions): Promise<CounterStore> {
  if (!options.redisUrl) {
    const requests = new MemoryCounter()
    const logins = new MemoryCounter()
    return { requests, logins, close: async () => { requests.close(); logins.close() } }
  }
  const redis = new Redis(options.redisUrl, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: 1000,
    retryStrategy: (times) => Math.min(times * 200, 2000)
  })
  let up = false
  let downSince = Date.now()
  let reported = false
  redis.on('ready', () => {
    if (reported) options.warn({ downMs: Date.now() - downSince }, 'redis available again: limits are shared again')
    up = true
    reported = false
  })
  const down = (err?: Error) => {
    if (up) downSince = Date.now()
    up = false
    if (reported) return
    reported = true
    options.warn({ err: err?.message }, 'redis unavailable: rate limits and login throttling apply per process until it is back')
  }
  redis.on('error', down)
  redis.on('close', () => down())
  const usable = () => up && redis.status === 'ready'
  const requests = new FallbackCounter(new RedisCounter(redis, `${options.keyPrefix}rl:`), new MemoryCounter(), usable)
  const logins = new FallbackCounter(new RedisCounter(redis, `${options.keyPrefix}login:`), new MemoryCounter(), usable)
  // The first connection is waited for a moment, so that a healthy Redis is used from the first request on.
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 1000)
    redis.once('ready', () => { clearTimeout(timer); resolve() })
  })
  return {
    requests,
    logins,
    close: async () => {
      requests.close()
      logins.close()
      redis.removeAllListeners('error').on('error', () => {})
      redis.removeAllListeners('close')
      await redis.quit().catch(() => redis.disconnect())
    }
  }
}
