import { randomBytes } from 'node:crypto'
import type { Db } from '../database/index.js'
import { inTransaction } from '../database/transaction.js'
import { DeliveryFailure, type Kind, type Lane } from '../outbox/kind.js'
import { claimRows, dueIds, type OutboxRow } from '../outbox/repository.js'
import { mailOf, render } from './templates.js'
import type { MailTransport } from './transports.js'

export interface MailOptions {
  /** Mails taken per claim, shared out among the lanes. */
  batch: number
  /** How long a claim holds a mail before another instance may take it (longer than any SMTP timeout). */
  leaseMs: number
  /** The first retry's delay; each further one doubles, up to retryMaxMs. */
  retryBaseMs: number
  retryMaxMs: number
  /** A mail still failing this long after it was written is given up. */
  giveUpAfterMs: number
}

export const MAIL_DEFAULTS: MailOptions = {
  batch: 50, leaseMs: 120_000, retryBaseMs: 1000, retryMaxMs: 300_000, giveUpAfterMs: 86_400_000
}

/**
 * Mail as a kind of the outbox: due mails are claimed in batches (SKIP LOCKED: one instance per mail) and shared
 * out among the lanes, each rendered and handed to the transport. A mail that no longer renders (written by a
 * version that does not know it, or damaged) is given up: no delivery could ever succeed.
 */
export class MailKind implements Kind<null> {
  readonly name = 'mail'
  readonly dropsData = true
  readonly retry
  private readonly options: MailOptions

  constructor(readonly transport: MailTransport, options: Partial<MailOptions> = {}) {
    this.options = { ...MAIL_DEFAULTS, ...options }
    this.retry = { baseMs: this.options.retryBaseMs, maxMs: this.options.retryMaxMs, giveUpAfterMs: this.options.giveUpAfterMs }
  }

  async claim(db: Db, now: number, lanes: number): Promise<Lane<null>[]> {
    const claim = randomBytes(12).toString('base64url')
    const rows = await inTransaction(db, async (trx) => claimRows(trx, await dueIds(trx, 'mail', now, this.options.batch), claim, now + this.options.leaseMs))
    const out: Lane<null>[] = []
    for (const [i, row] of rows.entries()) {
      const lane = out[i % lanes] ?? (out[i % lanes] = { claim, rows: [], context: null })
      lane.rows.push(row)
    }
    return out
  }

  async send(row: OutboxRow): Promise<null> {
    const mail = mailOf(row.template, row.recipient, row.data)
    if (!mail) throw new DeliveryFailure('the outbox row is not a mail this version can render', true)
    await this.transport.send({ to: row.recipient, ...render(mail) })
    return null
  }

  close(): void {
    this.transport.close()
  }
}
