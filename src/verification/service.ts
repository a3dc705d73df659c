import type { AddressMail } from '../accounts/address-mail.js'
import { deleteUserEmailTokens } from '../accounts/address-tokens.js'
import {
  claimingStale, findEmail, insertEmail, lockAddress, lockEmail, makePrimary, removeEmail, unverifyAddress, verifyAddress, type EmailRow
} from '../accounts/addresses.js'
import { CODE_TRIES, failedCode, type EmailCodes } from '../accounts/codes.js'
import { isTokenShaped, NO_PASSWORD, tokenHash, type Passwords } from '../accounts/secrets.js'
import { presentEmail, presentUser } from '../accounts/present.js'
import { endSessions } from '../accounts/sessions.js'
import { lockUser, lockUserRow, updateUserRow, type UserRow } from '../accounts/users.js'
import { EmailAlreadyVerified, emailNotFound, InvalidToken, NotFound, RateLimited } from '../common/errors.js'
import { addressLookupKey, sameMailbox } from '../common/text.js'
import type { Db, Trx } from '../database/index.js'
import { inTransaction, written } from '../database/transaction.js'
import { changedFields, recordEvent, type Cause } from '../events/record.js'
import type { LoginGuard } from '../limits/login-guard.js'
import {
  addRevertTries, deleteRevertsSince, deleteUserTokens, findAddress, findEmailToken, findResetTarget, findRevert,
  lastTokenAt, liveReverts, lockUserAddresses, passwordSetAt
} from './repository.js'

/** What proves a mail was read: its token, or its address and the code it carried. */
export type MailedProof = { token: string } | { email: string; code: string }

export interface VerificationOptions {
  /** Least time between two verification mails to one address (VERIFICATION_RESEND_SECONDS). */
  resendSeconds: number
  /** Every reset request answers no sooner than this after it arrived, whether or not a mail was written. */
  resetAnswerMs: number
  /** A revert re-adding its address takes it from another user's unverified claim this old (UNVERIFIED_CLAIM_SECONDS). */
  claimSeconds: number
}

/** A revert of a primary change, as read to be used. */
interface Revert { id: number; user_id: number; address: string; created_at: number; expires_at: number }

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Proving an address (verification tokens) and recovering an account through one (password resets). The tokens
 * and the mail that carries them are written by AddressMail; this service decides when one may be sent and what
 * one proves when it comes back.
 */
export class VerificationService {
  constructor(
    private readonly db: Db,
    private readonly passwords: Passwords,
    private readonly mail: AddressMail,
    private readonly guard: LoginGuard,
    private readonly codes: EmailCodes,
    private readonly options: VerificationOptions
  ) {}

  /**
   * Mails a new verification token to an unverified address: EMAIL_ALREADY_VERIFIED when verified, RATE_LIMITED
   * within VERIFICATION_RESEND_SECONDS of the last verification mail to it (those of sign-up, adding and replacing
   * included). The user row is locked first, so two resends at once send one mail. Counted against the client's
   * MAIL_MAX_PER_CLIENT (`client` null: an admin's request).
   */
  async resend(userId: number, emailId: number, client: string | null): Promise<{ row: EmailRow; expiresAt: number }> {
    await this.mail.allow(client)
    // The address as it stands, for its mail slot; read again under the lock, where a missing one is answered.
    const current = await findEmail(this.db, userId, emailId)
    const sent = await this.mail.withSlot(userId, current?.address ?? '', (slot) => inTransaction(this.db, async (trx) => {
      await lockUser(trx, userId)
      const row = await lockEmail(trx, userId, { id: emailId })
      if (!row) throw emailNotFound(`User ${userId} has no address with id ${emailId}`)
      if (row.verified_at !== null) throw new EmailAlreadyVerified()
      // Replaced between the read and the lock: the slot taken was the former address's, not this one's.
      if (current && !sameMailbox(row.address, current.address)) {
        throw new RateLimited('The address changed while its mail was being prepared; try again', 1000)
      }
      const now = Date.now()
      const last = await lastTokenAt(trx, row.id, 'verify')
      const wait = last === undefined ? 0 : last + this.options.resendSeconds * 1000 - now
      const mailed = wait > 0 ? { waitMs: wait } : await this.mail.verification(trx, row, now, slot)
      if ('waitMs' in mailed) throw new RateLimited(`A verification mail was sent to this address less than ${this.options.resendSeconds} s ago`, mailed.waitMs)
      return { row, expiresAt: mailed.expiresAt }
    }))
    this.mail.committed()
    return sent
  }

