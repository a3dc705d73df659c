import { deleteEmailTokens } from '../accounts/address-tokens.js'
import { verifyAddress } from '../accounts/addresses.js'
import { failedCode, type EmailCodes } from '../accounts/codes.js'
import { presentSession } from '../accounts/present.js'
import { isTokenShaped, newToken, tokenHash, type Passwords } from '../accounts/secrets.js'
import { endSession, endSessions } from '../accounts/sessions.js'
import { liftEndedBan } from '../accounts/bans.js'
import { bannedAt, lockUser, pageOfUser, type UserRow } from '../accounts/users.js'
import type { Caller } from '../auth/caller.js'
import { Banned, DomainError, NotFound, RateLimited, Unauthenticated } from '../common/errors.js'
import { foldedKey } from '../common/text.js'
import type { Db, Trx } from '../database/index.js'
import { inTransaction } from '../database/transaction.js'
import { asActor, recordEvent, type Cause } from '../events/record.js'
import type { LoginGuard } from '../limits/login-guard.js'
import type { LoginResult } from '../metrics/kinds.js'
import {
  deleteToken, findCredentials, findRefresh, findSignInAddress, insertRefresh, insertSession, insertToken, listSessions, lockCredentials,
  lockForSession, makeRoom, refreshSpent, replacePasswordHash, spendAndRenew, spendRefresh, type HeldSession, type RefreshRow, type SessionRow
} from './repository.js'

export interface SessionsOptions {
  /** Told how each password login ended (the metrics). */
  loggedIn?: (result: LoginResult) => void
  /** Told when a `login.failed` event could not be written (it is written after the answer, so as not to delay it). */
  unrecorded?: (err: unknown) => void
  accessTtlSeconds: number
  refreshTtlSeconds: number
  sessionMaxAgeSeconds: number
  maxSessionsPerUser: number
}

/** Who is asking: the client address (throttling) and its User-Agent (the session's `client`). */
export interface ClientInfo {
  address: string
  agent: string | undefined
}

/** Who may sign in through a given door: an error refuses the user before any session is opened. */
export type Admit = (user: UserRow) => DomainError | undefined
const admitAll: Admit = () => undefined

/** What a login or a refresh hands out. */
export interface Issued {
  token: string
  expiresAt: number
  refreshToken: string
  refreshExpiresAt: number
  session: SessionRow
  user: UserRow
}

const wrongCredentials = () => new Unauthenticated('The address or password is wrong', 'INVALID_CREDENTIALS')
const banned = (user: { banned_until: number | null }) => new Banned(user.banned_until)
const invalidGrant = () => new Unauthenticated('The refresh token is unknown, expired or revoked', 'INVALID_GRANT')
const MAX_CLIENT = 200

/**
 * Sessions: logging in, refreshing and logging out (who gets tokens, for how long, and what ends them), and seeing
 * and ending a user's sessions ("sign out everywhere"). Route rules have decided who may reach the user.
 */
export class SessionsService {
  constructor(
    private readonly db: Db, private readonly passwords: Passwords, private readonly guard: LoginGuard, private readonly codes: EmailCodes,
    private readonly options: SessionsOptions
  ) {}

  /**
   * A session for an address (the user's primary one, or any of its addresses) and its password. A wrong address
   * and a wrong password answer alike, in the same time (an unknown address is checked against a dummy hash); a
   * banned user learns it is banned only once its password checked out. Each check is first reserved with the
   * login guard (429 past a limit, unchecked).
   */
  login(email: string, password: string, client: ClientInfo, cause: Cause, admit: Admit = admitAll): Promise<Issued> {
    return this.counted(this.checkLogin(email, password, client, cause, admit))
  }

