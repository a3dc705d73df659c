import { RateLimited } from '../common/errors.js'
import { normalizeAddress } from '../common/text.js'
import type { WindowCounter } from './counters.js'

export interface LoginGuardOptions {
  counter: WindowCounter
  maxPerAccount: number
  maxPerClient: number
  windowMs: number
  warn: (details: object, message: string) => void
}

/**
 * Failed password checks, counted per account and per client address. `check` refuses (429) while either counter
 * is over its limit, before the password is checked, so a refusal costs no hashing. A store that fails lets the
 * attempt through (and says so in the log): the guard fails open, the password check itself never does.
 */
export class LoginGuard {
  constructor(private readonly o: LoginGuardOptions) {}

  private safely<T>(what: string, fn: () => T | Promise<T>): Promise<T | undefined> {
    return Promise.resolve().then(fn).catch((err: unknown) => {
      this.o.warn({ err }, `login guard: ${what} failed`)
      return undefined
    })
  }

  private static accountKey = (account: string) => `acct:${normalizeAddress(account)}`
  private static clientKey = (client: string) => `addr:${client}`

  async check(account: string, client: string): Promise<void> {
    const [perAccount, perClient] = await Promise.all([
      this.safely('check', () => this.o.counter.peek(LoginGuard.accountKey(account))),
      this.safely('check', () => this.o.counter.peek(LoginGuard.clientKey(client)))
    ])
    if (perAccount && perAccount.count >= this.o.maxPerAccount) {
      throw new RateLimited('Too many failed logins for this account; try again later', perAccount.ttlMs)
    }
    if (perClient && perClient.count >= this.o.maxPerClient) {
      throw new RateLimited('Too many failed logins from this client; try again later', perClient.ttlMs)
    }
  }

  async failed(account: string, client: string): Promise<void> {
    await Promise.all([
      this.safely('count', () => this.o.counter.hit(LoginGuard.accountKey(account), this.o.windowMs)),
      this.safely('count', () => this.o.counter.hit(LoginGuard.clientKey(client), this.o.windowMs))
    ])
  }

  async succeeded(account: string): Promise<void> {
    await this.safely('clear', () => this.o.counter.clear(LoginGuard.accountKey(account)))
  }
}
