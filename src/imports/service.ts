import { setImmediate as yieldToRequests } from 'node:timers/promises'
import type { Updateable } from 'kysely'
import type { ImportConflict, ImportFormat, UsersTable } from '../../db/types.js'
import type { ImportLineError } from '../../schemas/import.js'
import type { Actor, EventType } from '../../schemas/event.js'
import type { UserStatus } from '../../schemas/user.js'
import { heldByRevert } from '../accounts/address-tokens.js'
import { claimingStale, insertEmail, verifyAddress } from '../accounts/addresses.js'
import { changeMetadata } from '../accounts/metadata.js'
import { presentEmail, presentUser } from '../accounts/present.js'
import { insertUser } from '../accounts/removal.js'
import { NO_PASSWORD } from '../accounts/secrets.js'
import { endSessions } from '../accounts/sessions.js'
import { lockUserRow, NO_BAN, touchUser, updateUserRow, type BanColumns, type UserRow } from '../accounts/users.js'
import { DomainError, EmailTaken, importNotFound, PayloadTooLarge } from '../common/errors.js'
import { foldedKey, storedNameKey } from '../common/text.js'
import { isUniqueViolation } from '../database/errors.js'
import type { Db, Trx } from '../database/index.js'
import { inTransaction } from '../database/transaction.js'
import { changedFields, recordEvent, recordEvents, type Cause } from '../events/record.js'
import { LineError, readRecord, type FirebaseParameters, type Incoming } from './formats.js'
import {
  abandonedImports, addressesOf, advance, deleteImport, dropLines, finishedWithLines, finishImport, findImport, holdLease, insertEmailRows, insertErrors,
  insertImport, insertUserRows, keysTaken, linesAfter, listErrors, listImports, markFailed, markReceived, nextClaimable,
  readPasswordHash, releaseLease, stageLines, takeLease, usersNamed, type Counts, type ImportRow
} from './repository.js'
import { records, UnreadableFile, type Layout } from './split.js'

export interface ImportsOptions {
  /** IMPORT_MAX_BYTES: past it the upload is refused (413) and nothing of it is kept. */
  maxBytes: number
  /** A record longer than this fails its line, unread. */
  maxLineBytes: number
  maxEmailsPerUser: number
  /** UNVERIFIED_CLAIM_SECONDS: an unverified claim this old gives an address up, as in the API. */
  claimSeconds: number
  /** METADATA_MAX_BYTES: the most a part of a user's metadata may hold, as in the API. */
  metadataMaxBytes: number
  base: string
  /** Lines applied in one transaction. */
  batch: number
  /** How long a lease holds without being renewed by a batch. */
  leaseMs: number
  /** Told of each line's result once its batch committed (the metrics). */
  counted?: (result: keyof Counts, lines: number) => void
  /** Told after a batch that wrote events committed (the sequencer). */
  wroteEvents?: () => void
}

/** What an import is asked to do, from the request. */
export interface ImportRequest {
  format: ImportFormat
  dryRun: boolean
  onConflict: ImportConflict
  firebase: FirebaseParameters | null
  createdBy: number
  requestId: string
}

type Outcome = { result: 'created' | 'updated' | 'skipped'; events: boolean } | { error: Omit<ImportLineError, 'line'> }
const CREATED: Outcome = { result: 'created', events: true }

/** The ban of a user an import makes `status`: one of the import's own (by its admin, from now, no reason, no end), or none. */
const banOf = (status: UserStatus, now: number, by: Actor): BanColumns =>
  status === 'BANNED' ? { ban_reason: null, banned_until: null, banned_at: now, banned_by_type: by.type, banned_by_id: by.id } : NO_BAN

/** A new user's row as its line gives it. */
const newUserValues = ({ incoming, name, nameKey }: Read, now: number, by: Actor) => ({
  name, name_search: nameKey, password_hash: incoming.passwordHash ?? NO_PASSWORD, status: incoming.status ?? 'ACTIVE' as const,
  role: incoming.role ?? 'user' as const, version: 1, created_at: incoming.createdAt ?? now, updated_at: now, external_id: incoming.externalId,
  ...banOf(incoming.status ?? 'ACTIVE', now, by)
})

/** The user a line created, as written: shown without reading it back. */
const createdRow = (id: number, read: Read, now: number, by: Actor): UserRow => {
  const v = newUserValues(read, now, by)
  return {
    id, name: v.name, email: read.incoming.emails.find((e) => e.primary)!.address, status: v.status, role: v.role,
    version: 1, created_at: v.created_at, updated_at: now, ...banOf(v.status, now, by), deletion_scheduled_at: null, external_id: v.external_id
  }
}

