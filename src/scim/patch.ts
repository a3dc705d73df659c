import { SCIM_USER_SCHEMA } from '../../schemas/scim.js'
import { foldedKey } from '../common/text.js'
import { invalidSyntax, ScimInvalid } from './errors.js'
import type { ScimJson } from './present.js'

// SCIM PATCH (RFC 7644 §3.5.2) over a User's JSON, as Okta and Entra ID send it: op names in any case, operations
// with or without a path, a path's attribute names in any case, value filters on emails. The scim-patch package
// would do the generic part, but Roster needs its own reading of the result (a filter on `type` picks the primary
// address, unknown attributes are ignored, not refused), so the applier is this small module of its own.

type Obj = Record<string, unknown>

/** The User's attributes Roster keeps, by their lower-cased names; others (enterprise extension, phone numbers…) are ignored. */
const ATTRIBUTES: Record<string, string> = {
  username: 'userName', externalid: 'externalId', displayname: 'displayName', name: 'name', emails: 'emails', active: 'active', password: 'password'
}
const READ_ONLY = new Set(['id', 'meta', 'schemas'])
const NAME_PARTS: Record<string, string> = { formatted: 'formatted', givenname: 'givenName', familyname: 'familyName' }
const EMAIL_PARTS: Record<string, string> = { value: 'value', type: 'type', primary: 'primary', display: 'display' }
const USER_URN = `${SCIM_USER_SCHEMA.toLowerCase()}:`

const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v)

/** A path: an attribute, an optional value filter and an optional sub-attribute; null for an attribute Roster ignores. */
interface Path { attribute: string; filter?: Array<[string, unknown]>; sub?: string }

export function parsePath(raw: string): Path | null {
  let text = raw.trim()
  if (text.toLowerCase().startsWith(USER_URN)) text = text.slice(USER_URN.length)
  // Extensions (Entra's enterprise attributes) are not kept.
  if (text.toLowerCase().startsWith('urn:')) return null
  const m = /^([A-Za-z][\w$-]*)(?:\[(.*)\])?(?:\.([A-Za-z][\w$-]*))?$/.exec(text)
  if (!m) throw new ScimInvalid('invalidPath', `The path ${raw} is not a SCIM attribute path`)
  const lower = m[1]!.toLowerCase()
  if (READ_ONLY.has(lower)) throw new ScimInvalid('mutability', `${m[1]} is read-only`)
  const attribute = ATTRIBUTES[lower]
  if (!attribute) return null
  const path: Path = { attribute }
  if (m[2] !== undefined) {
    if (attribute !== 'emails') throw new ScimInvalid('invalidPath', `The path ${raw} filters ${m[1]}, which has no values to select`)
    path.filter = parseValueFilter(m[2])
  }
  if (m[3] !== undefined) {
    const parts = attribute === 'name' ? NAME_PARTS : attribute === 'emails' ? EMAIL_PARTS : {}
    const sub = parts[m[3].toLowerCase()]
    if (!sub) return null
    path.sub = sub
  }
  return path
}

/** `type eq "work"`, `value eq "a@b.c" and primary eq true`: the only filters a path's brackets take here. */
function parseValueFilter(text: string): Array<[string, unknown]> {
  const terms: Array<[string, unknown]> = []
  const term = /\s*([A-Za-z]+)\s+eq\s+("(?:[^"\\]|\\.)*"|true|false|null|-?\d+(?:\.\d+)?)\s*(?:and\s+|$)/iy
  let at = 0
  while (at < text.length) {
    term.lastIndex = at
    const m = term.exec(text)
    if (!m) throw new ScimInvalid('invalidFilter', `The path's filter [${text}] is not one Roster takes: attribute eq value, joined by and`)
    terms.push([m[1]!.toLowerCase(), filterValue(m[2]!, text)])
    at = term.lastIndex
  }
  if (terms.length === 0) throw new ScimInvalid('invalidFilter', 'The path\'s filter is empty')
  return terms
}

/** A value of a path's filter: true, false, null, a number, or a JSON string (its escapes JSON's). */
function filterValue(raw: string, text: string): unknown {
  const lower = raw.toLowerCase()
  if (lower === 'true' || lower === 'false') return lower === 'true'
  try {
    return JSON.parse(raw) as unknown
  } catch {
    throw new ScimInvalid('invalidFilter', `The path's filter [${text}] has a string that is not valid JSON`)
  }
}

function matches(entry: Obj, filter: Array<[string, unknown]>): boolean {
  return filter.every(([key, want]) => {
    const found = Object.entries(entry).find(([k]) => k.toLowerCase() === key)?.[1]
    if (typeof want === 'string' && typeof found === 'string') return foldedKey(want) === foldedKey(found)
    return found === want
  })
}

/** The emails a filter selects. Every address is of type work: a filter on type alone means the primary one. */
function selected(emails: Obj[], filter: Array<[string, unknown]>): Obj[] {
  const hits = emails.filter((e) => matches(e, filter))
  if (hits.length > 1 && filter.every(([k]) => k === 'type')) {
    const primary = hits.find((e) => e.primary === true)
    return primary ? [primary] : hits.slice(0, 1)
  }
  return hits
}

/** One email entry from a value: an object, or an address alone. */
function emailEntry(value: unknown): Obj {
  if (typeof value === 'string') return { value, type: 'work' }
  if (!isObj(value)) throw new ScimInvalid('invalidValue', 'An email is an object with a value')
  const out: Obj = {}
  for (const [k, v] of Object.entries(value)) out[EMAIL_PARTS[k.toLowerCase()] ?? k] = v
  return out
}