  /**
   * Verifies the address a verification token (or code) was mailed to. The token is spent, with every other
   * verification token of the address. Unknown, spent, expired or dead with its address: INVALID_TOKEN. A code is
   * tried as `codeProof` says.
   */
  async confirm(proof: MailedProof, client: string, cause: Cause): Promise<EmailRow> {
    if ('email' in proof) {
      return this.byCode(proof, 'verify', client, async () => undefined,
        (trx, target, now) => verifyAddress(trx, target.user_id, target.id, now, cause))
    }
    const hash = this.hashOf(proof.token)
    const seen = await findEmailToken(this.db, hash, 'verify')
    if (!seen) throw new InvalidToken()
    return inTransaction(this.db, async (trx) => {
      await this.lockOwner(trx, seen.user_id)
      // Read again under the user's lock: a concurrent confirm, change or removal has either happened or waits.
      const row = await findEmailToken(trx, hash, 'verify')
      const now = Date.now()
      if (!row || row.expires_at <= now) throw new InvalidToken()
      return verifyAddress(trx, row.user_id, row.email_id, now, cause)
    })
  }

  /**
   * Asks for a password reset mail to an address. The answer is the same, and comes after the same time
   * (resetAnswerMs at least), whether or not a mail is written: the address may belong to nobody, be an unverified
   * secondary address, or belong to a banned user, and none of that is told. Limited per address (one request per
   * VERIFICATION_RESEND_SECONDS) and per client address; both limits apply to every address alike.
   */
  async requestReset(address: string, client: string): Promise<void> {
    await this.mailAnswered(address, client, 'reset-addr', 'A password reset', (trx, target) => this.mail.reset(trx, target, Date.now()))
  }

  /**
   * Asks for a sign-in code to an address: as a reset request, the same answer after the same time whatever the
   * address, a code mailed only to a primary or verified address of an active user, the same limits.
   */
  async requestSignInCode(address: string, client: string): Promise<void> {
    await this.mailAnswered(address, client, 'signin-addr', 'A sign-in code', (trx, target) => this.mail.signIn(trx, target, Date.now()))
  }

  /**
   * Mails `write` to a primary or verified address of an active user, if the address is one, and answers no sooner
   * than resetAnswerMs after the request arrived either way. One request per address per VERIFICATION_RESEND_SECONDS
   * (`limit`), and the client's mail limit: a request refused by one counts only there.
   */
  private async mailAnswered(
    address: string, client: string, limit: string, what: string,
    write: (trx: Trx, target: { id: number; user_id: number; address: string }) => Promise<unknown>
  ): Promise<void> {
    const started = Date.now()
    const key = addressLookupKey(address) ?? address
    await this.mail.allow(client, {
      key: `${limit}:${key}`, max: 1, windowMs: this.options.resendSeconds * 1000,
      detail: `${what} for this address was asked less than ${this.options.resendSeconds} s ago`
    })
    const target = await findResetTarget(this.db, address)
    if (target) {
      await inTransaction(this.db, async (trx) => {
        await lockUser(trx, target.user_id)
        await write(trx, target)
      })
      this.mail.committed()
    }
    const left = started + this.options.resetAnswerMs - Date.now()
    if (left > 0) await sleep(left)
  }

  /**
   * Sets a new password with a reset token: the token is spent with every other reset token of the user, the
   * address it was mailed to is verified (reading the mail proved it), and every session of the user ends.
   * Failed tokens count against the client's limit of failed checks.
   */
  async confirmReset(proof: MailedProof, password: string, client: string, cause: Cause): Promise<void> {
    if ('email' in proof) {
      // The new password is hashed once the guess is allowed, before the transaction (no lock held while it hashes).
      await this.byCode(proof, 'reset', client, () => this.passwords.hash(password),
        (trx, target, now, before, passwordHash) => this.reset(trx, before, { user_id: target.user_id, email_id: target.id }, passwordHash, now, cause))
      return
    }
    const attempt = await this.guard.attempt(null, client)
    const hash = this.hashOf(proof.token)
    const seen = await findEmailToken(this.db, hash, 'reset')
    if (!seen || seen.expires_at <= Date.now()) throw new InvalidToken()
    await attempt.succeeded()
    const passwordHash = await this.passwords.hash(password)
    await inTransaction(this.db, async (trx) => {
      const before = await this.lockOwner(trx, seen.user_id)
      const row = await findEmailToken(trx, hash, 'reset')
      const now = Date.now()
      if (!row || row.expires_at <= now) throw new InvalidToken()
      await this.reset(trx, before, row, passwordHash, now, cause)
    })
  }

