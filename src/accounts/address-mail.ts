import { RateLimited } from '../common/errors.js'
import { foldedKey } from '../common/text.js'
import type { Trx } from '../database/index.js'
import type { Limit, Limits } from '../limits/limits.js'
import { enqueueMail } from '../mail/repository.js'
import { tokenLink } from '../mail/templates.js'
import { insertEmailRevert, insertEmailToken, purgeExpiredAddressTokens, purgeExpiredReverts } from './address-tokens.js'
import type { EmailCodes } from './codes.js'
import { newToken } from './secrets.js'

export interface AddressMailOptions {
  verificationTtlSeconds: number
  resetTtlSeconds: number
  /** How long a former primary may take a primary change back (EMAIL_REVERT_TTL_SECONDS). */
  revertTtlSeconds: number
  /** The 6-digit codes mailed beside tokens, and alone to sign in. */
  codes: EmailCodes
  /** APP_LINK_TEMPLATE: mails carry a link built from it as well as the token. */
  linkTemplate: string | undefined
  /** Least time between two verification mails to one address, whatever caused them (VERIFICATION_RESEND_SECONDS). */
  resendSeconds: number
  /** Requests that cause mail, per client address per window (MAIL_MAX_PER_CLIENT, LOGIN_WINDOW_SECONDS). */
  maxPerClient: number
  clientWindowSeconds: number
}

/** A verification mail written (its token's expiry), or held back because the address had one too recently. */
export type VerificationMail = { expiresAt: number } | { waitMs: number }

/** An address a mail goes to. */
export interface MailedAddress {
  id: number
  user_id: number
  address: string
}

/**
 * A verification mail allowed, or not, to one user's address: decided before the change's transaction, so that a
 * transaction retried or rolled back neither spends the allowance nor finds it spent by itself.
 */
export interface MailSlot {
  key: string
  granted: boolean
  /** When not granted: how long until it would be. */
  waitMs: number
  /** Whether the transaction wrote the mail. */
  used: boolean
}

/**
 * The mail that changes to addresses cause, written in the change's own transaction: a single-use token (256
 * random bits, only its SHA-256 stored) and the outbox row that carries it. Whoever commits the transaction calls
 * `committed()` so that the deliverer looks at once.
 *
 * It is also where mail is limited, so that no path can mail more than the limits allow, however it is reached:
 * - every request that causes mail (sign-up, adding or replacing an address, a primary change, a resend, a reset
 *   request) first counts against its client's MAIL_MAX_PER_CLIENT (`allow`); an admin's requests do not;
 * - a user's address gets at most one verification mail per VERIFICATION_RESEND_SECONDS, whichever path causes it
 *   (`withSlot`): a change that would mail it again sooner is made, and its mail held back until the owner asks for
 *   one. The interval belongs to the user and the address together, so one user's changes never hold back the mail
 *   another user (the address's owner signing up, say) is due; a new user's sign-up always mails.
 */
export class AddressMail {
  constructor(private readonly options: AddressMailOptions, private readonly limits: Limits, private readonly wake: () => void) {}

  /**
   * Counts a request that causes mail against its client's limit (`null`: an admin's request, not counted), together
   * with `others`: past any of them the request is refused (429) and counts only against the limit that refused it.
   */
  async allow(client: string | null, ...others: Limit[]): Promise<void> {
    const limits = client === null ? others : [{
      key: `mail-client:${client}`, max: this.options.maxPerClient, windowMs: this.options.clientWindowSeconds * 1000,
      detail: 'Too many requests for mail from this client; try again later'
    }, ...others]
    if (limits.length) await this.limits.take(limits, 'counted')
  }

  /**
   * Runs a change that may mail a verification to `userId`'s `address`, with the slot for it taken first. The slot
   * is given back when the change fails or wrote no mail.
   */
  async withSlot<T>(userId: number, address: string, change: (slot: MailSlot) => Promise<T>): Promise<T> {
    const key = this.slotKey(userId, address)
    let slot: MailSlot
    try {
      await this.limits.take([{ key, max: 1, windowMs: this.options.resendSeconds * 1000, detail: '' }], 'counted')
      slot = { key, granted: true, waitMs: 0, used: false }
    } catch (err) {
      if (!(err instanceof RateLimited)) throw err
      // Refused: this attempt must not count, or a holder that fails could not give the slot back.
      await this.limits.release(key)
      slot = { key, granted: false, waitMs: err.retryAfterSeconds * 1000, used: false }
    }
    let committed = false
    try {
      const result = await change(slot)
      committed = true
      return result
    } finally {
      if (slot.granted && !(committed && slot.used)) await this.limits.release(key)
    }
  }

