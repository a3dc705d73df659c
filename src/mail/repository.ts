import type { Trx } from '../database/index.js'
import { enqueue } from '../outbox/repository.js'
import type { Mail } from './templates.js'

/** Puts a mail in the outbox, in the transaction of the change that causes it: it is sent if, and only if, that commits. */
export async function enqueueMail(trx: Trx, mail: Mail, now: number): Promise<void> {
  await enqueue(trx, [{ kind: 'mail', template: mail.kind, recipient: mail.to, data: JSON.stringify(mail.data) }], now)
}
