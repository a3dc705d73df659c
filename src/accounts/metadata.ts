import type { Metadata, MetadataPart } from '../../schemas/metadata.js'
import { invalidField, MetadataTooLarge } from '../common/errors.js'
import { holdsNonFinite, jsonDepth } from '../common/json-depth.js'
import { mustMatch, type Expected } from '../common/versions.js'
import type { Db, Trx } from '../database/index.js'
import { recordEvent, type Cause } from '../events/record.js'
import { userPath } from './present.js'
import { lockUser } from './users.js'

/** The three parts of a user's metadata. */
export const METADATA_PARTS = ['public', 'private', 'unsafe'] as const
export type MetadataPartName = (typeof METADATA_PARTS)[number]
export type MetadataParts = Record<MetadataPartName, MetadataPart>

/** The deepest a part may nest (`{}` is 1). */
export const METADATA_MAX_DEPTH = 10

export interface StoredMetadata {
  parts: MetadataParts
  /** 1 for a user without a row: the ETag a first write's If-Match names. */
  version: number
  exists: boolean
}

/** What a write does to each part it names: merged as an RFC 7396 patch (null empties the part), or replaced. */
export type MetadataChange =
  | { merge: Partial<Record<MetadataPartName, MetadataPart | null>> }
  | { replace: Partial<Record<MetadataPartName, MetadataPart>> }

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/** Sets an own property, even one named `__proto__` (JSON.parse makes those as plain keys). */
function put(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
}

/** RFC 7396: a non-object patch replaces; an object patch merges key by key, `null` removing the key. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch
  const result: Record<string, unknown> = {}
  if (isObject(target)) for (const [key, value] of Object.entries(target)) put(result, key, value)
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key]
    else put(result, key, mergePatch(result[key], value))
  }
  return result
}

/** METADATA_TOO_LARGE unless the part is within the limits (path: `/public`, as the body names it). */
export function checkMetadataPart(path: string, part: unknown, maxBytes: number): void {
  if (jsonDepth(part) > METADATA_MAX_DEPTH) throw new MetadataTooLarge(path, `nests deeper than ${METADATA_MAX_DEPTH}`)
  if (Buffer.byteLength(JSON.stringify(part)) > maxBytes) throw new MetadataTooLarge(path, `is larger than METADATA_MAX_BYTES (${maxBytes} bytes) as compact JSON`)
}

/** Stored text of a part, read back as the object it was written as. */
const parsed = (text: string): MetadataPart => JSON.parse(text) as MetadataPart

/** A user's metadata as stored; three empty parts at version 1 when it has none. */
export async function readMetadata(db: Db | Trx, userId: number): Promise<StoredMetadata> {
  const row = await db.selectFrom('user_metadata').select(['public', 'private', 'unsafe', 'version']).where('user_id', '=', userId).executeTakeFirst()
  if (!row) return { parts: { public: {}, private: {}, unsafe: {} }, version: 1, exists: false }
  return { parts: { public: parsed(row.public), private: parsed(row.private), unsafe: parsed(row.unsafe) }, version: row.version, exists: true }
}

export const metadataPath = (userId: number) => `${userPath(userId)}/metadata`

/** The Metadata resource; `private` only for an admin (and in events, which the feed filters for plain users). */
export function presentMetadata(userId: number, parts: MetadataParts, base: string, withPrivate: boolean): Metadata {
  const shown: Metadata = { href: base + metadataPath(userId), public: parts.public, unsafe: parts.unsafe }
  if (withPrivate) shown.private = parts.private
  return shown
}

/** Per part, the keys whose values changed, with their former values (null: absent before). */
function changedKeys(before: MetadataParts, after: MetadataParts): Partial<Record<MetadataPartName, Record<string, unknown>>> {
  const previous: Partial<Record<MetadataPartName, Record<string, unknown>>> = {}
  for (const name of METADATA_PARTS) {
    const was = before[name]
    const now = after[name]
    const keys = new Set([...Object.keys(was), ...Object.keys(now)])
    const changed: Record<string, unknown> = {}
    for (const key of keys) {
      if (JSON.stringify(was[key]) !== JSON.stringify(now[key])) put(changed, key, Object.hasOwn(was, key) ? was[key] : null)
    }
    if (Object.keys(changed).length) previous[name] = changed
  }
  return previous
}

/**
 * Applies a change to a user's metadata under the user's lock (lockUser: every metadata write takes it), so that two
 * patches of different keys both land: each merges into what the one before it committed. If-Match is checked
 * under the lock; limits on the parts as they would be stored. A change that changes nothing writes nothing.
 * `user.metadata_changed` carries the Metadata whole and, per part, the changed keys' former values. A dry run
 * (an import's) checks and tells whether it would change anything, and writes nothing.
 */
export async function changeMetadata(
  trx: Trx, userId: number, change: MetadataChange, expected: Expected, cause: Cause, maxBytes: number, dryRun = false
): Promise<StoredMetadata & { changed: boolean }> {
  await lockUser(trx, userId)
  const before = await readMetadata(trx, userId)
  mustMatch(before.version, expected)
  const parts: MetadataParts = { ...before.parts }
  const given: Partial<Record<MetadataPartName, MetadataPart | null>> = 'merge' in change ? change.merge : change.replace
  for (const name of METADATA_PARTS) {
    const value = given[name]
    if (value === undefined) continue
    // Checked before merging too: a patch nested past any stack is refused before it is walked.
    if (jsonDepth(value) > METADATA_MAX_DEPTH) throw new MetadataTooLarge(`/${name}`, `nests deeper than ${METADATA_MAX_DEPTH}`)
    if (value !== null && holdsNonFinite(value)) throw invalidField(`/${name}`, 'body', 'holds a number past what a double holds')
    parts[name] = value === null ? {} : 'merge' in change ? mergePatch(before.parts[name], value) as MetadataPart : value
    checkMetadataPart(`/${name}`, parts[name], maxBytes)
  }
  const previous = changedKeys(before.parts, parts)
  if (Object.keys(previous).length === 0) return { ...before, changed: false }
  if (dryRun) return { parts, version: before.version + 1, exists: true, changed: true }
  const now = Date.now()
  const version = before.version + 1
  const text = { public: JSON.stringify(parts.public), private: JSON.stringify(parts.private), unsafe: JSON.stringify(parts.unsafe) }
  if (before.exists) {
    await trx.updateTable('user_metadata').set({ ...text, version, updated_at: now }).where('user_id', '=', userId).execute()
  } else {
    await trx.insertInto('user_metadata').values({ user_id: userId, ...text, version, updated_at: now }).execute()
  }
  await recordEvent(trx, cause, 'user.metadata_changed', userId, presentMetadata(userId, parts, cause.base, true), previous)
  return { parts, version, exists: true, changed: true }
}