  /** Tells the metrics how a sign-in (by password or by code) ended. */
  private async counted(signingIn: Promise<Issued>): Promise<Issued> {
    const told = this.options.loggedIn ?? (() => {})
    try {
      const issued = await signingIn
      told('success')
      return issued
    } catch (err) {
      if (err instanceof RateLimited) told('throttled')
      else if (err instanceof Unauthenticated) told(err.code === 'USER_BANNED' ? 'banned' : 'invalid_credentials')
      throw err
    }
  }

  private async checkLogin(email: string, password: string, client: ClientInfo, cause: Cause, admit: Admit): Promise<Issued> {
    const found = await findCredentials(this.db, email)
    const attempt = await this.guard.attempt(found ? `u${found.id}` : `e${foldedKey(email)}`, client.address)
    if (!(await this.passwords.verify(found?.password_hash, password)) || !found) {
      // Recorded without waiting: an unknown address writes nothing, and the answer must not take longer for a known one.
      if (found) this.recordFailure(found.id, email, client, cause)
      throw wrongCredentials()
    }
    await attempt.succeeded()
    if (bannedAt(found, Date.now())) throw banned(found)
    // A hash made elsewhere (an import) or at another cost gives way to Roster's own, made before any lock is taken.
    const rehashed = this.passwords.needsRehash(found.password_hash) ? await this.passwords.hash(password) : undefined
    const issued = await inTransaction(this.db, async (trx) => {
      // The password checked out against what was read before; the token is issued only if it still holds.
      const now = Date.now()
      let current = await lockForSession(trx, found.id)
      if (!current || current.user.password_hash !== found.password_hash) return wrongCredentials()
      if (bannedAt(current.user, now)) return banned(current.user)
      // A ban whose end has come is lifted by the sign-in itself, so that its tokens work at once.
      if (current.user.status === 'BANNED' && await liftEndedBan(trx, found.id, now, cause.base)) current = await lockForSession(trx, found.id)
      if (!current) return wrongCredentials()
      const user = credentialsOf(current.user)
      // Thrown, not returned: a refused sign-in undoes what its check wrote (a lifted ban).
      const refused = admit(user)
      if (refused) throw refused
      if (rehashed !== undefined) await replacePasswordHash(trx, found.id, found.password_hash, rehashed)
      return this.startSession(trx, user, current.sessions, client, now, cause)
    })
    if (issued instanceof DomainError) throw issued
    return issued
  }

  /**
   * A session for an address and the sign-in code mailed to it (POST /auth/email-codes): as a password login, but
   * proved by the code, which marks the address verified. A wrong, used or expired code is INVALID_CREDENTIALS, as
   * a wrong password is, and counts against the same limits; five wrong codes kill it.
   */
  loginByCode(email: string, code: string, client: ClientInfo, cause: Cause, admit: Admit = admitAll): Promise<Issued> {
    return this.counted(this.checkCode(email, code, client, cause, admit))
  }

  private async checkCode(email: string, code: string, client: ClientInfo, cause: Cause, admit: Admit): Promise<Issued> {
    const started = Date.now()
    const target = await findSignInAddress(this.db, email)
    const attempt = await this.guard.attempt(target ? `u${target.user_id}` : `e${foldedKey(email)}`, client.address)
    const guess = await this.codes.reserve(email, 'signin')
    if (!target) return failedCode(started, wrongCredentials())
    let refusal: DomainError | undefined
    const outcome = await guess.checking(() => inTransaction(this.db, async (trx): Promise<Issued | 'wrong' | { banned: number | null }> => {
      const now = Date.now()
      let current = await lockForSession(trx, target.user_id)
      if (!current) return 'wrong'
      if ((await this.codes.spend(trx, target.id, 'signin', code, now)) === undefined) return 'wrong'
      if (bannedAt(current.user, now)) return { banned: current.user.banned_until }
      if (current.user.status === 'BANNED' && await liftEndedBan(trx, target.user_id, now, cause.base)) current = await lockForSession(trx, target.user_id)
      if (!current) return 'wrong'
      // Thrown, not returned: a refused sign-in undoes what its check wrote (the spent code, a lifted ban).
      refusal = admit(credentialsOf(current.user))
      if (refusal) throw refusal
      await deleteEmailTokens(trx, target.id, 'signin')
      // Reading the code proved the address (read again under the lock: a token may have verified it meanwhile).
      await verifyAddress(trx, target.user_id, target.id, now, asActor(cause, { type: 'user', id: target.user_id }))
      return this.startSession(trx, credentialsOf(current.user), current.sessions, client, now, cause)
    })).catch(async (err: unknown) => {
      // The code was right: the refusal is no failed attempt (checking gave the guess back).
      if (err === refusal) await attempt.succeeded()
      throw err
    })
    if (outcome === 'wrong') return failedCode(started, wrongCredentials())
    await attempt.succeeded()
    await guess.succeeded()
    if ('banned' in outcome) throw banned({ banned_until: outcome.banned })
    return outcome
  }

