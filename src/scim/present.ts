import { SCIM_BASE, SCIM_USER_SCHEMA } from '../../schemas/scim.js'
import type { ScimToken } from '../../schemas/scim.js'
import { VersionConflict } from '../common/errors.js'
import { isoTimestamp as iso } from '../common/timestamps.js'
import { ifMatchTags } from '../http/etag.js'
import { bannedAt } from '../accounts/users.js'
import type { ScimTokenRow, ScimUserRow } from './repository.js'

export const scimUserPath = (id: number) => `${SCIM_BASE}/Users/${id}`
export const scimTokenPath = (id: number) => `/scim-tokens/${id}`

type Versioned = Pick<ScimUserRow, 'version' | 'emails' | 'status' | 'banned_until'>

/** The tag of a user's version and addresses; `ended` marks it shown lifted from a ban the lift has not written yet. */
function tagOf(row: Versioned, ended: boolean): string {
  const ids = row.emails.map((e) => e.primary_user_id === null ? e.id : `${e.id}p`)
  return `"${[`v${row.version}${ended ? '-ended' : ''}`, ...ids].join('.')}"`
}

/** Whether the user is shown lifted from a ban whose end has come, before the lift writes it (users/ban-lift.ts). */
const banEnded = (row: Versioned, now: number) => row.status === 'BANNED' && !bannedAt(row, now)

/**
 * A user's SCIM version, meta.version and the ETag of its answers: weak, of the user's version and of its addresses
 * (their ids, the primary's marked), since an address added or removed through the API changes what SCIM shows
 * without moving the user's version; and, as the API's tag, apart for a ban ended but not yet lifted.
 */
export function scimVersion(row: Versioned, now = Date.now()): string {
  return `W/${tagOf(row, banEnded(row, now))}`
}

/** What a SCIM If-Match names: undefined (no header), 'any' (`*`), or the tags, compared without `W/`. */
export type ScimPrecondition = 'any' | string[] | undefined

export function scimPrecondition(header: string | undefined): ScimPrecondition {
  const tags = ifMatchTags(header)
  return Array.isArray(tags) ? tags.map((tag) => tag.replace(/^W\//, '')) : tags
}

/** PRECONDITION_FAILED unless the If-Match names the user's version and addresses as they now are, either way shown. */
export function mustMatchScim(row: Versioned, expected: ScimPrecondition): void {
  if (Array.isArray(expected) && !expected.some((tag) => tag === tagOf(row, false) || tag === tagOf(row, true))) throw new VersionConflict()
}

/** A SCIM User as JSON: the resource, before `attributes` and `excludedAttributes` narrow it. */
export type ScimJson = Record<string, unknown>

/** SCIM's given and family names from Roster's one name: its first word, and the rest. */
export function nameParts(name: string): { givenName: string; familyName: string } {
  const words = name.trim().split(/\s+/)
  return { givenName: words[0] ?? '', familyName: words.slice(1).join(' ') }
}

/** A SCIM User as its answers show it, its meta (the version its ETag repeats) typed for them. */
export type ScimUserJson = ScimJson & { meta: { resourceType: string; created: string; lastModified: string; location: string; version: string } }

export function presentScimUser(row: ScimUserRow, base: string): ScimUserJson {
  const now = Date.now()
  const parts = nameParts(row.name)
  return {
    schemas: [SCIM_USER_SCHEMA],
    id: String(row.id),
    ...(row.external_id === null ? {} : { externalId: row.external_id }),
    userName: row.email ?? '',
    name: { formatted: row.name, ...(parts.givenName ? { givenName: parts.givenName } : {}), ...(parts.familyName ? { familyName: parts.familyName } : {}) },
    displayName: row.name,
    emails: row.emails.map((e) => ({ value: e.address, type: 'work', primary: e.primary_user_id !== null })),
    // As the API shows it: a ban whose end has come shows lifted at once.
    active: !bannedAt(row, now),
    meta: {
      resourceType: 'User',
      created: iso(row.created_at),
      lastModified: iso(row.updated_at),
      location: base + scimUserPath(row.id),
      version: scimVersion(row, now)
    }
  }
}

/** Attributes always returned, whatever `attributes` and `excludedAttributes` say. */
const ALWAYS = new Set(['schemas', 'id'])

/** An attribute named in `attributes` or `excludedAttributes`, lower-cased, without the User schema's URN. */
function attributeName(raw: string): string {
  const name = raw.trim().toLowerCase()
  const urn = `${SCIM_USER_SCHEMA.toLowerCase()}:`
  return name.startsWith(urn) ? name.slice(urn.length) : name
}

/**
 * What `attributes` (with `schemas` and `id`) or `excludedAttributes` leave of a resource (RFC 7644 §3.4.2.5), the
 * lists read once for all the resources of an answer.
 */
export function projection(attributes: string | undefined, excluded: string | undefined): (resource: ScimJson) => ScimJson {
  const names = (list: string | undefined) => (list ?? '').split(',').map(attributeName).filter((n) => n !== '')
  const wanted = names(attributes)
  const dropped = names(excluded)
  if (wanted.length === 0 && dropped.length === 0) return (resource) => resource
  return (resource) => {
    const out: ScimJson = {}
    for (const [key, value] of Object.entries(resource)) {
      const lower = key.toLowerCase()
      if (ALWAYS.has(lower)) {
        out[key] = value
        continue
      }
      if (wanted.length > 0) {
        if (wanted.includes(lower)) out[key] = value
        else {
          const subs = wanted.filter((w) => w.startsWith(`${lower}.`)).map((w) => w.slice(lower.length + 1))
          if (subs.length > 0) out[key] = narrowed(value, (sub) => subs.includes(sub))
        }
      } else if (!dropped.includes(lower)) {
        const subs = dropped.filter((d) => d.startsWith(`${lower}.`)).map((d) => d.slice(lower.length + 1))
        out[key] = subs.length > 0 ? narrowed(value, (sub) => !subs.includes(sub)) : value
      }
    }
    return out
  }
}

/** A complex value (or each of a multi-valued one's) keeping the sub-attributes `keep` says. */
function narrowed(value: unknown, keep: (sub: string) => boolean): unknown {
  const one = (v: unknown) => (v !== null && typeof v === 'object'
    ? Object.fromEntries(Object.entries(v).filter(([k]) => keep(k.toLowerCase())))
    : v)
  return Array.isArray(value) ? value.map(one) : one(value)
}

export function presentScimToken(row: ScimTokenRow, base: string): ScimToken {
  return {
    id: row.id,
    href: base + scimTokenPath(row.id),
    description: row.description,
    created_at: iso(row.created_at),
    last_used_at: row.last_used_at === null ? null : iso(row.last_used_at)
  }
}
