import { randomBytes } from 'node:crypto'
import { Webhook } from 'standardwebhooks'

// Standard Webhooks signatures (https://www.standardwebhooks.com), with the `standardwebhooks` package: the one
// module that knows how a delivery is signed.

/** A new signing secret: `whsec_` and 32 random bytes in base64. */
export const newSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`

/** The headers of one delivery: its id (the event's), its time, and one signature per live secret. */
export function signedHeaders(secrets: string[], id: string, at: Date, payload: string): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': secrets.map((secret) => new Webhook(secret).sign(id, at, payload)).join(' ')
  }
}
