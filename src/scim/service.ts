import type { Updateable } from 'kysely'
import type { UsersTable } from '../../db/types.js'
import { SCIM_MAX_RESULTS } from '../../schemas/scim.js'
import { claimingStale, insertEmail, makePrimary, removeEmail, verifyAddress } from '../accounts/addresses.js'
import { deleteLocked, insertUser, keepAnAdmin, lockForDeletion } from '../accounts/removal.js'
import { presentEmail, presentUser } from '../accounts/present.js'
import { NO_PASSWORD, newToken, type Passwords } from '../accounts/secrets.js'
import { endSessions } from '../accounts/sessions.js'
import { bannedAt, findUserById, lockUserRow, updateUserRow, type UserRow } from '../accounts/users.js'
import { isAddress } from '../common/formats.js'
import { EmailLimit, EmailTaken, ExternalIdTaken, scimTokenNotFound, userNotFound } from '../common/errors.js'
import { foldedKey, MAX_NAME_LENGTH, sameMailbox, storedNameKey } from '../common/text.js'
import { isUniqueViolation } from '../database/errors.js'
import type { Db, Trx } from '../database/index.js'
import { inTransaction, written } from '../database/transaction.js'
import { changedFields, recordEvent, type Cause } from '../events/record.js'
import { parseFilter } from '../filter/index.js'
import { invalidValue } from './errors.js'
import { applyPatch } from './patch.js'
import { mustMatchScim, presentScimUser, type ScimJson, type ScimPrecondition } from './present.js'
import {
  deleteScimToken, findScimToken, findScimUser, insertScimToken, listScimTokens, listScimUsers,
  lockAddresses, userWithExternalId, type ScimTokenRow, type ScimUserRow
} from './repository.js'

export interface ScimOptions {
  /** UNVERIFIED_CLAIM_SECONDS: a stale unverified claim gives its address up, as in the API. */
  claimSeconds: number
  /** MAX_EMAILS_PER_USER, as in the API. */
  maxEmailsPerUser: number
}

/** The ban a directory's deactivation sets, and the only one its reactivation lifts. */
export const DEPROVISIONED = 'deprovisioned'

/** What a SCIM body asks the user to be. */
interface Desired {
  userName: string
  externalId: string | null
  name: string
  /** Every address the user is to have (userName among them); undefined: the others stay as they are. */
  addresses: string[] | undefined
  active: boolean
  password: string | undefined
}

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v)

function address(value: unknown, what: string): string {
  if (!isAddress(value)) {
    throw invalidValue(`${what} must be an e-mail address (Roster's users are their addresses): ${JSON.stringify(value)}`)
  }
  return value
}

/** A boolean, or Entra ID's "True" and "False". */
function bool(value: unknown, what: string): boolean {
  if (typeof value === 'boolean') return value
  if (typeof value === 'string' && /^(true|false)$/i.test(value)) return value.toLowerCase() === 'true'
  throw invalidValue(`${what} must be true or false: ${JSON.stringify(value)}`)
}

const text = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined)

/** The name's parts Roster reads, found in any case. */
function nameOf(json: Obj | undefined): { formatted?: unknown; givenName?: unknown; familyName?: unknown } {
  const name = json && isObj(json.name) ? json.name : {}
  const part = (wanted: string) => Object.entries(name).find(([k]) => k.toLowerCase() === wanted)?.[1]
  return { formatted: part('formatted'), givenName: part('givenname'), familyName: part('familyname') }
}

/** A name given in a form that is not a string is refused, never read as no name. */
function checkNameTypes(next: Obj): void {
  if (next.name !== undefined && next.name !== null && !isObj(next.name)) throw invalidValue(`name must be an object: ${JSON.stringify(next.name)}`)
  const given: Array<[string, unknown]> = [['displayName', next.displayName], ...Object.entries(nameOf(next)).map(([k, v]): [string, unknown] => [`name.${k}`, v])]
  for (const [what, value] of given) {
    if (value !== undefined && value !== null && typeof value !== 'string') throw invalidValue(`${what} must be a string: ${JSON.stringify(value)}`)
  }
}

/**
 * Roster's one name from a User: what changed of `name.formatted`, `displayName`, or the given and family names
 * (joined), in that order; the name it had when none did. A new user without any is named by its address.
 */
function derivedName(next: Obj, prev: Obj | undefined, fallback: string): string {
  const was = nameOf(prev)
  const now = nameOf(next)
  const formatted = text(now.formatted)
  if (formatted && formatted !== text(was.formatted)) return formatted
  const display = text(next.displayName)
  if (display && display !== text(prev?.displayName)) return display
  const given = text(now.givenName)
  const family = text(now.familyName)
  if ((given || family) && (given !== text(was.givenName) || family !== text(was.familyName))) return [given, family].filter(Boolean).join(' ')
  return fallback
}