  /**
   * The new password set: every reset token of the user spent, the address the proof was mailed to verified
   * (reading the mail proved it), every session of the user ended.
   */
  private async reset(
    trx: Trx, before: UserRow, proved: { user_id: number; email_id: number }, passwordHash: string, now: number, cause: Cause
  ): Promise<void> {
    await deleteUserTokens(trx, proved.user_id, 'reset')
    await updateUserRow(trx, proved.user_id, { password_hash: passwordHash, password_set_at: now, updated_at: now })
    const after = presentUser({ ...before, version: before.version + 1, updated_at: now }, cause.base)
    await recordEvent(trx, cause, 'password.reset', proved.user_id, after, changedFields(presentUser(before, cause.base), after))
    await verifyAddress(trx, proved.user_id, proved.email_id, now, cause)
    await endSessions(trx, proved.user_id, cause, 'password_reset')
  }

  /**
   * A change an address and a code prove: the code is tried against the address's live codes for the purpose
   * (codes.ts: five wrong tries kill it), under the user's lock; `apply` runs in the same transaction when it
   * matches. A wrong code is INVALID_TOKEN after its try was committed, and counts against the client's limit of
   * failed checks, as a wrong password does; it answers no sooner than CODE_FAILURE_MS after the request, so that
   * an address nobody has answers as late as a known one. `prepare` runs once the guess is allowed, outside the
   * transaction.
   */
  private async byCode<P, T>(
    proof: { email: string; code: string }, purpose: 'verify' | 'reset', client: string, prepare: () => Promise<P>,
    apply: (trx: Trx, target: { id: number; user_id: number }, now: number, before: UserRow, prepared: P) => Promise<T>
  ): Promise<T> {
    const started = Date.now()
    const attempt = await this.guard.attempt(null, client)
    const guess = await this.codes.reserve(proof.email, purpose)
    const target = await findAddress(this.db, proof.email)
    if (!target) return failedCode(started, new InvalidToken())
    const outcome = await guess.checking(async () => {
      const prepared = await prepare()
      return inTransaction(this.db, async (trx) => {
        const before = await this.lockOwner(trx, target.user_id)
        const now = Date.now()
        if ((await this.codes.spend(trx, target.id, purpose, proof.code, now)) === undefined) return { wrong: true } as const
        return { wrong: false, result: await apply(trx, target, now, before, prepared) } as const
      })
    })
    if (outcome.wrong) return failedCode(started, new InvalidToken())
    await attempt.succeeded()
    await guess.succeeded()
    return outcome.result
  }

  /**
   * Takes a change of primary back, with the token or the code of the revert mailed to the former primary: the
   * account as its owner had it before the change (restore). Wrong tokens and codes are INVALID_TOKEN and count as
   * codes do (byCode).
   */
  async revert(proof: MailedProof, client: string, cause: Cause): Promise<void> {
    if ('email' in proof) return this.revertByCode(proof, client, cause)
    const attempt = await this.guard.attempt(null, client)
    const hash = this.hashOf(proof.token)
    const seen = await findRevert(this.db, hash)
    if (!seen || seen.expires_at <= Date.now()) throw new InvalidToken()
    await attempt.succeeded()
    await inTransaction(this.db, async (trx) => {
      await this.lockOwner(trx, seen.user_id)
      const row = await findRevert(trx, hash)
      const now = Date.now()
      if (!row || row.expires_at <= now) throw new InvalidToken()
      await this.restore(trx, row, now, cause)
    })
  }