  /**
   * A new session for a user whose credentials checked out, its row locked with its `sessions`: room made, tokens
   * issued, the event.
   */
  private async startSession(trx: Trx, user: UserRow, sessions: HeldSession[], client: ClientInfo, now: number, cause: Cause): Promise<Issued> {
    const signedIn = asActor(cause, { type: 'user', id: user.id })
    await makeRoom(trx, sessions, now, this.options.maxSessionsPerUser, signedIn)
    const endsAt = now + this.options.sessionMaxAgeSeconds * 1000
    const values = {
      user_id: user.id, created_at: now, last_used_at: now, client: (client.agent ?? '').slice(0, MAX_CLIENT),
      expires_at: Math.min(now + this.options.refreshTtlSeconds * 1000, endsAt)
    }
    const sessionId = await insertSession(trx, { ...values, ends_at: endsAt })
    const issued = await this.issue(trx, user, { id: sessionId, ...values }, now)
    await recordEvent(trx, signedIn, 'session.created', user.id, presentSession(issued.session, cause.base, null))
    return issued
  }

  /** `login.failed`: a wrong password for an existing account, in a transaction of its own, after the answer. */
  private recordFailure(userId: number, email: string, client: ClientInfo, cause: Cause): void {
    const data = { email, client: (client.agent ?? '').slice(0, MAX_CLIENT) }
    inTransaction(this.db, (trx) => recordEvent(trx, cause, 'login.failed', userId, data))
      .catch((err: unknown) => (this.options.unrecorded ?? (() => {}))(err))
  }

  /**
   * A new pair for a refresh token, which is spent. A spent one presented again is a replay: the whole session
   * ends (committed before the answer), REFRESH_TOKEN_REUSED. Unknown, expired or revoked: INVALID_GRANT.
   */
  async refresh(refreshToken: string, cause: Cause): Promise<Issued> {
    if (!isTokenShaped(refreshToken)) throw invalidGrant()
    const hash = tokenHash(refreshToken)
    // Its user is learnt first, so that the user row is locked before the token's row, in the order every
    // revocation takes them.
    const seen = await findRefresh(this.db, hash)
    const outcome = seen ? await this.rotate(seen, cause) : 'invalid'
    if (outcome === 'reused') throw new Unauthenticated('This refresh token was used already: its session has ended', 'REFRESH_TOKEN_REUSED')
    if (outcome === 'invalid') throw invalidGrant()
    return outcome
  }

