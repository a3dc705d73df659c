import type { ImportLine } from '../../schemas/import.js'
import { NO_PASSWORD } from '../accounts/secrets.js'
import { isoTimestamp } from '../common/timestamps.js'
import type { Db } from '../database/index.js'
import type { Snapshot } from '../database/snapshot.js'
import { inTransaction } from '../database/transaction.js'
import { recordEvent, type Cause } from '../events/record.js'
import { presentEmail, presentSession, presentUser } from '../accounts/present.js'
import { presentMetadata, readMetadata } from '../accounts/metadata.js'
import { findUserById } from '../accounts/users.js'
import type { Caller } from '../auth/caller.js'
import { userNotFound } from '../common/errors.js'
import { presentEvent, withoutPrivate } from '../events/present.js'
import { addressesOf, emailsOf, eventsOf, sessionsOf, usersAfter } from './repository.js'

/** A stored metadata part (compact JSON of an object written by accounts/metadata.ts), or an empty one. */
const part = (text: string | null): Record<string, unknown> => text === null ? {} : JSON.parse(text) as Record<string, unknown>

export interface ExportsOptions {
  /** A consistent read of the database for the whole export (database/snapshot.ts). */
  snapshot: () => Promise<Snapshot>
  /** Users read and written per step: the memory an export holds, whatever the number of users. */
  batch: number
  /** Told of the users each step wrote (the metrics), and after the event was written (the sequencer). */
  exported?: (users: number) => void
  wroteEvent?: () => void
}

/**
 * Taking users out: every user, one NDJSON line each in the `roster` import format, read from one snapshot in
 * batches as the reader takes them. A batch is read only when the one before has been taken, so a slow reader
 * slows the reads and never fills the heap.
 */
export class ExportsService {
  constructor(private readonly db: Db, private readonly options: ExportsOptions) {}

  /**
   * The lines, a batch of them per chunk. `users.exported` is written when the export ends, finished or cut short
   * by its reader, with the count of users it wrote.
   */
  async * users(includeHashes: boolean, cause: Cause): AsyncGenerator<string> {
    let count = 0
    try {
      const snapshot = await this.options.snapshot()
      try {
        for (let after = 0; ;) {
          const users = await usersAfter(snapshot.db, after, this.options.batch)
          if (users.length === 0) break
          const emails = await addressesOf(snapshot.db, users.map((u) => u.id))
          const byUser = new Map<number, ImportLine['emails']>()
          for (const e of emails) {
            const list = byUser.get(e.user_id) ?? []
            list.push({ address: e.address, verified: e.verified_at !== null, primary: e.primary_user_id !== null })
            byUser.set(e.user_id, list)
          }
          let chunk = ''
          for (const u of users) {
            const line: ImportLine = {
              external_id: u.external_id,
              name: u.name,
              emails: byUser.get(u.id) ?? [],
              status: u.status,
              role: u.role,
              created_at: isoTimestamp(u.created_at),
              metadata: { public: part(u.public_metadata), private: part(u.private_metadata), unsafe: part(u.unsafe_metadata) }
            }
            if (includeHashes) line.password_hash = u.password_hash === NO_PASSWORD ? null : u.password_hash
            chunk += JSON.stringify(line) + '\n'
          }
          after = users[users.length - 1]!.id
          count += users.length
          this.options.exported?.(users.length)
          yield chunk
        }
      } finally {
        await snapshot.close()
      }
    } finally {
      await inTransaction(this.db, (trx) => recordEvent(trx, cause, 'users.exported', null, { count, password_hashes: includeHashes }))
      this.options.wroteEvent?.()
    }
  }
}

/**
 * Everything held about one user (GET /users/{user_id}/export), as the caller may read it: a plain user never sees
 * `private` metadata. The user, its addresses, sessions and metadata are read before the answer starts (USER_NOT_FOUND
 * can still be told); its events, which may be many, follow a batch at a time as the reader takes them.
 */
export async function userData(db: Db, caller: Caller, userId: number, base: string, batch: number): Promise<AsyncGenerator<string>> {
  const user = await findUserById(db, userId)
  if (!user) throw userNotFound(`id ${userId}`)
  const admin = caller.role === 'admin'
  const [emails, sessions, metadata] = await Promise.all([emailsOf(db, userId), sessionsOf(db, userId, Date.now()), readMetadata(db, userId)])
  const head = JSON.stringify({
    user: presentUser(user, base),
    emails: emails.map((e) => presentEmail(e, base)),
    sessions: sessions.map((s) => presentSession(s, base, caller.session_id)),
    metadata: presentMetadata(userId, metadata.parts, base, admin)
  })
  return (async function * () {
    yield `${head.slice(0, -1)},"events":[`
    let first = true
    for (let after = 0; ;) {
      const rows = await eventsOf(db, userId, after, batch)
      if (rows.length === 0) break
      const shown = rows.map((row) => admin ? presentEvent(row) : withoutPrivate(presentEvent(row)))
      yield (first ? '' : ',') + shown.map((e) => JSON.stringify(e)).join(',')
      first = false
      after = rows[rows.length - 1]!.id
    }
    yield ']}'
  })()
}
