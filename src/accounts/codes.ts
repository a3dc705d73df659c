import { createHmac, randomInt, timingSafeEqual } from 'node:crypto'
import type { EmailTokenPurpose } from '../../db/types.js'
import type { Trx } from '../database/index.js'
import type { Limits } from '../limits/limits.js'

/** Wrong codes a mailed code survives: the fifth kills it. */
export const CODE_TRIES = 5

/** Wrong codes an address takes for one purpose per day, across all its codes: past it, codes are refused (429). */
export const CODE_FAILURES_PER_DAY = 10

/**
 * The least time a wrong code is answered after its request arrived: longer than trying one (a lock, a read, a
 * write), so that an address nobody has is answered as late as one whose codes were tried.
 */
export const CODE_FAILURE_MS = 100

/** Throws `err` no sooner than CODE_FAILURE_MS after `started`. */
export async function failedCode(started: number, err: Error): Promise<never> {
  const left = started + CODE_FAILURE_MS - Date.now()
  if (left > 0) await new Promise((resolve) => setTimeout(resolve, left))
  throw err
}

/** A guess reserved against an address's daily allowance of wrong codes: given back if it was right. */
export interface CodeTry {
  succeeded(): Promise<void>
}

/**
 * The 6-digit codes mailed beside tokens (and alone, to sign in). A code is stored only as HMAC-SHA256 under a key
 * of the database's own (app_secrets), bound to the address and the purpose it was mailed for: the table alone does
 * not let anyone try the million codes offline. Compared in constant time.
 */
export class EmailCodes {
  constructor(private readonly key: Buffer, readonly ttlMs: number, private readonly limits: Limits) {}

  /**
   * Reserves a guess at an address's codes of one purpose before it is checked: at most CODE_FAILURES_PER_DAY
   * wrong ones per day, however many come at once (429 past it, the guess unchecked).
   */
  async reserve(emailId: number, purpose: EmailTokenPurpose): Promise<CodeTry> {
    const taken = await this.limits.take([{
      key: `code-fail:${purpose}:${emailId}`, max: CODE_FAILURES_PER_DAY, windowMs: 86_400_000,
      detail: 'Too many wrong codes for this address today: use the link or token of the mail, or try again tomorrow'
    }], 'uncounted')
    return { succeeded: () => taken.release() }
  }

  /** Kills the live codes of an address for a purpose, as a new one is mailed: one code at a time is live. */
  async retire(trx: Trx, emailId: number, purpose: EmailTokenPurpose): Promise<void> {
    await trx.updateTable('email_tokens').set({ code_tries: CODE_TRIES })
      .where('email_id', '=', emailId).where('purpose', '=', purpose).where('code_hash', 'is not', null).where('code_tries', '<', CODE_TRIES).execute()
  }

  /** A new code: six digits, uniformly drawn. */
  newCode(): string {
    return String(randomInt(0, 1_000_000)).padStart(6, '0')
  }

  hash(emailId: number, purpose: EmailTokenPurpose, code: string): string {
    return createHmac('sha256', this.key).update(`${emailId}\0${purpose}\0${code}`).digest('hex')
  }

  /** When a code mailed now dies: after its own lifetime, never after its token. */
  expiresAt(now: number, tokenExpiresAt: number): number {
    return Math.min(now + this.ttlMs, tokenExpiresAt)
  }

  /**
   * Tries a code against the live codes of an address for a purpose, in the caller's transaction (which has locked
   * the address's user, so that guesses at one address are taken one at a time). A match: the token row it belongs
   * to. No match: every live code there takes a wrong try (the fifth kills it), so parallel guesses get no more
   * tries than sequential ones; the caller must commit for the tries to count.
   */
  async spend(trx: Trx, emailId: number, purpose: EmailTokenPurpose, code: string, now: number): Promise<number | undefined> {
    const live = await trx.selectFrom('email_tokens').select(['id', 'code_hash'])
      .where('email_id', '=', emailId).where('purpose', '=', purpose)
      .where('code_hash', 'is not', null).where('code_expires_at', '>', now).where('code_tries', '<', CODE_TRIES)
      .execute()
    const given = Buffer.from(this.hash(emailId, purpose, /^[0-9]{6}$/.test(code) ? code : '-'), 'hex')
    let hit: number | undefined
    // Every live code is compared, whichever matches: the time taken does not say which, or how many.
    for (const row of live) {
      if (timingSafeEqual(Buffer.from(row.code_hash ?? '', 'hex'), given) && hit === undefined) hit = row.id
    }
    if (hit !== undefined) return hit
    if (live.length > 0) {
      await trx.updateTable('email_tokens').set((eb) => ({ code_tries: eb('code_tries', '+', 1) })).where('id', 'in', live.map((r) => r.id)).execute()
    }
    return undefined
  }
}
