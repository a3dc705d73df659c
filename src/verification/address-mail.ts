import type { EmailTokenPurpose } from '../../db/types.js'
import { newToken } from '../auth/secrets.js'
import type { Trx } from '../database/index.js'
import { enqueueMail } from '../mail/repository.js'
import { tokenLink } from '../mail/templates.js'
import { insertEmailToken, purgeExpiredTokens } from './repository.js'

export interface AddressMailOptions {
  verificationTtlSeconds: number
  resetTtlSeconds: number
  /** APP_LINK_TEMPLATE: mails carry a link built from it as well as the token. */
  linkTemplate: string | undefined
}

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
 */
export class AddressMail {
  constructor(private readonly options: AddressMailOptions, private readonly wake: () => void) {}

  /** A verification mail to a new, replaced or still unverified address; when its token expires. */
  verification(trx: Trx, email: MailedAddress, now: number): Promise<number> {
    return this.token(trx, email, 'verify', now)
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
