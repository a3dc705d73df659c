import { Redis } from 'ioredis'
import { MemoryCounter, RedisCounter, type WindowCounter } from './counters.js'

export interface CounterStore {
  /** Requests per caller (the general rate limit). */
  requests: WindowCounter
  /** Failed password checks per account and per client (the login guard). */
  logins: WindowCounter
  close(): Promise<void>
}

export interface StoreOptions {
  /** `redis://…`: counters shared by every instance; in process when unset. */
  redisUrl?: string | undefined
  keyPrefix: string
  warn: (details: object, message: string) => void
}

/** Opens the counters: in memory for one instance, in Redis when several share the limits. */
export async function openCounters(options: StoreOptions): Promise<CounterStore> {
  if (!options.redisUrl) {
    const requests = new MemoryCounter()
    const logins = new MemoryCounter()
    return { requests, logins, close: async () => { requests.close(); logins.close() } }
  }
  const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: true, lazyConnect: true })
  redis.on('error', (err: Error) => options.warn({ err: err.message }, 'redis'))
  await redis.connect()
  return {
    requests: new RedisCounter(redis, `${options.keyPrefix}rl:`),
    logins: new RedisCounter(redis, `${options.keyPrefix}login:`),
    close: async () => { await redis.quit().catch(() => redis.disconnect()) }
  }
}
