import type { Limits } from './limits.js'

export interface LoginGuardOptions {
  /** Failed checks per account and client address (LOGIN_MAX_FAILURES). */
  maxPerPair: number
  /** Failed checks per client address, whatever the account (LOGIN_MAX_FAILURES_PER_CLIENT). */
  maxPerClient: number
  /** Failed checks per account, from every client together (LOGIN_MAX_FAILURES_PER_ACCOUNT). */
  maxPerAccount: number
  windowMs: number
}

/** An attempt allowed to check a password: it counts as a failure unless released. */
export interface Attempt {
  /** The password was right: the attempt does not count, and this client's failures on this account are forgotten. */
  succeeded(): Promise<void>
}

/**
 * Throttles password checks, wherever a password is checked (login, `current_password`) or a mailed token is tried.
 * Each attempt first reserves a place on three limits at once: the account and client address together, the client
 * address, and the account from every client. However many attempts arrive at once, at most the limit are ever
 * checked; an attempt over any limit takes its reservations back and is refused (429) without its password being
 * checked. One client's failures therefore lock that client out of the account, not the account's owner elsewhere,
 * until the per-account limit is reached. A failing store lets the attempt through (Limits); the password check
 * itself never fails open.
 */
export class LoginGuard {
  constructor(private readonly limits: Limits, private readonly o: LoginGuardOptions) {}

  /**
   * Reserves a check of `account`'s secret from `client`. Without an account (a mailed token, which names none until
   * it is found), only the client's limit applies: a guessed token must not lock any account.
   */
  async attempt(account: string | null, client: string): Promise<Attempt> {
    const windowMs = this.o.windowMs
    const perClient = { key: `addr:${client}`, max: this.o.maxPerClient, windowMs, detail: 'Too many failed attempts from this client; try again later' }
    const pair = account === null ? undefined : `pair:${account}|${client}`
    const limits = account === null || pair === undefined ? [perClient] : [
      { key: pair, max: this.o.maxPerPair, windowMs, detail: 'Too many failed attempts for this account from this client; try again later' },
      perClient,
      { key: `acct:${account}`, max: this.o.maxPerAccount, windowMs, detail: 'Too many failed attempts for this account; try again later' }
    ]
    const taken = await this.limits.take(limits, 'uncounted')
    return {
      succeeded: async () => {
        // The reservations are taken back, and this client's failures on this account are forgotten.
        await taken.release(pair)
        if (pair) await this.limits.clear(pair)
      }
    }
  }
}