/** A line read and checked on its own, before the database is asked. */
interface Read {
  incoming: Incoming
  name: string
  nameKey: string
  fail: (code: string, detail: string) => Outcome
}

const LAYOUTS: Record<ImportFormat, Layout> = { roster: 'ndjson', auth0: 'array', firebase: 'users-array' }
/** A staged line that could not be a record: its code and detail, after a NUL no JSON text starts with. */
const MARK = '\u0000'
/** Records staged per insert, and the bytes at most in one. */
const STAGE_ROWS = 500
const STAGE_BYTES = 4 * 1024 * 1024
/** An upload that never finished is dropped after this long. */
const ABANDONED_MS = 60 * 60 * 1000

const failure = (code: string, detail: string, email: string | null = null, externalId: string | null = null): Outcome =>
  ({ error: { code, detail: detail.slice(0, 500), email: email?.slice(0, 254) ?? null, external_id: externalId?.slice(0, 255) ?? null } })

/** Counts bytes as they pass: past `max`, PAYLOAD_TOO_LARGE. */
async function * limited(body: AsyncIterable<Buffer | string>, max: number): AsyncGenerator<Buffer> {
  let size = 0
  for await (const chunk of body) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    size += bytes.length
    if (size > max) throw new PayloadTooLarge(`The file is larger than IMPORT_MAX_BYTES (${max} bytes)`)
    yield bytes
  }
}

/**
 * Bringing users in: a file received as a stream and staged line by line, then applied in batches by whichever
 * instance holds the import's lease. A batch, its errors and the count of lines done commit together, so a stopped
 * instance leaves the import exactly after its last batch, and the next holder of the lease goes on from there.
 */
export class ImportsService {
  constructor(private readonly db: Db, private readonly options: ImportsOptions) {}

  /**
   * Receives a file: its records staged as they arrive, and the import made pending once the file has ended. A file
   * that is not of its format as a whole is kept as a failed import with the reason (nothing of it is applied); an
   * upload cut short or too large leaves nothing.
   */
  async receive(request: ImportRequest, body: AsyncIterable<Buffer | string>): Promise<ImportRow> {
    const now = Date.now()
    const id = await insertImport(this.db, {
      status: 'pending', received: 0, format: request.format, dry_run: request.dryRun ? 1 : 0, on_conflict: request.onConflict,
      parameters: request.firebase ? JSON.stringify(request.firebase) : null, created_by: request.createdBy, request_id: request.requestId,
      created_at: now
    })
    let lines = 0
    try {
      let pending: Array<{ line: number; body: string }> = []
      let bytes = 0
      for await (const piece of records(limited(body, this.options.maxBytes), LAYOUTS[request.format], this.options.maxLineBytes)) {
        const text = 'text' in piece ? piece.text : `${MARK}${piece.problem === 'LINE_TOO_LONG' ? 'LINE_TOO_LONG' : 'INVALID_LINE'}${MARK}${piece.detail}`
        pending.push({ line: piece.line, body: text })
        lines = piece.line
        bytes += text.length
        if (pending.length >= STAGE_ROWS || bytes >= STAGE_BYTES) {
          await stageLines(this.db, id, pending)
          pending = []
          bytes = 0
        }
      }
      await stageLines(this.db, id, pending)
      await markReceived(this.db, id, lines)
    } catch (err) {
      if (err instanceof UnreadableFile) {
        await markFailed(this.db, id, err.message, Date.now())
      } else {
        await this.discard(id)
        throw err
      }
    }
    return this.get(id)
  }

  async get(id: number): Promise<ImportRow> {
    const row = await findImport(this.db, id)
    if (!row) throw importNotFound(id)
    return row
  }

  list(before: number, limit: number): Promise<ImportRow[]> {
    return listImports(this.db, before, limit)
  }

  async errors(id: number, after: number, limit: number) {
    await this.get(id)
    return listErrors(this.db, id, after, limit)
  }

  /** Drops an upload that did not finish, its staged lines in batches. */
  private async discard(id: number): Promise<void> {
    try {
      while (await dropLines(this.db, id, 5000) > 0) await yieldToRequests()
      await deleteImport(this.db, id)
    } catch {
      // Left for the background cleanup of abandoned uploads.
    }
  }

