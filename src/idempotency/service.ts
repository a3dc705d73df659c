import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'
import { IdempotencyKeyInUse, IdempotencyKeyReused } from '../common/errors.js'
import type { Db } from '../database/index.js'
import { PURGE_BATCH } from '../database/batches.js'
import { dropKey, findKey, keepAnswer, purgeExpiredKeys, takeKey, takeOver, type KeyRow } from './repository.js'

export interface IdempotencyOptions {
  /** How long an answer is kept for retries (24 hours). */
  keepMs: number
  /** A request still `running` after this long is taken to have died unanswered: its key may be taken over. */
  abandonedAfterMs: number
}

export const IDEMPOTENCY_DEFAULTS: IdempotencyOptions = { keepMs: 86_400_000, abandonedAfterMs: 60_000 }

/** The answer kept for a key. */
export interface KeptAnswer {
  status: number
  contentType: string | null
  location: string | null
  etag: string | null
  body: string
}

/** What a request with a key should do: run (and keep its answer), or answer again what its first run answered. */
export type Outcome = { run: true } | { run: false; answer: KeptAnswer }

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex')

/**
 * A kept answer may hold secrets (a login's tokens): it is stored sealed with AES-256-GCM under a key derived from the
 * client's Idempotency-Key itself, which the database never holds (only a hash of it, under another label). Whoever
 * reads the table cannot read the answers; a retry, which brings the key, can.
 */
export class AnswerSeal {
  private readonly key: Buffer
  constructor(scope: string, idempotencyKey: string) {
    this.key = createHash('sha256').update(`answer\n${scope}\n${idempotencyKey}`).digest()
  }

  seal(body: string): string {
    const iv = randomBytes(12)
    const cipher = createCipheriv('aes-256-gcm', this.key, iv)
    const sealed = Buffer.concat([cipher.update(body, 'utf8'), cipher.final()])
    return `${iv.toString('base64')}.${cipher.getAuthTag().toString('base64')}.${sealed.toString('base64')}`
  }

  open(stored: string): string {
    const [iv, tag, sealed] = stored.split('.')
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv ?? '', 'base64'))
    decipher.setAuthTag(Buffer.from(tag ?? '', 'base64'))
    return Buffer.concat([decipher.update(Buffer.from(sealed ?? '', 'base64')), decipher.final()]).toString('utf8')
  }
}

/** Every value at every depth, keys sorted: two bodies that differ only in key order are the same request. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical)
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical((value as Record<string, unknown>)[k])]))
  }
  return value
}

/** A User's href, with or without the service's base: the whole of it, never a part of some other text. */
const USER_HREF = /\/users\/(\d+)$/

/** The hrefs a body gives its user by: a User's own (a sign-up), a login's `user`. Free text is never read. */
function bodyHrefs(body: string): unknown[] {
  let parsed: unknown
  try {
    parsed = JSON.parse(body)
  } catch {
    return []
  }
  if (typeof parsed !== 'object' || parsed === null) return []
  const answer = parsed as { href?: unknown; user?: { href?: unknown } | null }
  return [answer.href, typeof answer.user === 'object' ? answer.user?.href : undefined]
}

/**
 * The user an answer presents: the route's own (`/users/{user_id}/…`), else the one its Location or its body's
 * User names; null for none.
 */
function presentedUser(answer: KeptAnswer, routeUser: number | null): number | null {
  if (routeUser !== null) return routeUser
  for (const href of [answer.location, ...bodyHrefs(answer.body)]) {
    const match = typeof href === 'string' ? USER_HREF.exec(href) : null
    if (match) return Number(match[1])
  }
  return null
}

/** Whether an answer of this status is kept for the retries of its key: a 2xx or a 4xx other than 429. */
export const isKept = (status: number): boolean => status < 500 && status !== 429

/**
 * Idempotency keys (IETF httpapi draft): a retry with the same key and the same request, from the same caller,
 * within `keepMs`, answers the first answer again and does nothing twice. The same key with another request is
 * IDEMPOTENCY_KEY_REUSED (422); while the first is still running, IDEMPOTENCY_KEY_IN_USE (409). Keys are rows of
 * the database, so this holds across instances; answers of 5xx and 429 are not kept. A kept answer names the user it
 * presents, so that the user's deletion drops it.
 */
export class IdempotencyKeys {
  private readonly options: IdempotencyOptions

  constructor(private readonly db: Db, options: Partial<IdempotencyOptions> = {}) {
    this.options = { ...IDEMPOTENCY_DEFAULTS, ...options }
  }

  /** The stored form of a key: scoped to a caller (`u42`), or to nobody for anonymous requests. */
  keyHash(scope: string, key: string): string {
    return sha256(`${scope}\n${key}`)
  }

  seal(scope: string, key: string): AnswerSeal {
    return new AnswerSeal(scope, key)
  }

  requestHash(method: string, path: string, body: unknown): string {
    return sha256(`${method} ${path}\n${JSON.stringify(canonical(body ?? null))}`)
  }

  async begin(keyHash: string, requestHash: string, seal: AnswerSeal): Promise<Outcome> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const now = Date.now()
      if (await takeKey(this.db, keyHash, requestHash, now, now + this.options.keepMs)) return { run: true }
      const row = await findKey(this.db, keyHash)
      if (!row) continue // freed meanwhile (a 5xx, or purged): try to take it again
      if (row.expires_at <= now || this.abandoned(row, now)) {
        if (row.expires_at > now && row.request_hash !== requestHash) throw new IdempotencyKeyReused()
        if (await takeOver(this.db, row, requestHash, now, now + this.options.keepMs)) return { run: true }
        continue
      }
      if (row.request_hash !== requestHash) throw new IdempotencyKeyReused()
      if (row.state === 'running') throw new IdempotencyKeyInUse()
      return { run: false, answer: { status: row.status!, contentType: row.content_type, location: row.location, etag: row.etag, body: seal.open(row.body ?? '') } }
    }
    throw new IdempotencyKeyInUse()
  }

  /**
   * The request answered. Its answer is kept for retries, except a 5xx and a 429: those say "try again" (a 429 with
   * its Retry-After), so they free the key and the retry they invite runs again. `routeUser` is the `user_id` of the
   * route's path, if it has one.
   */
  async finish(keyHash: string, seal: AnswerSeal, answer: KeptAnswer, routeUser: number | null = null): Promise<void> {
    if (!isKept(answer.status)) await dropKey(this.db, keyHash)
    else await keepAnswer(this.db, keyHash, { ...answer, body: seal.seal(answer.body), userId: presentedUser(answer, routeUser) })
  }

  /** Deletes the keys whose answers have expired, `batch` a statement; how many. */
  purge(batch = PURGE_BATCH): Promise<number> {
    return purgeExpiredKeys(this.db, Date.now(), batch)
  }

  private abandoned(row: KeyRow, now: number): boolean {
    return row.state === 'running' && row.created_at + this.options.abandonedAfterMs <= now
  }
}
