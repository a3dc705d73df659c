import type { EmailTokenPurpose } from '../../db/types.js'
import { newToken } from '../auth/secrets.js'
import type { Trx } from '../database/index.js'
import { addressLookupKey } from '../common/text.js'
import { RateLimited } from '../common/errors.js'
import type { Throttle } from '../limits/throttle.js'
import { enqueueMail } from '../mail/repository.js'
import { tokenLink } from '../mail/templates.js'
import { insertEmailToken, purgeExpiredTokens } from './repository.js'

export interface AddressMailOptions {
  verificationTtlSeconds: number
  resetTtlSeconds: number
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
 * The mail that changes to addresses cause, written in the change's own transaction: a single-use token (256
 * random bits, only its SHA-256 stored) and the outbox row that carries it. Whoever commits the transaction calls
 * `committed()` so that the deliverer looks at once.
 *
 * It is also where mail is limited, so that no path can mail more than the limits allow, however it is reached:
 * - every request that causes mail (sign-up, adding or replacing an address, a primary change, a resend, a reset
 *   request) first counts against its client's MAIL_MAX_PER_CLIENT (`allow`); an admin's requests do not;
 * - an address gets at most one verification mail per VERIFICATION_RESEND_SECONDS, whichever path causes it: a
 *   change that would mail it again sooner is made, and its mail held back (the owner asks for one later).
 */
export class AddressMail {
  constructor(private readonly options: AddressMailOptions, private readonly throttle: Throttle, private readonly wake: () => void) {}

  /** Counts a request that causes mail against its client's limit (429 past it); `null` for an admin's request. */
  async allow(client: string | null): Promise<void> {
    if (client === null) return
    await this.throttle.take({
      key: `mail-client:${client}`, max: this.options.maxPerClient, windowMs: this.options.clientWindowSeconds * 1000,
      detail: 'Too many requests for mail from this client; try again later'
    })
  }

  /**
   * A verification mail to a new, replaced or still unverified address, unless one went to that address within
   * VERIFICATION_RESEND_SECONDS: then nothing is written, and how long to wait is returned.
   */
  async verification(trx: Trx, email: MailedAddress, now: number): Promise<VerificationMail> {
    const key = addressLookupKey(email.address) ?? email.address.toLowerCase()
    try {
      await this.throttle.take({ key: `verify-addr:${key}`, max: 1, windowMs: this.options.resendSeconds * 1000, detail: '' })
    } catch (err) {
      if (err instanceof RateLimited) return { waitMs: err.retryAfterSeconds * 1000 }
      throw err
    }
    return { expiresAt: await this.token(trx, email, 'verify', now) }
  }

  /** A password reset mail to an address; when its token expires. */
  reset(trx: Trx, email: MailedAddress, now: number): Promise<number> {
    return this.token(trx, email, 'reset', now)
  }

  /** Tells a former primary address which address is primary now. */
  async primaryChanged(trx: Trx, former: string, primary: string, now: number): Promise<void> {
    await enqueueMail(trx, { kind: 'primary-changed', to: former, data: { address: former, primary } }, now)
  }

  /** The transaction that wrote mail committed. */
  committed(): void {
    this.wake()
  }

  private async token(trx: Trx, email: MailedAddress, purpose: EmailTokenPurpose, now: number): Promise<number> {
    const { token, hash } = newToken()
    const ttl = purpose === 'verify' ? this.options.verificationTtlSeconds : this.options.resetTtlSeconds
    const expiresAt = now + ttl * 1000
    await purgeExpiredTokens(trx, email.id, now)
    await insertEmailToken(trx, { hash, purpose, emailId: email.id, userId: email.user_id, now, expiresAt })
    const data = { address: email.address, token, link: tokenLink(this.options.linkTemplate, token, purpose), expires_at: expiresAt }
    await enqueueMail(trx, purpose === 'verify' ? { kind: 'verify-address', to: email.address, data } : { kind: 'password-reset', to: email.address, data }, now)
    return expiresAt
  }
}