  /**
   * Works on one import under `lease`, from where it stands to its end, unless `stopping` says to stop between
   * batches (the lease is then given back). False when no import is waiting.
   */
  async workOne(lease: string, stopping: () => boolean): Promise<boolean> {
    const now = Date.now()
    const next = await nextClaimable(this.db, now)
    if (!next) return false
    if (!(await takeLease(this.db, next.id, lease, now, now + this.options.leaseMs))) return true
    for (;;) {
      if (stopping()) {
        await releaseLease(this.db, next.id, lease)
        return true
      }
      const step = await this.batch(next.id, lease)
      // The embedded driver answers without ever waiting on I/O: requests get their turn between two batches.
      await yieldToRequests()
      if (step === 'lost') return true
      if (step === 'finished') {
        await finishImport(this.db, next.id, lease, Date.now())
        while (!stopping() && await dropLines(this.db, next.id, 5000) > 0) await yieldToRequests()
        return true
      }
    }
  }

  /** What was left behind: uploads that never finished, and the staged lines of finished imports. */
  async cleanup(now: number): Promise<void> {
    for (const { id } of await abandonedImports(this.db, now - ABANDONED_MS)) await this.discard(id)
    for (const { id } of await finishedWithLines(this.db)) {
      await dropLines(this.db, id, 5000)
      await yieldToRequests()
    }
  }

  /**
   * The next lines of the import, applied in one transaction. A line that fails a check fails alone; a write that
   * fails on a race (an address taken meanwhile) undoes the batch, which is then applied a line per transaction.
   */
  private async batch(id: number, lease: string): Promise<'more' | 'finished' | 'lost'> {
    let tally: { counts: Counts; events: boolean } | undefined
    try {
      const step = await inTransaction(this.db, async (trx) => {
        const imp = await holdLease(trx, id, lease)
        if (!imp) return 'lost' as const
        const rows = await linesAfter(trx, id, imp.processed, this.options.batch)
        const parameters = parametersOf(imp)
        if (rows.length === 0) return 'finished' as const
        const counts: Counts = { created: 0, updated: 0, skipped: 0, failed: 0 }
        const errors: ImportLineError[] = []
        let events = false
        const reads = rows.map((row) => ({ line: row.line, read: this.readLine(imp, parameters, row.body) }))
        const created = await this.createFresh(trx, imp, reads)
        for (const { line, read } of reads) {
          const outcome = 'incoming' in read ? created.has(line) ? CREATED : await this.applyRead(trx, imp, read) : read
          if ('error' in outcome) {
            counts.failed++
            errors.push({ line, ...outcome.error })
          } else {
            counts[outcome.result]++
            events ||= outcome.events
          }
        }
        await insertErrors(trx, id, errors)
        await advance(trx, id, rows[rows.length - 1]!.line, counts, Date.now() + this.options.leaseMs)
        tally = { counts, events }
        return 'more' as const
      })
      if (tally) this.told(tally.counts, tally.events)
      return step
    } catch (err) {
      if (!raced(err)) throw err
      return this.oneByOne(id, lease)
    }
  }

  /** The next batch's lines, each in a transaction of its own: a line whose write fails is reported, not retried. */
  private async oneByOne(id: number, lease: string): Promise<'more' | 'finished' | 'lost'> {
    for (let i = 0; i < this.options.batch; i++) {
      let line: { line: number; body: string } | undefined
      let imp: ImportRow | undefined
      let outcome: Outcome
      try {
        outcome = await inTransaction(this.db, async (trx) => {
          imp = await holdLease(trx, id, lease)
          if (!imp) return failure('LOST', '')
          line = (await linesAfter(trx, id, imp.processed, 1))[0]
          if (!line) return failure('DONE', '')
          const applied = await this.applyLine(trx, imp, parametersOf(imp), line.body)
          if (!('error' in applied)) await advance(trx, id, line.line, { created: 0, updated: 0, skipped: 0, failed: 0, [applied.result]: 1 }, Date.now() + this.options.leaseMs)
          return applied
        })
      } catch (err) {
        if (!raced(err) || !line) throw err
        outcome = err instanceof DomainError ? failure(err.code, err.message) : failure('EXTERNAL_ID_TAKEN', 'Another user holds this external_id')
      }
      if (!imp) return 'lost'
      if (!line) return 'finished'
      if ('error' in outcome) {
        if (outcome.error.code === 'LOST') return 'lost'
        const failed = { line: line.line, ...outcome.error }
        const kept = await inTransaction(this.db, async (trx) => {
          if (!(await holdLease(trx, id, lease))) return false
          await insertErrors(trx, id, [failed])
          await advance(trx, id, failed.line, { created: 0, updated: 0, skipped: 0, failed: 1 }, Date.now() + this.options.leaseMs)
          return true
        })
        if (!kept) return 'lost'
        this.told({ created: 0, updated: 0, skipped: 0, failed: 1 }, false)
      } else {
        this.told({ created: 0, updated: 0, skipped: 0, failed: 0, [outcome.result]: 1 }, outcome.events)
      }
    }
    return 'more'
  }

