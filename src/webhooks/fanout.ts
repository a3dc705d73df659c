import type { EventType } from '../../schemas/event.js'
import type { Trx } from '../database/index.js'
import { maskErasing } from '../accounts/erasure.js'
import { EVENT_COLUMNS, presentEvent } from '../events/present.js'
import type { Sequenced } from '../events/sequencer.js'
import { covers } from '../events/types.js'
import { enqueue, type NewMessage } from '../outbox/repository.js'
import { subscribers } from './repository.js'

/** A webhook's subscription, as stored: its patterns. */
export const patternsOf = (events: string): string[] => JSON.parse(events) as string[]

/**
 * Writes a delivery for each event placed in the feed and each enabled webhook subscribed to its type, in the
 * sequencing transaction and in feed order: a webhook's deliveries follow the feed, and an event placed is an event
 * whose deliveries exist. Each holds the event as it is presented, and the event's id (`webhook-id`). Resolves to
 * whether it wrote any.
 */
export async function fanOut(trx: Trx, placed: Sequenced[]): Promise<boolean> {
  const hooks = (await subscribers(trx)).map((h) => ({ id: h.id, patterns: patternsOf(h.events) }))
  if (hooks.length === 0) return false
  const wanted = (type: EventType) => hooks.filter((h) => h.patterns.some((p) => covers(p, type)))
  const matched = placed.filter((e) => wanted(e.type).length > 0)
  if (matched.length === 0) return false
  const rows = await maskErasing(trx, await trx.selectFrom('events').select(EVENT_COLUMNS).where('id', 'in', matched.map((e) => e.id)).execute())
  const byId = new Map(rows.map((r) => [r.id, r]))
  const messages: NewMessage[] = []
  for (const event of matched) {
    const row = byId.get(event.id)
    if (!row) continue
    const data = JSON.stringify(presentEvent(row))
    for (const hook of wanted(event.type)) {
      messages.push({ kind: 'webhook', template: row.type, recipient: '', data, webhook_id: hook.id, event_id: row.public_id })
    }
  }
  await enqueue(trx, messages, Date.now())
  return messages.length > 0
}