/** The user a SCIM User asks for, against what it was (`prev`, none for a creation). */
function desiredFrom(next: Obj, prev: Obj | undefined): Desired {
  checkNameTypes(next)
  let userName = address(next.userName, 'userName')
  const emails = Array.isArray(next.emails) ? next.emails.filter(isObj) : undefined
  if (emails && emails.filter((e) => e.primary === true).length > 1) throw invalidValue('More than one of the emails is primary')
  const prevPrimary = typeof prev?.userName === 'string' ? prev.userName : undefined
  // A change of the primary address through `emails` (Entra's `emails[type eq "work"].value`) moves userName with it.
  const primary = emails?.find((e) => e.primary === true && typeof e.value === 'string')
  if (prev && primary && prevPrimary !== undefined && sameMailbox(userName, prevPrimary) && !sameMailbox(primary.value as string, prevPrimary)) {
    userName = address(primary.value, 'emails.value')
  }
  let addresses: string[] | undefined
  if (emails) {
    addresses = [userName]
    for (const e of emails) {
      const value = address(e.value, 'emails.value')
      if (!addresses.some((a) => sameMailbox(a, value))) addresses.push(value)
    }
    // userName is the primary address: emails changed so as to leave it out remove what the user signs in with. A new
    // userName beside emails left as they were is an address added, and made primary.
    const changed = prev !== undefined && JSON.stringify(next.emails) !== JSON.stringify(prev.emails)
    if (changed && !emails.some((e) => typeof e.value === 'string' && sameMailbox(e.value, userName))) {
      throw invalidValue(`emails must hold the userName's address ${userName}: change userName to another of them first`)
    }
  }
  const externalId = next.externalId === undefined || next.externalId === null ? null : next.externalId
  if (externalId !== null && (typeof externalId !== 'string' || externalId.length === 0 || externalId.length > 255)) {
    throw invalidValue('externalId must be a string of 1 to 255 characters')
  }
  const name = derivedName(next, prev, typeof prev?.displayName === 'string' ? prev.displayName : userName)
  if ([...name].length > MAX_NAME_LENGTH) throw invalidValue(`The name is longer than ${MAX_NAME_LENGTH} characters`)
  const active = next.active === undefined || next.active === null ? true : bool(next.active, 'active')
  const password = next.password === undefined || next.password === null ? undefined : next.password
  if (password !== undefined && (typeof password !== 'string' || password.length < 8 || password.length > 256)) {
    throw invalidValue('password must be a string of 8 to 256 characters')
  }
  return { userName, externalId, name, addresses, active, password }
}

/** The User attributes a PUT names, by SCIM's names in any case, over the user as it is. */
const PUT_ATTRIBUTES: Record<string, string> = {
  username: 'userName', externalid: 'externalId', displayname: 'displayName', name: 'name', emails: 'emails', active: 'active', password: 'password'
}

function replaced(current: ScimJson, body: unknown): Obj {
  if (!isObj(body)) throw invalidValue('The body is not a User')
  // A replacement is the whole User, and a User has a userName (RFC 7643 §4.1.1).
  if (!Object.entries(body).some(([k, v]) => k.toLowerCase() === 'username' && v !== null && v !== undefined)) throw invalidValue('userName is required')
  const next: Obj = { ...current }
  // A replacement names the name in full: the parts it leaves out are gone, so that a new given name is seen as new.
  if (Object.keys(body).some((k) => k.toLowerCase() === 'name')) delete next.name
  for (const [key, value] of Object.entries(body)) {
    const attribute = PUT_ATTRIBUTES[key.toLowerCase()]
    if (attribute) next[attribute] = value
  }
  return next
}

/**
 * Provisioning from a company's directory (SCIM 2.0): users created, replaced, patched, deactivated and deleted
 * with the same account functions, rules and events as the API's, under the actor the route gives (`scim`, or the
 * admin). Addresses from the directory are taken as verified; a deactivation is a ban with the reason
 * `deprovisioned`, which ends the user's sessions, and which a reactivation alone lifts.
 */
export class ScimService {
  constructor(private readonly db: Db, private readonly passwords: Passwords, private readonly options: ScimOptions) {}

  async list(filter: string | undefined, startIndex: number, count: number) {
    const node = filter === undefined ? undefined : parseFilter(filter)
    // Past any count of users, and within what both engines take as an OFFSET.
    const start = Math.min(Math.max(1, startIndex), Number.MAX_SAFE_INTEGER)
    const size = Math.min(Math.max(0, count), SCIM_MAX_RESULTS)
    const page = await listScimUsers(this.db, node, start - 1, size)
    return { ...page, startIndex: start }
  }

