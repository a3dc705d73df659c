import { readFileSync } from 'node:fs'
import nodemailer from 'nodemailer'
import { StartupError } from '../common/errors.js'
import { DeliveryFailure } from '../outbox/kind.js'
import { inSpan } from '../tracing/spans.js'
import type { Rendered } from './templates.js'

/** A rendered mail to one recipient. */
export type OutgoingMail = Rendered & { to: string }

/** Where mail goes: an SMTP server, or the log. */
export interface MailTransport {
  readonly name: string
  /** Resolves once the mail is accepted; rejects with a DeliveryFailure. */
  send(mail: OutgoingMail): Promise<void>
  close(): void
}

/** SMTP_CA_FILE cannot be read: the start fails with this one line. */
export class SmtpCaError extends StartupError {
  constructor(path: string, cause: NodeJS.ErrnoException) {
    super(`SMTP_CA_FILE=${path} cannot be read (${cause.code ?? cause.message}): name a PEM file the service may read, or unset it to trust the system's CAs`, { cause })
  }
}

/** The CA certificates of SMTP_CA_FILE, read once at start. */
export function readSmtpCa(path: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (err) {
    throw new SmtpCaError(path, err as NodeJS.ErrnoException)
  }
}

/** A TLS failure that is the server's certificate: nothing a retry changes until an operator acts. */
const UNTRUSTED = /certificate|self[- ]signed|unable to (get|verify)|CERT_|ERR_TLS_CERT/i

/** Fails fast on a server that is away or hung, so that the outbox retries it rather than waiting minutes. */
const SMTP_TIMEOUTS = { connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000, dnsTimeout: 10_000 }

/** SMTP connections kept open to the server, each sending one mail at a time (nodemailer's pool). */
const SMTP_CONNECTIONS = 5

/**
 * Delivery over SMTP with nodemailer's pool: a few connections kept open and reused, so that mail does not pay a
 * connection, a greeting and a TLS handshake each (a connection the server closed is opened again). A
 * 5xx answer is permanent (the server refuses this mail for good); a 4xx answer, a refused connection, a timeout
 * or a broken session is temporary. `smtps://` is TLS from the start, `smtp://` upgrades with STARTTLS when the
 * server offers it; `ca` (SMTP_CA_FILE) is trusted instead of the system's CAs.
 */
export function smtpTransport(url: string, from: string, ca?: string): MailTransport {
  const transporter = nodemailer.createTransport({
    url, pool: true, maxConnections: SMTP_CONNECTIONS, ...SMTP_TIMEOUTS, ...(ca ? { tls: { ca } } : {})
  }, { from })
  const server = new URL(url)
  return {
    name: 'smtp',
    async send(mail) {
      try {
        await inSpan('smtp send', { 'server.address': server.hostname, 'server.port': Number(server.port || (server.protocol === 'smtps:' ? 465 : 587)) },
          () => transporter.sendMail({ to: mail.to, subject: mail.subject, text: mail.text, html: mail.html }))
      } catch (err) {
        const code = (err as { responseCode?: unknown }).responseCode
        const permanent = typeof code === 'number' && code >= 500 && code < 600
        const message = (err as Error).message
        // Still retried (the mail is not lost while an operator fixes it), but said so that it can be fixed.
        const errorCode = (err as { code?: unknown }).code
        if (UNTRUSTED.test(message) || (typeof errorCode === 'string' && UNTRUSTED.test(errorCode))) {
          throw new DeliveryFailure(`TLS: the SMTP server's certificate is not trusted (${message.slice(0, 300)}); ` +
            'set SMTP_CA_FILE to the CA that signs it, or give the relay a certificate the system trusts', false)
        }
        throw new DeliveryFailure(message.slice(0, 500), permanent)
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