  /**
   * A revert by its address and code. Reverts are bound to the address's text, and several users' may be live for
   * one address (it changed hands): each such user is locked, in id order, and the code tried against them all.
   */
  private async revertByCode(proof: { email: string; code: string }, client: string, cause: Cause): Promise<void> {
    const started = Date.now()
    const attempt = await this.guard.attempt(null, client)
    const guess = await this.codes.reserve(proof.email, 'revert')
    const key = addressLookupKey(proof.email)
    const owners = key === undefined ? [] : [...new Set((await liveReverts(this.db, key, started, CODE_TRIES)).map((r) => r.user_id))]
    if (key === undefined || owners.length === 0) return failedCode(started, new InvalidToken())
    const wrong = await guess.checking(() => inTransaction(this.db, async (trx) => {
      for (const owner of owners) await this.lockOwner(trx, owner)
      const now = Date.now()
      const live = await liveReverts(trx, key, now, CODE_TRIES)
      const hit = this.codes.match(live, key, 'revert', proof.code)
      if (!hit) {
        await addRevertTries(trx, live.map((r) => r.id))
        return true
      }
      await this.restore(trx, hit, now, cause)
      return false
    }))
    if (wrong) return failedCode(started, new InvalidToken())
    await attempt.succeeded()
    await guess.succeeded()
  }

  /**
   * The revert applied, under its user's lock (revert): the account as its owner had it before the change. The
   * former primary is its verified primary again (re-added if it was removed; it was held for the user meanwhile);
   * every address set since the change is removed, and every one verified since loses its mark, as does the address
   * that had replaced the former primary, so that whoever made the change keeps no way to prove an address of the
   * account. A password set since no longer signs in; every mailed token and code is spent, with the reverts of this
   * change and of later ones; every session ends. Each step writes its event.
   */
  private async restore(trx: Trx, revert: Revert, now: number, cause: Cause): Promise<void> {
    const userId = revert.user_id
    const since = revert.created_at
    const held = await lockAddress(trx, revert.address)
    let target: EmailRow
    if (held?.user_id === userId) {
      target = held
    } else {
      // Removed, or held by someone else: re-added, verified (reading the mail proved it), past MAX_EMAILS_PER_USER if
      // need be, so that filling the account with addresses cannot keep its owner from taking it back.
      const id = await claimingStale(trx, revert.address, userId, now - this.options.claimSeconds * 1000, cause,
        () => insertEmail(trx, userId, revert.address, false, now, true))
      target = written(await findEmail(trx, userId, id), `address ${id}`)
      await recordEvent(trx, cause, 'email.added', userId, presentEmail(target, cause.base))
    }
    target = await verifyAddress(trx, userId, target.id, now, cause)
    const replacing = target.primary_user_id === null ? await makePrimary(trx, target, now, cause) : undefined
    for (const row of await lockUserAddresses(trx, userId)) {
      if (row.id === target.id) continue
      const { claimed_at: claimedAt, ...email } = row
      if (claimedAt !== null && claimedAt >= since) await removeEmail(trx, email, cause)
      else if (row.id === replacing?.id || (row.verified_at !== null && row.verified_at >= since)) await unverifyAddress(trx, email, now, cause)
    }
    await this.voidPasswordSince(trx, userId, since, now, cause)
    await deleteRevertsSince(trx, userId, since)
    await deleteUserEmailTokens(trx, userId)
    await endSessions(trx, userId, cause, 'primary_reverted')
  }

  /** A password set at or after `since` stops signing in (`password.changed`): its setter may be the one reverted. */
  private async voidPasswordSince(trx: Trx, userId: number, since: number, now: number, cause: Cause): Promise<void> {
    const setAt = await passwordSetAt(trx, userId)
    if (setAt === null || setAt === undefined || setAt < since) return
    const before = await lockUserRow(trx, userId)
    await updateUserRow(trx, userId, { password_hash: NO_PASSWORD, password_set_at: now, updated_at: now })
    const after = presentUser({ ...before, version: before.version + 1, updated_at: now }, cause.base)
    await recordEvent(trx, cause, 'password.changed', userId, after, changedFields(presentUser(before, cause.base), after))
  }

  private hashOf(token: string): string {
    if (!isTokenShaped(token)) throw new InvalidToken()
    return tokenHash(token)
  }

  /** Locks the token's user, as it stands; a user deleted meanwhile took its tokens with it. */
  private async lockOwner(trx: Trx, userId: number): Promise<UserRow> {
    try {
      return await lockUserRow(trx, userId)
    } catch (err) {
      if (err instanceof NotFound) throw new InvalidToken()
      throw err
    }
  }
}