  /** The user as SCIM shows it (in `db`, a transaction holding its lock): not found if its deletion is scheduled. */
  async get(id: number, db: Db | Trx = this.db): Promise<ScimUserRow> {
    const row = await findScimUser(db, id)
    if (!row) throw userNotFound(`id ${id}`)
    return row
  }

  async create(body: unknown, cause: Cause): Promise<ScimUserRow> {
    // Attribute names in any case (RFC 7643 §2.1), as a replacement reads them.
    const want = desiredFrom(replaced({}, body), undefined)
    this.checkLimit(want, 0)
    const passwordHash = want.password === undefined ? NO_PASSWORD : await this.passwords.hash(want.password)
    try {
      return await inTransaction(this.db, async (trx) => {
        const now = Date.now()
        if (want.externalId !== null && await userWithExternalId(trx, want.externalId) !== undefined) throw new ExternalIdTaken(want.externalId)
        const ban = want.active ? {} : { ban_reason: DEPROVISIONED, banned_at: now, banned_by_type: cause.actor.type, banned_by_id: cause.actor.id }
        const id = await insertUser(trx, {
          name: want.name, name_search: storedNameKey(want.name), password_hash: passwordHash, external_id: want.externalId,
          status: want.active ? 'ACTIVE' : 'BANNED', role: 'user', version: 1, created_at: now, updated_at: now, ...ban
        })
        const cutoff = this.cutoff(now)
        await claimingStale(trx, want.userName, id, cutoff, cause, () => insertEmail(trx, id, want.userName, true, now, true))
        await recordEvent(trx, cause, 'user.created', id, presentUser(written(await findUserById(trx, id), `user ${id}`), cause.base))
        for (const extra of (want.addresses ?? []).filter((a) => !sameMailbox(a, want.userName))) await this.addAddress(trx, id, extra, now, cause)
        return written(await findScimUser(trx, id), `user ${id}`)
      })
    } catch (err) {
      if (want.externalId !== null && isUniqueViolation(err)) throw new ExternalIdTaken(want.externalId)
      throw err
    }
  }

  /** PUT: the attributes the body names replace the user's; those it leaves out stay. */
  replace(id: number, body: unknown, expected: ScimPrecondition, cause: Cause): Promise<ScimUserRow> {
    return this.save(id, expected, cause, (current) => replaced(current, body))
  }

  /** PATCH: the operations applied to the user as it is, then saved as a replacement would be. */
  patch(id: number, body: unknown, expected: ScimPrecondition, cause: Cause): Promise<ScimUserRow> {
    return this.save(id, expected, cause, (current) => applyPatch(current, body))
  }

  /** Deletes the user as an admin's DELETE /users/{id} does (`user.deleted`, its sessions ended, its addresses gone). */
  async remove(id: number, expected: ScimPrecondition, cause: Cause): Promise<void> {
    await inTransaction(this.db, async (trx) => {
      const row = await lockForDeletion(trx, id)
      if (row.deletion_scheduled_at !== null) throw userNotFound(`id ${id}`)
      if (expected !== undefined) mustMatchScim(await this.get(id, trx), expected)
      await deleteLocked(trx, id, cause)
    })
  }

  /** EMAIL_LIMIT when the user is to hold more addresses than MAX_EMAILS_PER_USER, and more than the `held` it has. */
  private checkLimit(want: Desired, held: number): void {
    const count = want.addresses?.length ?? 1
    if (count > this.options.maxEmailsPerUser && count > held) throw new EmailLimit(this.options.maxEmailsPerUser)
  }

  private cutoff(now: number): number {
    return now - this.options.claimSeconds * 1000
  }

  private async addAddress(trx: Trx, userId: number, value: string, now: number, cause: Cause): Promise<void> {
    const emailId = await claimingStale(trx, value, userId, this.cutoff(now), cause, () => insertEmail(trx, userId, value, false, now, true))
    await recordEvent(trx, cause, 'email.added', userId, presentEmail({
      id: emailId, user_id: userId, address: value, primary_user_id: null, version: 1, created_at: now, verified_at: now
    }, cause.base))
  }

