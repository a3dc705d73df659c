import type { Updateable } from 'kysely'
import type { UsersTable } from '../../db/types.js'
import type { UserRole, UserStatus } from '../../schemas/user.js'
import type { AddressMail } from '../accounts/address-mail.js'
import { claimingStale, deleteUserEmails, insertEmail } from '../accounts/addresses.js'
import type { Passwords } from '../accounts/secrets.js'
import { endSessions, type Keep } from '../accounts/sessions.js'
import { findUserById, lockUser, updateUserRow, userExists, type UserRow } from '../accounts/users.js'
import type { Caller } from '../auth/caller.js'
import { EmailTaken, Forbidden, invalidField, LastAdmin, Unauthenticated, userNotFound, VersionConflict } from '../common/errors.js'
import { storedNameKey } from '../common/text.js'
import { mustMatch, type Expected } from '../common/versions.js'
import type { Db, Trx } from '../database/index.js'
import { inTransaction, written } from '../database/transaction.js'
import type { LoginGuard } from '../limits/login-guard.js'
import { deleteUserRow, findPasswordHash, findUserByAddress, insertUser, listUsers, lockActiveAdmins, type UserFilters } from './repository.js'

export interface NewUserInput {
  name: string
  email: string
  password: string
  role?: UserRole | undefined
  status?: UserStatus | undefined
}

/** What an admin or the user itself may change at a key path (the password has a rule of its own). */
export type UserChange = { name: string } | { status: UserStatus } | { role: UserRole }

export interface UsersOptions {
  /** Anyone may sign up; else only admins create users. */
  signupOpen: boolean
  /** An unverified address set this long ago may be taken by another user (UNVERIFIED_CLAIM_SECONDS). */
  claimSeconds: number
}

/** Refuses a caller who is not an admin: UNAUTHENTICATED without a token, FORBIDDEN with one. */
function requireAdmin(caller: Caller | null, why: string): void {
  if (caller?.role === 'admin') return
  throw caller ? new Forbidden(why) : new Unauthenticated(why)
}

/**
 * Refuses to leave no active admin (LAST_ADMIN) when the user `id` stops being one. The active admins are locked
 * before the user's own row, in every transaction that can remove one, so two admins demoting each other at once
 * cannot both succeed.
 */
async function keepAnAdmin(trx: Trx, id: number): Promise<void> {
  const admins = await lockActiveAdmins(trx)
  if (admins.includes(id) && admins.length <= 1) throw new LastAdmin()
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
  async signUp(caller: Caller | null, input: NewUserInput, client: string | null): Promise<UserRow> {
    if (!this.options.signupOpen) requireAdmin(caller, 'Sign-up is closed: only an admin may create users')
    if (input.role !== undefined || input.status !== undefined) requireAdmin(caller, 'Only an admin may set role or status')
    await this.mail.allow(client)
    return this.create({ ...input, role: input.role ?? 'user', status: input.status ?? 'ACTIVE' })
  }

  /**
   * Creates a user and its primary address in one transaction, and mails the address a verification token (an
   * address the operator configured, `verified`, is taken as verified). EMAIL_TAKEN when the address is anyone's
   * already, unless a stale unverified claim, which is given up.
   */
  async create(input: NewUserInput & { role: UserRole; status: UserStatus }, verified = false): Promise<UserRow> {
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
      const emailId = await claimingStale(trx, input.email, id, cutoff, () => insertEmail(trx, id, input.email, true, now, verified))
      // A new user: its address has had no mail from it yet.
      if (!verified) await this.mail.verification(trx, { id: emailId, user_id: id, address: input.email }, now, 'always')
      return writtenUser(trx, id)
    })
    this.mail.committed()
    if (!verified) await this.mail.sentWithoutSlot(row.id, input.email)
    return row
  }

  /**
   * The first admin: created when no user has the address; an existing user with it is left as it is. The address
   * comes from the operator's configuration, not from a client, so it is taken as verified.
   */
  async ensureAdmin(email: string, password: string): Promise<boolean> {
    if (await findUserByAddress(this.db, email)) return false
    try {
      await this.create({ name: 'Administrator', email, password, role: 'admin', status: 'ACTIVE' }, true)
      return true
    } catch (err) {
      if (err instanceof EmailTaken) return false // another instance created it meanwhile
      throw err
    }
  }

  /** Renames, bans or reinstates, promotes or demotes. A ban and a demotion end every session of the user. */
  change(id: number, change: UserChange, expected: Expected): Promise<UserRow> {
    const changes: Updateable<UsersTable> =
      'name' in change ? { name: change.name.trim(), name_search: storedNameKey(change.name.trim()) } : change
    if ('status' in change && change.status === 'BANNED') {
      return this.write(id, changes, expected, { removesAdmin: true, ending: async () => ({}) })
    }
    if ('role' in change && change.role === 'user') {
      // A demotion ends the sessions of an admin; making a plain user a plain user again ends nothing.
      const ending = async (trx: Trx) => ((await lockUser(trx, id)).role === 'admin' ? {} : undefined)
      return this.write(id, changes, expected, { removesAdmin: true, ending })
    }
    return this.write(id, changes, expected)
  }

  /**
   * A new password. A user changing its own shows the current one (throttled like a login: `client` is its
   * address) and keeps the session it called from; an admin resetting another's does not. Every other session of
   * the user ends.
   */
  async changePassword(
    caller: Caller, id: number, password: string, currentPassword: string | undefined, expected: Expected, client: string
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
    await this.write(id, { password_hash: passwordHash }, expected, { ending: async () => ({ keep }) })
  }

  /** Deletes a user with its addresses, sessions and tokens in one transaction. */
  async remove(id: number, expected: Expected): Promise<void> {
    await inTransaction(this.db, async (trx) => {
      await keepAnAdmin(trx, id)
      const row = await lockUser(trx, id)
      mustMatch(row.version, expected)
      await endSessions(trx, id)
      await deleteUserEmails(trx, id)
      await deleteUserRow(trx, id)
    })
  }

  /**
   * Applies changes if the user is at a version If-Match allows (checked in the UPDATE itself, which also locks the
   * row against logins and refreshes in flight); 404 when the user is gone, else 412. A rename costs that UPDATE
   * and the read of the result. `ending`, asked before the update (it may read the row, locked), says whether the
   * change ends the user's sessions (all, or all but `keep`), in the same transaction; `removesAdmin`, whether the
   * change may leave the user no longer an active admin.
   */
  private write(
    id: number, changes: Updateable<UsersTable>, expected: Expected,
    options: { ending?: (trx: Trx) => Promise<{ keep?: Keep | undefined } | undefined>; removesAdmin?: boolean } = {}
  ): Promise<UserRow> {
    return inTransaction(this.db, async (trx) => {
      if (options.removesAdmin) await keepAnAdmin(trx, id)
      const ends = options.ending ? await options.ending(trx) : undefined
      const versions = Array.isArray(expected) ? expected : undefined
      const changed = versions?.length === 0 ? false : await updateUserRow(trx, id, { ...changes, updated_at: Date.now() }, versions)
      if (!changed) throw (await userExists(trx, id)) ? new VersionConflict() : userNotFound(`id ${id}`)
      if (ends) await endSessions(trx, id, ends.keep)
      return writtenUser(trx, id)
    })
  }
}
