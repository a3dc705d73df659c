import { createHmac, randomInt, timingSafeEqual } from 'node:crypto'
import type { EmailTokenPurpose } from '../../db/types.js'
import { addressLookupKey } from '../common/text.js'
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

/** What a code is mailed for: an address's token purposes, and a revert of a primary change. */
export type CodePurpose = EmailTokenPurpose | 'revert'

/**
 * What a code is bound to: an address row's id (verification, reset, sign-in), or an address's folded text (a
 * revert, whose row may be gone). The two never meet: an address's text holds an '@'.
 */
export type CodeSubject = number | string

/** A guess reserved against an address's daily allowance of wrong codes: given back if it was right. */
export interface CodeTry {
  succeeded(): Promise<void>
  /**
   * Runs the check: a check that throws (the database down, a refusal after a right code) was no wrong guess, and
   * gives the reservation back.
   */
  checking<T>(check: () => Promise<T>): Promise<T>
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
   * wrong ones per day, however many come at once (429 past it, the guess unchecked). Keyed by the address as given,
   * and taken before it is looked up, so that an address nobody has reaches its 429 as a known one does: trying
   * codes does not tell which addresses exist.
   */
  async reserve(address: string, purpose: CodePurpose): Promise<CodeTry> {
    const taken = await this.limits.take([{
      key: `code-fail:${purpose}:${addressLookupKey(address) ?? address}`, max: CODE_FAILURES_PER_DAY, windowMs: 86_400_000,
      detail: 'Too many wrong codes for this address today: use the link or token of the mail, or try again tomorrow'
    }], 'uncounted')
    return {
      succeeded: () => taken.release(),
      async checking(check) {
        try {
          return await check()
        } catch (err) {
          await taken.release().catch(() => undefined)
          throw err
        }
      }
    }
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

  hash(subject: CodeSubject, purpose: CodePurpose, code: string): string {
    return createHmac('sha256', this.key).update(`${subject}\0${purpose}\0${code}`).digest('hex')
  }

  /**
   * Which of the live codes `code` is, if any. Every one is compared, in constant time, whichever matches: the time
   * taken does not say which, or how many.
   */
  match<R extends { id: number; code_hash: string | null }>(live: R[], subject: CodeSubject, purpose: CodePurpose, code: string): R | undefined {
    const given = Buffer.from(this.hash(subject, purpose, /^[0-9]{6}$/.test(code) ? code : '-'), 'hex')
    let hit: R | undefined
    for (const row of live) {
      if (timingSafeEqual(Buffer.from(row.code_hash ?? '', 'hex'), given) && hit === undefined) hit = row
    }
    return hit
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
    const hit = this.match(live, emailId, purpose, code)?.id
    if (hit !== undefined) return hit
    if (live.length > 0) {
      await trx.updateTable('email_tokens').set((eb) => ({ code_tries: eb('code_tries', '+', 1) })).where('id', 'in', live.map((r) => r.id)).execute()
    }
    return undefined
  }
}
