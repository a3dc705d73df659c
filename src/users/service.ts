import type { Updateable } from 'kysely'
import type { UsersTable } from '../../db/types.js'
import type { EventType, SessionEndReason } from '../../schemas/event.js'
import type { UserRole, UserStatus } from '../../schemas/user.js'
import type { AddressMail } from '../accounts/address-mail.js'
import { claimingStale, insertEmail } from '../accounts/addresses.js'
import { deleteIfDue, deleteUser, insertUser, keepAnAdmin, restoreUser, scheduleDeletion } from '../accounts/removal.js'
import type { Passwords } from '../accounts/secrets.js'
import { presentUser } from '../accounts/present.js'
import { endSessions, sessionSignedInAt, stillSignedIn, type Keep } from '../accounts/sessions.js'
import { findUserById, lockUserRow, NO_BAN, updateUserRow, type BanColumns, type UserRow } from '../accounts/users.js'
import type { Caller } from '../auth/caller.js'
import { DeletionNotScheduled, EmailTaken, Forbidden, invalidField, ReauthRequired, Unauthenticated, userNotFound } from '../common/errors.js'
import { storedNameKey } from '../common/text.js'
import { mustMatch, type Expected } from '../common/versions.js'
import type { Db, Trx } from '../database/index.js'
import { inTransaction, written } from '../database/transaction.js'
import { changedFields, recordEvent, type Cause } from '../events/record.js'
import type { LoginGuard } from '../limits/login-guard.js'
import { findPasswordHash, findUserByAddress, listUsers, type UserFilters } from './repository.js'

export interface NewUserInput {
  name: string
  email: string
  password: string
  role?: UserRole | undefined
  status?: UserStatus | undefined
}

/** What an admin or the user itself may change at a key path (the password has a rule of its own). */
export type UserChange = { name: string } | { status: UserStatus; reason?: string | undefined; until?: string | undefined } | { role: UserRole }

/** What a write does beside its columns: the event it records, and the sessions it ends. */
interface WriteEffects {
  type: EventType
  /** The user's fields as the change leaves them (those a client sees). */
  shown?: Partial<Pick<UserRow, 'name' | 'status' | 'role' | 'ban_reason' | 'banned_until' | 'banned_at' | 'banned_by_type' | 'banned_by_id'>>
  /** Asked with the row as it was: whether the change ends the user's sessions (all, or all but `keep`), and why. */
  ending?: (before: UserRow) => { reason: SessionEndReason; keep?: Keep | undefined } | undefined
  /** The change may leave the user no longer an active admin. */
  removesAdmin?: boolean
  /** The caller's token must still stand under the lock (stillSignedIn): a password a revert raced is not set. */
  signedIn?: boolean
}

export interface UsersOptions {
  /** Anyone may sign up; else only admins create users. */
  signupOpen: boolean
  /** An unverified address set this long ago may be taken by another user (UNVERIFIED_CLAIM_SECONDS). */
  claimSeconds: number
  /** A user deleting itself must have signed in this recently (REAUTH_MAX_AGE_SECONDS). */
  reauthMaxAgeSeconds: number
  /** How long a deletion waits, during which an admin may restore the user; 0: none (ACCOUNT_DELETION_GRACE_SECONDS). */
  deletionGraceSeconds: number
}

/** Refuses a caller who is not an admin: UNAUTHENTICATED without a token, FORBIDDEN with one. */
function requireAdmin(caller: Caller | null, why: string): void {
  if (caller?.role === 'admin') return
  throw caller ? new Forbidden(why) : new Unauthenticated(why)
}

/** The user as this transaction left it (read inside it, before any concurrent delete can land). */
async function writtenUser(trx: Trx, id: number): Promise<UserRow> {
  return written(await findUserById(trx, id), `user ${id}`)
}

/**
 * The rules about users: who sees whom, who may create admins, what a change revokes. Route rules (`config.auth`)
 * have already decided whether the caller may reach the user named in the path.
 */
export class UsersService {
  constructor(
    private readonly db: Db, private readonly passwords: Passwords, private readonly guard: LoginGuard, private readonly mail: AddressMail,
    private readonly options: UsersOptions
  ) {}

  /** The one user a caller's listings are restricted to: a plain user sees at most itself, an admin everyone. */
  listingScope(caller: Caller): number | undefined {
    return caller.role === 'admin' ? undefined : caller.id
  }

  list(caller: Caller, filters: Omit<UserFilters, 'onlyId'>, afterId: number, limit: number): Promise<UserRow[]> {
    return listUsers(this.db, { ...filters, onlyId: this.listingScope(caller) }, afterId, limit)
  }

  async get(caller: Caller, id: number): Promise<UserRow> {
    // The caller's own row came with its token: reading oneself costs no further query.
    const row = caller.id === id ? caller : await findUserById(this.db, id)
    if (!row) throw userNotFound(`id ${id}`)
    return row
  }