function emailEntries(value: unknown): Obj[] {
  const entries = (Array.isArray(value) ? value : [value]).map(emailEntry)
  // RFC 7643 §2.4: primary true appears once at most.
  if (entries.filter((e) => e.primary === true).length > 1) throw new ScimInvalid('invalidValue', 'More than one of the emails given is primary')
  return entries
}

/** One primary at most: the last entry marked primary keeps the mark. */
function onePrimary(emails: Obj[], chosen?: Obj): void {
  const keep = chosen ?? [...emails].reverse().find((e) => e.primary === true)
  for (const e of emails) if (e !== keep && e.primary === true) e.primary = false
}

function nameObject(value: unknown): Obj {
  if (!isObj(value)) throw new ScimInvalid('invalidValue', 'name is an object')
  const out: Obj = {}
  for (const [k, v] of Object.entries(value)) {
    const part = NAME_PARTS[k.toLowerCase()]
    if (part) out[part] = v
  }
  return out
}

type Op = 'add' | 'replace' | 'remove'

function apply(resource: Obj, op: Op, path: Path, value: unknown): void {
  // A JSON null is a removal, as Entra ID sends it.
  if (value === null && op !== 'remove') return apply(resource, 'remove', path, undefined)
  const { attribute, filter, sub } = path
  if (attribute === 'name') {
    const name = isObj(resource.name) ? resource.name : {}
    if (sub) {
      if (op === 'remove') delete name[sub]
      else name[sub] = value
      resource.name = name
    } else if (op === 'remove') delete resource.name
    else resource.name = op === 'add' ? { ...name, ...nameObject(value) } : { ...name, ...nameObject(value) }
    return
  }
  if (attribute === 'emails') return applyEmails(resource, op, filter, sub, value)
  if (op === 'remove') delete resource[attribute]
  else resource[attribute] = value
}

function applyEmails(resource: Obj, op: Op, filter: Array<[string, unknown]> | undefined, sub: string | undefined, value: unknown): void {
  const emails = (Array.isArray(resource.emails) ? resource.emails : []).filter(isObj)
  if (!filter) {
    if (sub) {
      // `emails.value` without a filter: the primary address's.
      return applyEmails(resource, op, [['primary', true]], sub, value)
    }
    if (op === 'remove') resource.emails = []
    else {
      const given = emailEntries(value)
      if (op === 'replace') resource.emails = given
      else {
        for (const entry of given) {
          const same = emails.find((e) => typeof e.value === 'string' && typeof entry.value === 'string' && foldedKey(e.value) === foldedKey(entry.value))
          if (same) Object.assign(same, entry)
          else emails.push(entry)
        }
        resource.emails = emails
      }
      onePrimary(resource.emails as Obj[], (resource.emails as Obj[]).find((e) => given.includes(e) && e.primary === true))
    }
    return
  }
  const hits = selected(emails, filter)
  if (op === 'remove') {
    if (hits.length === 0) throw new ScimInvalid('noTarget', 'No email matches the path\'s filter')
    if (sub) for (const e of hits) delete e[sub]
    else resource.emails = emails.filter((e) => !hits.includes(e))
    return
  }
  if (hits.length === 0) {
    if (op === 'replace' && !filter.every(([k]) => k === 'type')) throw new ScimInvalid('noTarget', 'No email matches the path\'s filter')
    // An address of a type the user has none of yet: added, as Entra ID adds its first work address.
    const entry: Obj = Object.fromEntries(filter)
    if (sub) entry[sub] = value
    else Object.assign(entry, emailEntry(value))
    resource.emails = [...emails, entry]
    return
  }
  for (const e of hits) {
    if (sub) e[sub] = value
    else Object.assign(e, emailEntry(value))
  }
  resource.emails = emails
  if (hits.some((e) => e.primary === true)) onePrimary(emails, hits.find((e) => e.primary === true))
}

/** Applies a PatchOp's operations, in order, to a copy of the resource. */
export function applyPatch(resource: ScimJson, body: unknown): ScimJson {
  const out: Obj = structuredClone(resource)
  if (!isObj(body)) throw invalidSyntax('The body is not a PatchOp')
  const operations = Object.entries(body).find(([k]) => k.toLowerCase() === 'operations')?.[1]
  if (!Array.isArray(operations) || operations.length === 0) throw invalidSyntax('A PatchOp needs Operations: a list of add, replace and remove')
  for (const raw of operations) {
    if (!isObj(raw)) throw invalidSyntax('Each operation is an object with op, path and value')
    const field = (name: string) => Object.entries(raw).find(([k]) => k.toLowerCase() === name)?.[1]
    const opName = field('op')
    const op = typeof opName === 'string' ? opName.toLowerCase() : ''
    if (op !== 'add' && op !== 'replace' && op !== 'remove') throw invalidSyntax(`The op ${JSON.stringify(opName)} is none of add, replace and remove`)
    const rawPath = field('path')
    const value = field('value')
    if (op !== 'remove' && value === undefined) throw invalidSyntax(`An ${op} needs a value`)
    if (rawPath !== undefined && rawPath !== null && rawPath !== '') {
      if (typeof rawPath !== 'string') throw new ScimInvalid('invalidPath', 'path is a string')
      const path = parsePath(rawPath)
      if (path) apply(out, op, path, value)
      continue
    }
    if (op === 'remove') throw new ScimInvalid('noTarget', 'A remove needs a path')
    if (!isObj(value)) throw invalidSyntax(`An ${op} without a path takes an object of attributes as its value`)
    for (const [key, v] of Object.entries(value)) {
      if (key.toLowerCase() === 'schemas') continue
      const path = parsePath(key)
      if (path) apply(out, op, path, v)
    }
  }
  return out
}