  /**
   * A new user's verification mail, committed without a slot (the user did not exist before its transaction): it
   * starts the address's interval all the same. Counted after the fact, so a store that fails only loses the count.
   */
  async sentWithoutSlot(userId: number, address: string): Promise<void> {
    await this.limits.take([{ key: this.slotKey(userId, address), max: 1, windowMs: this.options.resendSeconds * 1000, detail: '' }], 'counted')
      .catch(() => undefined)
  }

  /**
   * A verification mail to a new, replaced or still unverified address, if its slot was granted (`always` for a new
   * user's sign-up); otherwise nothing is written, and how long to wait is returned.
   */
  async verification(trx: Trx, email: MailedAddress, now: number, slot: MailSlot | 'always'): Promise<VerificationMail> {
    if (slot !== 'always') {
      if (!slot.granted) return { waitMs: slot.waitMs }
      slot.used = true
    }
    return { expiresAt: await this.token(trx, email, 'verify', now) }
  }

  /** A password reset mail to an address; when its token expires. */
  reset(trx: Trx, email: MailedAddress, now: number): Promise<number> {
    return this.token(trx, email, 'reset', now)
  }

  /** A sign-in code to an address (its token row is never mailed: the code alone signs in); when the code dies. */
  async signIn(trx: Trx, email: MailedAddress, now: number): Promise<number> {
    const codes = this.options.codes
    const code = codes.newCode()
    const expiresAt = now + codes.ttlMs
    await purgeExpiredAddressTokens(trx, email.id, now)
    await codes.retire(trx, email.id, 'signin')
    await insertEmailToken(trx, {
      hash: newToken().hash, purpose: 'signin', emailId: email.id, userId: email.user_id, now, expiresAt,
      code: { hash: codes.hash(email.id, 'signin', code), expiresAt }
    })
    await enqueueMail(trx, { kind: 'signin-code', to: email.address, data: { address: email.address, code, expires_at: expiresAt } }, now)
    return expiresAt
  }

  /**
   * Tells a former primary address which address is primary now, with a revert (a token and a 6-digit code,
   * EMAIL_REVERT_TTL_SECONDS) that makes it the primary again: its owner can take back a change made by someone
   * holding a session. Only a verified former primary is mailed: one never verified was never shown to be the user's,
   * a revert would hand the account to whoever reads it, and a notice would let anyone mail any address by replacing
   * their primary with it, back and forth.
   */
  async primaryChanged(trx: Trx, former: { user_id: number; address: string; verified_at: number | null }, primary: string, now: number): Promise<void> {
    if (former.verified_at === null) return
    const { token, hash } = newToken()
    const codes = this.options.codes
    const code = codes.newCode()
    const expiresAt = now + this.options.revertTtlSeconds * 1000
    await purgeExpiredReverts(trx, former.user_id, now)
    await insertEmailRevert(trx, {
      userId: former.user_id, address: former.address, hash, codeHash: codes.hash(foldedKey(former.address), 'revert', code), now, expiresAt
    })
    await enqueueMail(trx, {
      kind: 'primary-changed', to: former.address,
      data: { address: former.address, primary, revert: { token, link: tokenLink(this.options.linkTemplate, token, 'revert'), code, expires_at: expiresAt } }
    }, now)
  }

  /** The transaction that wrote mail committed. */
  committed(): void {
    this.wake()
  }

  /** The limit under which a user's address has its verification interval. */
  private slotKey(userId: number, address: string): string {
    return `verify-addr:u${userId}:${foldedKey(address)}`
  }

  private async token(trx: Trx, email: MailedAddress, purpose: 'verify' | 'reset', now: number): Promise<number> {
    const { token, hash } = newToken()
    const ttl = purpose === 'verify' ? this.options.verificationTtlSeconds : this.options.resetTtlSeconds
    const expiresAt = now + ttl * 1000
    const codes = this.options.codes
    const code = codes.newCode()
    const codeExpiresAt = codes.expiresAt(now, expiresAt)
    await purgeExpiredAddressTokens(trx, email.id, now)
    await codes.retire(trx, email.id, purpose)
    await insertEmailToken(trx, {
      hash, purpose, emailId: email.id, userId: email.user_id, now, expiresAt, code: { hash: codes.hash(email.id, purpose, code), expiresAt: codeExpiresAt }
    })
    const data = {
      address: email.address, token, link: tokenLink(this.options.linkTemplate, token, purpose), expires_at: expiresAt, code, code_expires_at: codeExpiresAt
    }
    await enqueueMail(trx, purpose === 'verify' ? { kind: 'verify-address', to: email.address, data } : { kind: 'password-reset', to: email.address, data }, now)
    return expiresAt
  }
}