  /** A plain user may look up only itself: any other answer is FORBIDDEN, whether or not the address exists. */
  async findByAddress(caller: Caller, address: string): Promise<UserRow> {
    const row = await findUserByAddress(this.db, address)
    if (caller.role !== 'admin' && row?.id !== caller.id) throw new Forbidden()
    if (!row) throw userNotFound(`the address ${address}`)
    return row
  }

  /**
   * Sign-up, or an admin creating a user: `role` and `status` only from an admin. Its verification mail counts
   * against `client`'s mail limit (null: an admin's request).
   */
  async signUp(caller: Caller | null, input: NewUserInput, client: string | null, cause: Cause): Promise<UserRow> {
    if (!this.options.signupOpen) requireAdmin(caller, 'Sign-up is closed: only an admin may create users')
    if (input.role !== undefined || input.status !== undefined) requireAdmin(caller, 'Only an admin may set role or status')
    await this.mail.allow(client)
    return this.create({ ...input, role: input.role ?? 'user', status: input.status ?? 'ACTIVE' }, cause)
  }

  /**
   * Creates a user and its primary address in one transaction, and mails the address a verification token (an
   * address the operator configured, `verified`, is taken as verified). EMAIL_TAKEN when the address is anyone's
   * already, unless a stale unverified claim, which is given up.
   */
  async create(input: NewUserInput & { role: UserRole; status: UserStatus }, cause: Cause, verified = false): Promise<UserRow> {
    const name = input.name.trim()
    const nameKey = storedNameKey(name)
    const passwordHash = await this.passwords.hash(input.password)
    const row = await inTransaction(this.db, async (trx) => {
      const now = Date.now()
      const id = await insertUser(trx, {
        name, name_search: nameKey, password_hash: passwordHash,
        status: input.status, role: input.role, version: 1, created_at: now, updated_at: now
      })
      const cutoff = now - this.options.claimSeconds * 1000
      const emailId = await claimingStale(trx, input.email, id, cutoff, cause, () => insertEmail(trx, id, input.email, true, now, verified))
      // A new user: its address has had no mail from it yet.
      if (!verified) await this.mail.verification(trx, { id: emailId, user_id: id, address: input.email }, now, 'always')
      const created = await writtenUser(trx, id)
      await recordEvent(trx, cause, 'user.created', id, presentUser(created, cause.base))
      return created
    })
    this.mail.committed()
    if (!verified) await this.mail.sentWithoutSlot(row.id, input.email)
    return row
  }

  /**
   * The first admin: created when no user has the address; an existing user with it is left as it is. The address
   * comes from the operator's configuration, not from a client, so it is taken as verified.
   */
  async ensureAdmin(email: string, password: string, cause: Cause): Promise<boolean> {
    if (await findUserByAddress(this.db, email)) return false
    try {
      await this.create({ name: 'Administrator', email, password, role: 'admin', status: 'ACTIVE' }, cause, true)
      return true
    } catch (err) {
      if (err instanceof EmailTaken) return false // another instance created it meanwhile
      throw err
    }
  }

  /** Renames, bans or reinstates, promotes or demotes. A ban and a demotion end every session of the user. */
  change(id: number, change: UserChange, expected: Expected, cause: Cause): Promise<UserRow> {
    if ('name' in change) {
      const name = change.name.trim()
      return this.write(id, { name, name_search: storedNameKey(name) }, expected, cause, { type: 'user.updated', shown: { name } })
    }
    if ('status' in change) {
      const banning = change.status === 'BANNED'
      const columns = { status: change.status, ...banColumns(change, cause) }
      return this.write(id, columns, expected, cause, {
        type: 'user.status_changed', shown: columns, removesAdmin: banning, ending: () => (banning ? { reason: 'banned' } : undefined)
      })
    }
    const demoting = change.role === 'user'
    return this.write(id, change, expected, cause, {
      // A demotion ends the sessions of an admin; making a plain user a plain user again ends nothing.
      type: 'user.role_changed', shown: change, removesAdmin: demoting,
      ending: (before) => (demoting && before.role === 'admin' ? { reason: 'demoted' } : undefined)
    })
  }

  /**
   * A new password. A user changing its own shows the current one (throttled like a login: `client` is its
   * address) and keeps the session it called from; an admin resetting another's does not. Every other session of
   * the user ends.
   */
  async changePassword(
    caller: Caller, id: number, password: string, currentPassword: string | undefined, expected: Expected, client: string, cause: Cause
  ): Promise<void> {
    const self = caller.id === id
    if (self) {
      if (currentPassword === undefined) {
        throw invalidField('/current_password', 'body', 'is required to change your own password', 'current_password is required to change your own password')
      }
      const attempt = await this.guard.attempt(`u${id}`, client)
      if (!(await this.passwords.verify(await findPasswordHash(this.db, id), currentPassword))) {
        throw new Forbidden('current_password is wrong', 'INVALID_CREDENTIALS')
      }
      await attempt.succeeded()
    }
    const passwordHash = await this.passwords.hash(password)
    const keep: Keep | undefined = self ? { sessionId: caller.session_id, tokenHash: caller.tokenHash } : undefined
    await this.write(id, { password_hash: passwordHash, password_set_at: Date.now() }, expected, cause, {
      type: 'password.changed', ending: () => ({ reason: 'password_changed', keep }), signedIn: true
    })
  }

