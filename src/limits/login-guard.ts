import { RateLimited } from '../common/errors.js'
import type { WindowCounter } from './counters.js'

export interface LoginGuardOptions {
  counter: WindowCounter
  /** Failed checks per account and client address (LOGIN_MAX_FAILURES). */
  maxPerPair: number
  /** Failed checks per client address, whatever the account (LOGIN_MAX_FAILURES_PER_CLIENT). */
  maxPerClient: number
  /** Failed checks per account, from every client together (LOGIN_MAX_FAILURES_PER_ACCOUNT). */
  maxPerAccount: number
  windowMs: number
  warn: (details: object, message: string) => void
}

/** An attempt allowed to check a password: it counts as a failure unless released. */
export interface Attempt {
  /** The password was right: the attempt does not count, and this client's failures on this account are forgotten. */
  succeeded(): Promise<void>
}

/**
 * Throttles password checks, wherever a password is checked (login, `current_password`). Each attempt first
 * reserves a place on three counters at once: the account and client address together, the client address, and
 * the account from every client. The increments are atomic on both stores, so however many attempts arrive at once
 * at most the limit are ever checked; an attempt over any limit takes its reservations back and is refused (429)
 * without its password being checked. One client's failures therefore lock that client out of the account, not
 * the account's owner elsewhere, until the per-account limit is reached.
 *
 * A store that fails lets the attempt through and says so in the log: the guard fails open, the password check
 * itself never does.
 */
export class LoginGuard {
  constructor(private readonly o: LoginGuardOptions) {}

  /**
   * Reserves a check of `account`'s secret from `client`. Without an account (a mailed token, which names none until
   * it is found), only the client's counter applies: a guessed token must not lock any account.
   */
  async attempt(account: string | null, client: string): Promise<Attempt> {
    const pair = account === null ? undefined : `pair:${account}|${client}`
    const perClient: [string, number, string] = [`addr:${client}`, this.o.maxPerClient, 'Too many failed attempts from this client; try again later']
    const keys: Array<[string, number, string]> = account === null ? [perClient] : [
      [`pair:${account}|${client}`, this.o.maxPerPair, 'Too many failed attempts for this account from this client; try again later'],
      perClient,
      [`acct:${account}`, this.o.maxPerAccount, 'Too many failed attempts for this account; try again later']
    ]
    const hits = await Promise.all(keys.map(([key]) => this.safely('count', () => this.o.counter.hit(key, this.o.windowMs))))
    const over = keys.findIndex(([, max], i) => (hits[i]?.count ?? 0) > max)
    if (over >= 0) {
      await this.releaseAll(keys.map(([key]) => key), hits)
      throw new RateLimited(keys[over]![2], hits[over]!.ttlMs)
    }
    return {
      succeeded: async () => {
        // The reservations are taken back, and this client's failures on this account are forgotten.
        const kept = keys.map(([key]) => key).filter((key) => key !== pair)
        await this.releaseAll(kept, hits.filter((_, i) => keys[i]![0] !== pair))
        if (pair) await this.safely('clear', () => this.o.counter.clear(pair))
      }
    }
  }

  /** Takes back the reservations that were made (a failed store made none). */
  private async releaseAll(keys: string[], hits: Array<unknown>): Promise<void> {
    await Promise.all(keys.map((key, i) => (hits[i] ? this.safely('release', () => this.o.counter.release(key)) : undefined)))
  }

  private safely<T>(what: string, fn: () => T | Promise<T>): Promise<T | undefined> {
    return Promise.resolve().then(fn).catch((err: unknown) => {
      this.o.warn({ err }, `login guard: ${what} failed`)
      return undefined
    })
  }
}
