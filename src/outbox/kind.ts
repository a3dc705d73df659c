import type { OutboxKind } from '../../db/types.js'
import type { Db } from '../database/index.js'
import type { OutboxRow } from './repository.js'

/** Why a delivery failed, whether trying again could help, and what the receiver answered (webhooks). */
export class DeliveryFailure extends Error {
  constructor(message: string, readonly permanent: boolean, readonly statusCode: number | null = null) {
    super(message)
    this.name = 'DeliveryFailure'
  }
}

/** How long a kind retries: doubling delays from `baseMs` up to `maxMs`, jittered; given up `giveUpAfterMs` after it was written. */
export interface RetryPolicy {
  baseMs: number
  maxMs: number
  giveUpAfterMs: number
}

/**
 * Messages a run sends one after another (a webhook's, in feed order); lanes are sent side by side. `finish` runs
 * once the lane is done or given back (a webhook's lease released).
 */
export interface Lane<C = unknown> {
  claim: string
  rows: OutboxRow[]
  context: C
  finish?: () => Promise<void>
}

/** One kind of message of the outbox: how its due messages are claimed, and how one is sent. */
export interface Kind<C = unknown> {
  readonly name: OutboxKind
  readonly retry: RetryPolicy
  /** Its values are dropped once it is sent or given up (a mail's tokens); a webhook delivery keeps its event. */
  readonly dropsData: boolean
  /** Claims due messages into at most `lanes` lanes; none when nothing is due. */
  claim(db: Db, now: number, lanes: number): Promise<Lane<C>[]>
  /**
   * Asked before each message of a lane: whether the lane may go on (a webhook deleted or disabled meanwhile may
   * not); a lane that may not gives its remaining messages back. It may refresh `lane.context`.
   */
  proceed?(lane: Lane<C>): Promise<boolean>
  /** Sends one message: resolves with the receiver's status code (or null), rejects with a DeliveryFailure. */
  send(row: OutboxRow, lane: Lane<C>): Promise<number | null>
  /** Told how each attempt ended, after it was recorded (a webhook's run of failures). */
  settled?(row: OutboxRow, lane: Lane<C>, result: 'delivered' | 'retried' | 'failed', at: number): Promise<void>
  /** Releases what it holds (connections) when the deliverer stops. */
  close(): void
}
