import { Unauthenticated } from '../common/errors.js'
import type { Db } from '../database/index.js'
import type { LoginGuard } from '../limits/login-guard.js'
import { findUserById, type UserRow } from '../users/repository.js'
import { deleteToken, findCredentials, insertToken, purgeExpiredTokens, type Caller } from './repository.js'
import { newToken, verifyPassword } from './secrets.js'

export interface AuthOptions {
  /** Lifetime of a bearer token (TOKEN_TTL_SECONDS). */
  tokenTtlSeconds: number
}

export interface Issued {
  token: string
  expiresAt: number
  user: UserRow
}

const wrongCredentials = () => new Unauthenticated('The address or password is wrong', 'INVALID_CREDENTIALS')

/** Logging in and out: who gets a token, and for how long. */
export class AuthService {
  constructor(private readonly db: Db, private readonly guard: LoginGuard, private readonly options: AuthOptions) {}

  /**
   * A token for an address (any of the user's) and its password. A wrong address and a wrong password answer alike,
   * in the same time (an unknown address is checked against a dummy hash); a banned user learns it is banned only
   * once its password checked out. Failed checks count against the account and the client (`client`: its address).
   */
  async login(email: string, password: string, client: string): Promise<Issued> {
    await this.guard.check(email, client)
    const found = await findCredentials(this.db, email)
    if (!(await verifyPassword(found?.password_hash, password)) || !found) {
      await this.guard.failed(email, client)
      throw wrongCredentials()
    }
    await this.guard.succeeded(email)
    if (found.status === 'BANNED') throw new Unauthenticated('This user is banned', 'USER_BANNED')
    const now = Date.now()
    await purgeExpiredTokens(this.db, found.id, now)
    const { token, hash } = newToken()
    const expiresAt = now + this.options.tokenTtlSeconds * 1000
    await insertToken(this.db, found.id, hash, now, expiresAt)
    const user = await findUserById(this.db, found.id)
    if (!user) throw wrongCredentials()
    return { token, expiresAt, user }
  }

  /** Revokes the token the caller called with. */
  async logout(caller: Caller): Promise<void> {
    await deleteToken(this.db, caller.tokenHash)
  }
}