  /**
   * One change of a user from what `build` makes of it as SCIM shows it, in one transaction under the user's lock,
   * each part written with the event the API writes for it: the name (user.updated), addresses added, verified,
   * made primary and removed (email.*), the status (user.status_changed, ending the sessions of a deactivated
   * user), the password (password.changed, ending its sessions).
   */
  private async save(id: number, expected: ScimPrecondition, cause: Cause, build: (current: ScimJson) => Obj): Promise<ScimUserRow> {
    const peek = await this.get(id)
    const early = desiredFrom(build(presentScimUser(peek, cause.base)), presentScimUser(peek, cause.base))
    const passwordHash = early.password === undefined ? undefined : await this.passwords.hash(early.password)
    return inTransaction(this.db, async (trx) => {
      if (!early.active) await keepAnAdmin(trx, id)
      const locked = await lockUserRow(trx, id)
      const current = await this.get(id, trx)
      mustMatchScim(current, expected)
      const shown = presentScimUser(current, cause.base)
      const want = desiredFrom(build(shown), shown)
      this.checkLimit(want, current.emails.length)
      const now = Date.now()
      let before: UserRow = locked
      /** Writes columns of the user and the event of that change, with the values it replaced. */
      const change = async (columns: Updateable<UsersTable>, type: 'user.updated' | 'user.status_changed' | 'password.changed' | null) => {
        await updateUserRow(trx, id, { ...columns, updated_at: now })
        const after = written(await findUserById(trx, id), `user ${id}`)
        if (type) {
          const was = presentUser(before, cause.base)
          const is = presentUser(after, cause.base)
          await recordEvent(trx, cause, type, id, is, changedFields(was, is))
        }
        before = after
      }

      const updated: Updateable<UsersTable> = {}
      if (want.name !== current.name) Object.assign(updated, { name: want.name, name_search: storedNameKey(want.name) })
      if (want.externalId !== current.external_id) {
        if (want.externalId !== null) {
          const holder = await userWithExternalId(trx, want.externalId)
          if (holder !== undefined && holder !== id) throw new ExternalIdTaken(want.externalId)
        }
        updated.external_id = want.externalId
      }
      if (Object.keys(updated).length > 0) await change(updated, 'user.updated')
      // SCIM's User holds every address: a change of them is a change of its version.
      if (await this.placeAddresses(trx, id, want, now, cause)) await change({}, null)
      before = written(await findUserById(trx, id), `user ${id}`)

      const deprovisioned = current.status === 'BANNED' && current.ban_reason === DEPROVISIONED
      if (!want.active && !bannedAt(current, now)) {
        await change({
          status: 'BANNED', ban_reason: DEPROVISIONED, banned_at: now, banned_until: null, banned_by_type: cause.actor.type, banned_by_id: cause.actor.id
        }, 'user.status_changed')
        await endSessions(trx, id, cause, 'banned')
      } else if (want.active && deprovisioned) {
        await change({ status: 'ACTIVE', ban_reason: null, banned_at: null, banned_until: null, banned_by_type: null, banned_by_id: null }, 'user.status_changed')
      }
      if (passwordHash !== undefined && want.password !== undefined) {
        await change({ password_hash: passwordHash, password_set_at: now }, 'password.changed')
        await endSessions(trx, id, cause, 'password_changed')
      }
      return written(await findScimUser(trx, id), `user ${id}`)
    }).catch((err: unknown) => {
      if (isUniqueViolation(err) && early.externalId !== null) throw new ExternalIdTaken(early.externalId)
      throw err
    })
  }

  /**
   * The user's addresses as wanted: new ones added verified, the primary moved to userName, those left out removed.
   * Whether any of that changed what SCIM shows.
   */
  private async placeAddresses(trx: Trx, id: number, want: Desired, now: number, cause: Cause): Promise<boolean> {
    const wanted = want.addresses ?? [want.userName]
    let held = await lockAddresses(trx, id)
    let changed = false
    for (const value of wanted) {
      const row = held.find((e) => sameMailbox(e.address, value))
      if (!row) await this.addAddress(trx, id, value, now, cause)
      // The directory vouches for the address it names as the user's: the others keep their marks as they are.
      else if (row.verified_at === null && sameMailbox(value, want.userName)) await verifyAddress(trx, id, row.id, now, cause)
      changed ||= !row
    }
    held = await lockAddresses(trx, id)
    const primary = held.find((e) => sameMailbox(e.address, want.userName))
    if (!primary) throw new EmailTaken(want.userName)
    if (primary.primary_user_id === null) {
      await makePrimary(trx, primary, now, cause)
      changed = true
    }
    if (want.addresses) {
      for (const row of held) {
        if (want.addresses.some((a) => foldedKey(a) === foldedKey(row.address))) continue
        await removeEmail(trx, { ...row, primary_user_id: null }, cause)
        changed = true
      }
    }
    return changed
  }

  /** SCIM tokens: made (the token shown once, its SHA-256 kept), listed, deleted. */
  async newToken(description: string, createdBy: number): Promise<ScimTokenRow & { token: string }> {
    const { token, hash } = newToken()
    const id = await insertScimToken(this.db, { token_hash: hash, description, created_by: createdBy, created_at: Date.now(), last_used_at: null })
    return { ...written(await findScimToken(this.db, id), `SCIM token ${id}`), token }
  }

  listTokens(before: number, limit: number): Promise<ScimTokenRow[]> {
    return listScimTokens(this.db, before, limit)
  }

  async deleteToken(id: number): Promise<void> {
    if (!await deleteScimToken(this.db, id)) throw scimTokenNotFound(id)
  }
}