  private told(counts: Counts, events: boolean): void {
    for (const result of ['created', 'updated', 'skipped', 'failed'] as const) if (counts[result]) this.options.counted?.(result, counts[result])
    if (events) this.options.wroteEvents?.()
  }

  /** One line: read, checked against the users already here, then created, updated or skipped (or only counted, dry). */
  private applyLine(trx: Trx, imp: ImportRow, parameters: FirebaseParameters | null, body: string): Promise<Outcome> {
    const read = this.readLine(imp, parameters, body)
    return 'incoming' in read ? this.applyRead(trx, imp, read) : Promise.resolve(read)
  }

  /** A line read and checked on its own (its format, its name, how many addresses): the user it brings, or its failure. */
  private readLine(imp: ImportRow, parameters: FirebaseParameters | null, body: string): Read | Outcome {
    if (body.startsWith(MARK)) {
      const [, code = 'INVALID_LINE', detail = ''] = body.split(MARK)
      return failure(code, detail)
    }
    let incoming: Incoming
    try {
      incoming = readRecord(body, imp.format, parameters, this.options.metadataMaxBytes)
    } catch (err) {
      if (err instanceof LineError) return failure(err.code, err.message, err.email, err.externalId)
      throw err
    }
    const primary = incoming.emails.find((e) => e.primary)!.address
    const external = incoming.externalId
    const fail = (code: string, detail: string) => failure(code, detail, primary, external)
    if (incoming.emails.length > this.options.maxEmailsPerUser) return fail('VALIDATION_FAILED', `A user may have at most ${this.options.maxEmailsPerUser} addresses`)
    const name = incoming.name ?? primary.slice(0, primary.lastIndexOf('@')).slice(0, 200)
    try {
      return { incoming, name, nameKey: storedNameKey(name), fail }
    } catch (err) {
      if (err instanceof DomainError) return fail('VALIDATION_FAILED', err.message)
      throw err
    }
  }

  /** A line read, checked against the users already here, then created, updated or skipped (or only counted, dry). */
  private async applyRead(trx: Trx, imp: ImportRow, read: Read): Promise<Outcome> {
    const { incoming, fail } = read
    const external = incoming.externalId
    const named = await usersNamed(trx, external, incoming.emails.map((e) => e.address))
    const ids = [...new Set(named.map((n) => n.id))]
    if (ids.length > 1) {
      return named.some((n) => n.by === 'external_id')
        ? fail('CONFLICT', 'The line\'s external_id and its addresses belong to different users')
        : fail('EMAIL_TAKEN', 'The line\'s addresses belong to different users')
    }
    const existing = ids[0]
    const now = Date.now()
    const dry = imp.dry_run === 1
    // Asked before writing, in a real run too: met in claimingStale, a held address would undo the whole batch.
    for (const { address } of incoming.emails) {
      if (await heldByRevert(trx, address, existing ?? 0, now)) return fail('EMAIL_TAKEN', `The address ${address} belongs to a user already`)
    }
    const cause = this.causeOf(imp)
    if (existing === undefined) {
      if (!dry) await this.create(trx, read, cause, now)
      return { result: 'created', events: !dry }
    }
    if (imp.on_conflict === 'skip') return { result: 'skipped', events: false }
    return this.update(trx, existing, incoming, dry, cause, now, fail)
  }

  private causeOf(imp: ImportRow): Cause {
    return { actor: { type: 'admin', id: imp.created_by }, requestId: imp.request_id, base: this.options.base }
  }