  /** The transaction of a refresh: the user locked, the token spent, its session renewed and a new pair issued. */
  private rotate(seen: RefreshRow, cause: Cause): Promise<Issued | 'invalid' | 'reused'> {
    return inTransaction(this.db, async (trx): Promise<Issued | 'invalid' | 'reused'> => {
      const now = Date.now()
      const user = await lockCredentials(trx, seen.session.user_id)
      if (!user || user.status !== 'ACTIVE') return 'invalid'
      // Spent under the user's lock (an expired one too, without renewing its session), and the session renewed in the
      // same statement. What was read before holds if the spend takes: the session has one live refresh token, this
      // one, so nothing renewed the session meanwhile, and a revocation would have taken the token with it.
      const expired = seen.expires_at <= now || seen.session.expires_at <= now || seen.ends_at <= now
      const expiresAt = Math.min(now + this.options.refreshTtlSeconds * 1000, seen.ends_at)
      const spent = seen.used_at === null &&
        (expired ? await spendRefresh(trx, seen.id, now) : await spendAndRenew(trx, seen.id, seen.session.id, now, expiresAt))
      if (!spent) {
        // Spent before (a replay) or gone with its session (revoked meanwhile): told apart on this path alone.
        if (seen.used_at === null && !(await refreshSpent(trx, seen.id))) return 'invalid'
        await endSession(trx, user.id, seen.session.id, cause, 'replay_detected')
        return 'reused'
      }
      if (expired) return 'invalid'
      return this.issue(trx, credentialsOf(user), { ...seen.session, last_used_at: now, expires_at: expiresAt }, now)
    })
  }

  /** Ends the caller's session (a token from before sessions is revoked alone). */
  async logout(caller: Caller, cause: Cause): Promise<void> {
    await inTransaction(this.db, async (trx) => {
      if (caller.session_id === null) await deleteToken(trx, caller.tokenHash)
      else await endSession(trx, caller.id, caller.session_id, cause, 'signed_out')
    })
  }

  /** Ends the session a live refresh token belongs to; a spent, expired or unknown one ends nothing. */
  async logoutByRefresh(refreshToken: string, cause: Cause): Promise<void> {
    if (!isTokenShaped(refreshToken)) return
    const seen = await findRefresh(this.db, tokenHash(refreshToken))
    if (!seen || seen.used_at !== null || seen.expires_at <= Date.now()) return
    await inTransaction(this.db, async (trx) => {
      await lockUser(trx, seen.session.user_id)
      await endSession(trx, seen.session.user_id, seen.session.id, cause, 'signed_out')
    })
  }

  async list(userId: number, afterId: number, limit: number): Promise<SessionRow[]> {
    return pageOfUser(this.db, userId, afterId, await listSessions(this.db, userId, Date.now(), afterId, limit))
  }

  /** Ends one session: its access and refresh tokens stop working at once. */
  async end(userId: number, sessionId: number, cause: Cause): Promise<void> {
    await inTransaction(this.db, async (trx) => {
      await lockUser(trx, userId)
      if (!(await endSession(trx, userId, sessionId, cause, 'revoked'))) throw new NotFound('SESSION_NOT_FOUND', `User ${userId} has no session with id ${sessionId}`)
    })
  }

  /** Ends every session of the user, the caller's included. */
  async endAll(userId: number, cause: Cause): Promise<void> {
    await inTransaction(this.db, async (trx) => {
      await lockUser(trx, userId)
      await endSessions(trx, userId, cause, 'revoked')
    })
  }

  /**
   * An access token and a refresh token for a session, both ending no later than the session itself. The user and
   * the session are as the transaction left them (read under its locks and written by it): nothing is read again.
   */
  private async issue(trx: Trx, user: UserRow, session: SessionRow, now: number): Promise<Issued> {
    const access = newToken()
    const refresh = newToken()
    const expiresAt = Math.min(now + this.options.accessTtlSeconds * 1000, session.expires_at)
    await insertToken(trx, user.id, session.id, access.hash, now, expiresAt)
    await insertRefresh(trx, session.id, refresh.hash, now, session.expires_at)
    return { token: access.token, expiresAt, refreshToken: refresh.token, refreshExpiresAt: session.expires_at, session, user }
  }
}

/** The user as answers show it, without the password hash it was read with. */
function credentialsOf(row: UserRow & { password_hash: string }): UserRow {
  const { password_hash: _hash, ...user } = row
  return user
}