  /**
   * Deletes a user with its addresses, sessions and tokens in one transaction, and forgets it; or, with a grace
   * (ACCOUNT_DELETION_GRACE_SECONDS), schedules its deletion: the user as scheduled, or undefined when it is gone. A
   * user deleting itself must hold a session signed in (by password or e-mail code; a refresh does not count)
   * within REAUTH_MAX_AGE_SECONDS: a stolen access token alone cannot delete the account. Admins deleting others are not.
   */
  async remove(caller: Caller, id: number, expected: Expected, cause: Cause): Promise<UserRow | undefined> {
    if (caller.id === id) {
      const signedIn = caller.session_id === null ? undefined : await sessionSignedInAt(this.db, caller.session_id)
      if (signedIn === undefined || Date.now() - signedIn > this.options.reauthMaxAgeSeconds * 1000) {
        throw new ReauthRequired(this.options.reauthMaxAgeSeconds)
      }
    }
    const grace = this.options.deletionGraceSeconds
    if (grace > 0) return inTransaction(this.db, (trx) => scheduleDeletion(trx, id, Date.now() + grace * 1000, expected, cause))
    await inTransaction(this.db, (trx) => deleteUser(trx, id, expected, cause))
    return undefined
  }

  /**
   * Takes back a scheduled deletion (admins); DELETION_NOT_SCHEDULED when none is. The deadline holds to the
   * millisecond: a restore after it makes the deletion final itself, as the background job would, and finds no user.
   */
  async restore(id: number, expected: Expected, cause: Cause): Promise<UserRow> {
    const restored = await inTransaction(this.db, async (trx) =>
      (await deleteIfDue(trx, id, Date.now(), cause.base)) ? 'deleted' as const : restoreUser(trx, id, expected, cause))
    if (restored === 'deleted') throw userNotFound(`id ${id}`)
    if (!restored) throw new DeletionNotScheduled()
    return restored
  }

  /**
   * Applies changes if the user is at a version If-Match allows: the row is read locked (which also holds off
   * logins and refreshes in flight), checked, written, and its event recorded with the values it replaced; the
   * user as the change left it is made from what was read and written, not read again. 404 when the user is gone,
   * else 412. `effects.ending` says whether the change ends the user's sessions, in the same transaction.
   */
  private write(id: number, changes: Updateable<UsersTable>, expected: Expected, cause: Cause, effects: WriteEffects): Promise<UserRow> {
    return inTransaction(this.db, async (trx) => {
      if (effects.removesAdmin) await keepAnAdmin(trx, id)
      const before = await lockUserRow(trx, id)
      if (effects.signedIn) await stillSignedIn(trx, cause)
      mustMatch(before.version, expected)
      // Asking for what the user already is writes nothing: no version, no event, no session ended.
      const shown = effects.shown
      if (shown && Object.entries(shown).every(([column, value]) => before[column as keyof typeof shown] === value)) return before
      const now = Date.now()
      await updateUserRow(trx, id, { ...changes, updated_at: now })
      const after: UserRow = { ...before, ...shown, version: before.version + 1, updated_at: now }
      const is = presentUser(after, cause.base)
      await recordEvent(trx, cause, effects.type, id, is, changedFields(presentUser(before, cause.base), is))
      const ends = effects.ending?.(before)
      if (ends) await endSessions(trx, id, cause, ends.reason, ends.keep)
      return after
    })
  }
}

/**
 * The ban a status change writes: its reason, its end (a time to come), when and by whom; none for ACTIVE, which
 * takes neither a reason nor an end.
 */
function banColumns(change: { status: UserStatus; reason?: string | undefined; until?: string | undefined }, cause: Cause): BanColumns {
  if (change.status === 'ACTIVE') {
    if (change.reason !== undefined) throw invalidField('/reason', 'body', 'goes with BANNED only')
    if (change.until !== undefined) throw invalidField('/until', 'body', 'goes with BANNED only')
    return NO_BAN
  }
  const now = Date.now()
  const until = change.until === undefined ? null : Date.parse(change.until)
  if (until !== null && !(until > now)) throw invalidField('/until', 'body', 'must be a time in the future')
  return { ban_reason: change.reason ?? null, banned_until: until, banned_at: now, banned_by_type: cause.actor.type, banned_by_id: cause.actor.id }
}