  /**
   * The batch's new users, written together: the lines (of a real run) that name nobody here, by external id or
   * address, whose addresses no revert holds, and that share no key with another line of the batch. Their users,
   * their addresses and their `user.created` events are written in one statement each. The other lines go their own
   * way, a line at a time. The lines created.
   */
  private async createFresh(trx: Trx, imp: ImportRow, reads: Array<{ line: number; read: Read | Outcome }>): Promise<Set<number>> {
    if (imp.dry_run === 1) return new Set()
    const keysOf = ({ incoming }: Read) => [
      ...(incoming.externalId === null ? [] : [`x:${incoming.externalId}`]), ...incoming.emails.map((e) => `a:${foldedKey(e.address)}`)
    ]
    const lines = reads.flatMap(({ line, read }) => 'incoming' in read ? [{ line, read, keys: [...new Set(keysOf(read))] }] : [])
    const uses = new Map<string, number>()
    for (const { keys } of lines) for (const key of keys) uses.set(key, (uses.get(key) ?? 0) + 1)
    const alone = lines.filter(({ keys }) => keys.every((key) => uses.get(key) === 1))
    if (alone.length === 0) return new Set()
    const now = Date.now()
    const taken = await keysTaken(trx, alone.flatMap(({ read }) => read.incoming.externalId ?? []),
      alone.flatMap(({ read }) => read.incoming.emails.map((e) => foldedKey(e.address))), now)
    const fresh = alone.filter(({ keys }) => keys.every((key) => !taken.has(key)))
    const cause = this.causeOf(imp)
    const ids = await insertUserRows(trx, fresh.map(({ read }) => newUserValues(read, now, cause.actor)))
    const users = fresh.map(({ read }, i) => ({ id: ids[i]!, incoming: read.incoming, row: createdRow(ids[i]!, read, now, cause.actor) }))
    await insertEmailRows(trx, users.flatMap(({ id, incoming }) => incoming.emails.map((e) => ({
      user_id: id, address: e.address, address_norm: foldedKey(e.address), primary_user_id: e.primary ? id : null, version: 1,
      created_at: now, updated_at: now, verified_at: e.verified ? now : null, claimed_at: now
    }))))
    await recordEvents(trx, cause, users.map(({ id, row }) => ({ type: 'user.created', userId: id, data: presentUser(row, cause.base) })))
    for (const { id, incoming } of users) await this.importMetadata(trx, id, incoming, cause)
    return new Set(fresh.map(({ line }) => line))
  }

  private async create(trx: Trx, read: Read, cause: Cause, now: number): Promise<void> {
    const id = await insertUser(trx, newUserValues(read, now, cause.actor))
    const cutoff = now - this.options.claimSeconds * 1000
    for (const e of read.incoming.emails) {
      await claimingStale(trx, e.address, id, cutoff, cause, () => insertEmail(trx, id, e.address, e.primary, now, e.verified))
    }
    await recordEvent(trx, cause, 'user.created', id, presentUser(createdRow(id, read, now, cause.actor), cause.base))
    await this.importMetadata(trx, id, read.incoming, cause)
  }

  /** A new user's metadata as its line gives it (user.metadata_changed after user.created), when it gives any. */
  private async importMetadata(trx: Trx, id: number, incoming: Incoming, cause: Cause): Promise<void> {
    if (Object.values(incoming.metadata).some((part) => part && Object.keys(part).length > 0)) {
      await changeMetadata(trx, id, { replace: incoming.metadata }, undefined, cause, this.options.metadataMaxBytes)
    }
  }

