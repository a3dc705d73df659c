import { maskErasing } from '../accounts/erasure.js'
import { pageOfUser } from '../accounts/users.js'
import { InvalidInput } from '../common/errors.js'
import type { Db } from '../database/index.js'
import { idOf, listActivity, listFeed, positionOf, type EventRow, type TypeFilter } from './repository.js'

const unknownAfter = () =>
  new InvalidInput('after names no event in this feed: a purged one (past EVENT_RETENTION_SECONDS), or another\'s', [
    { path: '/after', in: 'query', message: 'names no event in this feed' }
  ], 'INVALID_CURSOR')

/**
 * Reading events: the feed of every event in the order they became visible (an admin's), and a user's own activity,
 * newest first. The feed places what committed before it reads (`catchUp`), so a reader sees every change made
 * before its request.
 */
export class FeedService {
  constructor(private readonly db: Db, private readonly sequencer: { catchUp(): Promise<void> }) {}

  async feed(filter: { types: TypeFilter; userId?: number | undefined }, after: string | undefined, limit: number): Promise<EventRow[]> {
    await this.sequencer.catchUp()
    const from = after === undefined ? 0 : await positionOf(this.db, after)
    if (from === undefined) throw unknownAfter()
    // Events of a user deleted moments ago show erased before their batch is.
    return maskErasing(this.db, await listFeed(this.db, filter, from, limit))
  }

  async activity(userId: number, types: TypeFilter, after: string | undefined, limit: number): Promise<EventRow[]> {
    const before = after === undefined ? 0 : await idOf(this.db, userId, after)
    if (before === undefined) throw unknownAfter()
    return maskErasing(this.db, await pageOfUser(this.db, userId, before, await listActivity(this.db, userId, types, before, limit)))
  }
}
