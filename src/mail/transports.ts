import nodemailer from 'nodemailer'
import type { Rendered } from './templates.js'

/** A rendered mail to one recipient. */
export type OutgoingMail = Rendered & { to: string }

/** Why a delivery failed, and whether trying again could help. */
export class DeliveryFailure extends Error {
  constructor(message: string, readonly permanent: boolean) {
    super(message)
    this.name = 'DeliveryFailure'
  }
}

/** Where mail goes: an SMTP server, or the log. */
export interface MailTransport {
  readonly name: string
  /** Resolves once the mail is accepted; rejects with a DeliveryFailure. */
  send(mail: OutgoingMail): Promise<void>
  close(): void
}

/** Fails fast on a server that is away or hung, so that the outbox retries it rather than waiting minutes. */
const SMTP_TIMEOUTS = { connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000, dnsTimeout: 10_000 }

/**
 * Delivery over SMTP with nodemailer, one connection per mail (no pool to go stale while the server restarts). A
 * 5xx answer is permanent (the server refuses this mail for good); a 4xx answer, a refused connection, a timeout
 * or a broken session is temporary.
 */
export function smtpTransport(url: string, from: string): MailTransport {
  const transporter = nodemailer.createTransport({ url, ...SMTP_TIMEOUTS }, { from })
  return {
    name: 'smtp',
    async send(mail) {
      try {
        await transporter.sendMail({ to: mail.to, subject: mail.subject, text: mail.text, html: mail.html })
      } catch (err) {
        const code = (err as { responseCode?: unknown }).responseCode
        const permanent = typeof code === 'number' && code >= 500 && code < 600
        throw new DeliveryFailure((err as Error).message.slice(0, 500), permanent)
      }
    },
    close: () => transporter.close()
  }
}

export interface MailLog {
  info(details: object, message: string): void
}

/**
 * Without SMTP_URL, each mail is written to the log, token included: the whole flow can be followed on one machine
 * with nothing else installed. Not for a service whose log others read.
 */
export function logTransport(log: MailLog): MailTransport {
  return {
    name: 'log',
    async send(mail) {
      log.info({ mail: { to: mail.to, subject: mail.subject, text: mail.text } }, 'mail (SMTP_URL is unset: written to the log, not sent)')
    },
    close() {}
  }
}