  /**
   * Sets on a user already here what the line gives: its name, status, role (an admin is never demoted by an import),
   * password hash and external id, merges its metadata, and adds the addresses it lacks; an address the line marks
   * verified is verified. The primary address stays. Each change writes the event the API writes for it. Skipped when nothing changes.
   */
  private async update(
    trx: Trx, userId: number, incoming: Incoming, dry: boolean, cause: Cause, now: number, fail: (code: string, detail: string) => Outcome
  ): Promise<Outcome> {
    const before = await lockUserRow(trx, userId)
    // Such a user is gone for everyone but an admin, who may restore it; a provisioning file does not revive it.
    if (before.deletion_scheduled_at !== null) return fail('CONFLICT', 'The user this line names is scheduled for deletion: restore it first')
    const externalId = before.external_id
    if (incoming.externalId !== null && externalId !== null && externalId !== incoming.externalId) {
      return fail('CONFLICT', 'The user holding these addresses has another external_id')
    }
    if (incoming.role === 'user' && before.role === 'admin') return fail('CONFLICT', 'An import does not demote an admin')
    const held = await addressesOf(trx, userId)
    const heldKeys = new Map(held.map((row) => [foldedKey(row.address), row]))
    const added = incoming.emails.filter((e) => !heldKeys.has(foldedKey(e.address)))
    if (held.length + added.length > this.options.maxEmailsPerUser) return fail('EMAIL_LIMIT', `A user may have at most ${this.options.maxEmailsPerUser} addresses`)
    const toVerify = incoming.emails.map((e) => e.verified ? heldKeys.get(foldedKey(e.address)) : undefined).filter((row) => row && row.verified_at === null)

    const changes: Updateable<UsersTable> = {}
    const events: Array<{ type: EventType; fields: Array<keyof UserRow> }> = []
    if (incoming.name !== null && incoming.name !== before.name) {
      changes.name = incoming.name
      changes.name_search = storedNameKey(incoming.name)
      events.push({ type: 'user.updated', fields: ['name'] })
    }
    if (incoming.status !== null && incoming.status !== before.status) {
      // A lifted ban leaves nothing of itself behind; a new one is the import's.
      Object.assign(changes, { status: incoming.status }, banOf(incoming.status, now, cause.actor))
      events.push({ type: 'user.status_changed', fields: ['status'] })
    }
    if (incoming.role !== null && incoming.role !== before.role) {
      changes.role = incoming.role
      events.push({ type: 'user.role_changed', fields: ['role'] })
    }
    const newPassword = incoming.passwordHash !== null && incoming.passwordHash !== await readPasswordHash(trx, userId)
    if (newPassword) {
      changes.password_hash = incoming.passwordHash!
      changes.password_set_at = now
      events.push({ type: 'password.changed', fields: [] })
    }
    const newExternal = incoming.externalId !== null && externalId === null
    if (newExternal) {
      changes.external_id = incoming.externalId
      const updated = events.find((e) => e.type === 'user.updated')
      if (updated) updated.fields.push('external_id')
      else events.push({ type: 'user.updated', fields: ['external_id'] })
    }
    // The line's metadata parts are merged into the user's (RFC 7396), as a PATCH of them would.
    const metadataChanged = Object.keys(incoming.metadata).length > 0 &&
      (await changeMetadata(trx, userId, { merge: incoming.metadata }, undefined, cause, this.options.metadataMaxBytes, true)).changed
    if (events.length === 0 && added.length === 0 && toVerify.length === 0 && !metadataChanged) return { result: 'skipped', events: false }
    if (dry) return { result: 'updated', events: false }

    let after: UserRow = before
    if (Object.keys(changes).length) {
      await updateUserRow(trx, userId, { ...changes, updated_at: now })
      after = { ...before, ...(changes.name ? { name: changes.name } : {}),
        ...(changes.status ? { status: changes.status, ...banOf(changes.status, now, cause.actor) } : {}),
        ...(changes.role ? { role: changes.role } : {}), ...(newExternal ? { external_id: incoming.externalId } : {}),
        version: before.version + 1, updated_at: now }
      const shown = presentUser(after, cause.base)
      const was = presentUser(before, cause.base)
      for (const event of events) {
        const previous = event.fields.length ? Object.fromEntries(event.fields.map((f) => [f, was[f as keyof typeof was]])) : changedFields(was, shown)
        await recordEvent(trx, cause, event.type, userId, shown, previous)
      }
    }
    if (changes.status === 'BANNED') await endSessions(trx, userId, cause, 'banned')
    else if (newPassword) await endSessions(trx, userId, cause, 'password_changed')
    const cutoff = now - this.options.claimSeconds * 1000
    const hasPrimary = held.some((row) => row.primary_user_id !== null)
    for (const e of added) {
      const primary = !hasPrimary && e.primary
      const emailId = await claimingStale(trx, e.address, userId, cutoff, cause, () => insertEmail(trx, userId, e.address, primary, now, e.verified))
      if (primary) await touchUser(trx, userId, now)
      await recordEvent(trx, cause, 'email.added', userId, presentEmail({
        id: emailId, user_id: userId, address: e.address, primary_user_id: primary ? userId : null, version: 1, created_at: now,
        verified_at: e.verified ? now : null
      }, cause.base))
    }
    for (const row of toVerify) await verifyAddress(trx, userId, row!.id, now, cause)
    if (metadataChanged) await changeMetadata(trx, userId, { merge: incoming.metadata }, undefined, cause, this.options.metadataMaxBytes)
    return { result: 'updated', events: true }
  }
}

/** The format's parameters of an import (Firebase's hash parameters), read once for a batch. */
function parametersOf(imp: ImportRow): FirebaseParameters | null {
  return imp.parameters ? JSON.parse(imp.parameters) as FirebaseParameters : null
}

/** A write that lost a race to another writer: an address or external id taken meanwhile. */
function raced(err: unknown): boolean {
  return err instanceof EmailTaken || isUniqueViolation(err)
}
