import { sql, type RawBuilder, type SqlBool } from 'kysely'
import { parse, type Compare, type Filter } from 'scim2-parse-filter'
import { Forbidden, InvalidInput } from '../common/errors.js'
import { isTimestamp } from '../common/formats.js'
import { foldedKey } from '../common/text.js'
import type { DialectName } from '../database/index.js'
import { likeEscape } from '../database/sql.js'

/**
 * One filter language for users: SCIM's syntax (RFC 7644 §3.4.2.2), parsed by scim2-parse-filter, over Roster's own
 * attribute names (`GET /users?filter=`) or SCIM's (`/scim/v2/Users?filter=`), translated into SQL that both engines
 * run. Values are always parameters; equality on an address, a name, an external id or the status uses its index.
 */
export type FilterNode = Filter

/** Longest filter text taken, and the most comparisons in one: a filter's SQL stays small. */
const MAX_LENGTH = 2000
const MAX_TERMS = 50

export const invalidFilter = (detail: string) =>
  new InvalidInput(detail, [{ path: '/filter', in: 'query', message: detail }], 'INVALID_FILTER')

/** How an attribute is compared. */
type Kind =
  /** Case-insensitive text, compared on a lower-cased column. */
  | { type: 'folded'; column: string }
  /** Text compared exactly. */
  | { type: 'exact'; column: string }
  /** One of a few values, compared exactly. */
  | { type: 'enum'; column: string; values: readonly string[] }
  /** A time: an RFC 3339 string against a column of milliseconds. */
  | { type: 'time'; column: string }
  | { type: 'id' }
  /** SCIM's `active`: the status ACTIVE. */
  | { type: 'active' }
  /** Any address of the user (case-insensitive); `primary` only the primary one. */
  | { type: 'email'; primary: boolean }
  /** A word of the name: SCIM's given (first) or family (last) name, from Roster's one name. */
  | { type: 'name-part'; part: 'first' | 'last' }

const ROSTER: Record<string, Kind> = {
  email: { type: 'email', primary: false },
  name: { type: 'folded', column: 'users.name_search' },
  status: { type: 'enum', column: 'users.status', values: ['ACTIVE', 'BANNED'] },
  role: { type: 'enum', column: 'users.role', values: ['user', 'admin'] },
  external_id: { type: 'exact', column: 'users.external_id' },
  created_at: { type: 'time', column: 'users.created_at' },
  updated_at: { type: 'time', column: 'users.updated_at' },
  id: { type: 'id' }
}

const SCIM: Record<string, Kind> = {
  username: { type: 'email', primary: true },
  externalid: { type: 'exact', column: 'users.external_id' },
  emails: { type: 'email', primary: false },
  'emails.value': { type: 'email', primary: false },
  displayname: { type: 'folded', column: 'users.name_search' },
  'name.formatted': { type: 'folded', column: 'users.name_search' },
  'name.givenname': { type: 'name-part', part: 'first' },
  'name.familyname': { type: 'name-part', part: 'last' },
  active: { type: 'active' },
  id: { type: 'id' },
  'meta.created': { type: 'time', column: 'users.created_at' },
  'meta.lastmodified': { type: 'time', column: 'users.updated_at' }
}

const SCIM_USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:user:'

/** Parses a filter's text; INVALID_FILTER naming the offending part when it is not one. */
export function parseFilter(text: string): FilterNode {
  if (text.length > MAX_LENGTH) throw invalidFilter(`The filter is longer than ${MAX_LENGTH} characters`)
  if (text.trim() === '') throw invalidFilter('The filter is empty: leave it out to select every user')
  // The parser reads a string's backslashes as themselves (but before a quote): each string is read here, as the
  // JSON string RFC 7644 makes it, and the parser is given a stand-in for it.
  const strings: string[] = []
  const standIns = text.replace(JSON_STRING, (literal) => {
    try {
      strings.push(JSON.parse(literal) as string)
    } catch {
      throw invalidFilter(`The filter's string ${literal} is not a JSON string`)
    }
    return `"${strings.length - 1}"`
  })
  // RFC 7644 gives `not` a parenthesised expression only: without them, how far it reaches is a guess.
  const bareNot = /(?:^|[\s([])(not)(?=\s)(?!\s*\()/i.exec(standIns)
  if (bareNot) throw invalidFilter(`The filter is malformed: \`${bareNot[1]}\` takes an expression in parentheses, as not (…)`)
  let node: Filter
  try {
    node = parse(standIns)
  } catch (err) {
    throw invalidFilter(`The filter is malformed: ${whatIsWrong((err as Error).message, strings)}`)
  }
  checkNots(node)
  if (terms(node) > MAX_TERMS) throw invalidFilter(`The filter has more than ${MAX_TERMS} comparisons`)
  return withStrings(node, strings)
}

/**
 * The parser's complaint in the filter's own terms: the part it stopped at, with the strings it was given as
 * stand-ins shown as written.
 */
function whatIsWrong(message: string, strings: string[]): string {
  const shown = (token: string) => {
    const standIn = /^"(\d+)"$/.exec(token.trim())
    return standIn ? JSON.stringify(strings[Number(standIn[1])]) : `\`${token.trim()}\``
  }
  const said = message.replace(/\s+/g, ' ').trim()
  let m
  if (said.startsWith('unexpected EOT ')) {
    // The parser lists the tokens, comma-separated, the one it stopped at in brackets: `name,pr,[name],pr,`.
    const marked = said.slice('unexpected EOT '.length).split(',').find((token) => token.length >= 3 && token.startsWith('[') && token.endsWith(']'))
    if (marked) return `${shown(marked.slice(1, -1))} follows a whole expression (a missing and, or, or a parenthesis too many?)`
  }
  if (/^\[\(EOT\)\] is not json$/.test(said)) return 'a comparison ends without the value it compares with'
  if ((m = /^\[(.+)\(\w+\)\] is not json$/.exec(said))) return `${shown(m[1]!)} is not a value: a value is a "string", a number, true, false or null`
  if ((m = /^Unexpected token (.*) as valFilter operator$/.exec(said))) return `${shown(m[1]!)} is not an attribute followed by one of eq, ne, co, sw, ew, pr, gt, ge, lt, le`
  if (/expected '\)'$/.test(said)) return 'a ( is not closed'
  if (/expected '\]'$/.test(said)) return 'a [ is not closed'
  if (/^Unexpected token \(EOT\)$/.test(said)) return 'it ends where an expression is expected'
  if ((m = /^Unexpected token (.*) \(\w+\)$/.exec(said))) return `${shown(m[1]!)} stands where an attribute is expected`
  return said.replace(/"(\d+)"/g, (_, n: string) => JSON.stringify(strings[Number(n)]))
}

/** A quoted string, its escapes whatever follows a backslash (JSON.parse then tells whether they are JSON's). */
const JSON_STRING = /"(?:[^"\\]|\\.)*"/g

/** The tree with each string's stand-in replaced by the string. */
function withStrings(node: Filter, strings: string[]): Filter {
  switch (node.op) {
    case 'and':
    case 'or':
      return { ...node, filters: node.filters.map((f) => withStrings(f, strings)) }
    case 'not':
      return { ...node, filter: withStrings(node.filter, strings) }
    case '[]':
      return { ...node, valFilter: withStrings(node.valFilter, strings) }
    case 'pr':
      return node
    default:
      return typeof node.compValue === 'string' ? { ...node, compValue: strings[Number(node.compValue)]! } : node
  }
}

/** The parser reads `a not (b)` as a `not` of two expressions, which RFC 7644 has no place for. */
function checkNots(node: Filter): void {
  if (node.op === 'and' || node.op === 'or') node.filters.forEach(checkNots)
  else if (node.op === '[]') checkNots(node.valFilter)
  else if (node.op === 'not') {
    if (typeof node.filter !== 'object' || node.filter === null) {
      throw invalidFilter('The filter is malformed: `not` follows a whole expression (a missing and, or?)')
    }
    checkNots(node.filter)
  }
}

function terms(node: Filter): number {
  if (node.op === 'and' || node.op === 'or') return node.filters.reduce((n, f) => n + terms(f), 0)
  if (node.op === 'not') return terms(node.filter)
  if (node.op === '[]') return 1 + terms(node.valFilter)
  return 1
}

/** Who filters, on which engine: metadata is compared with the engine's own JSON functions, `private` by admins only. */
export interface RosterFilterOptions {
  engine: DialectName
  admin: boolean
}

/** The filter over Roster's names (`GET /users?filter=`), as a condition on `users`. */
export const rosterUserFilter = (node: FilterNode, options: RosterFilterOptions) => condition(node, ROSTER, false, options)

/** The filter over SCIM's names (`/scim/v2/Users?filter=`), case-insensitive in its names as SCIM says. */
export const scimUserFilter = (node: FilterNode) => condition(node, SCIM, true, undefined)

function condition(node: Filter, names: Record<string, Kind>, scim: boolean, options: RosterFilterOptions | undefined): RawBuilder<SqlBool> {
  switch (node.op) {
    case 'and':
    case 'or': {
      const parts = node.filters.map((f) => condition(f, names, scim, options))
      return sql<SqlBool>`(${sql.join(parts, node.op === 'and' ? sql` and ` : sql` or `)})`
    }
    case 'not':
      return negated(condition(node.filter, names, scim, options))
    case '[]':
      return valuePath(node.attrPath, node.valFilter, scim)
    default: {
      const meta = options && METADATA_PATH.exec(node.attrPath)
      if (meta) return metadata(node, meta[1] as 'public' | 'private', meta[2]!, options)
      return compare(node, kindOf(node.attrPath, names, scim))
    }
  }
}

/** `metadata.public.<key>` / `metadata.private.<key>`: a key of the part, in the characters a JSON path takes unquoted. */
const METADATA_PATH = /^metadata\.(public|private)\.([A-Za-z0-9_-]{1,64})$/

/** The JSON types a value is compared as, as each engine names them (MySQL's JSON_TYPE, SQLite's json_type). */
const JSON_TYPES = {
  mysql: { string: ['STRING'], number: ['INTEGER', 'UNSIGNED INTEGER', 'DOUBLE', 'DECIMAL'], null: 'NULL' },
  sqlite: { string: ['text'], number: ['integer', 'real'], null: 'null' }
} as const

/**
 * A comparison of the JSON value at a key of a metadata part. No index serves it: it is a scan of the users the
 * other filters leave (each user's metadata row read by its key), bounded like every statement by DB_TIMEOUT_MS.
 * A value compares only with a value of its JSON type (a string with a string, a number with a number); `ne` and
 * `eq null` also match users without the key. Plain users naming `private` are refused (FORBIDDEN), as everywhere.
 */
function metadata(node: Compare | { op: 'pr'; attrPath: string }, part: 'public' | 'private', key: string, options: RosterFilterOptions): RawBuilder<SqlBool> {
  if (part === 'private' && !options.admin) throw new Forbidden('Only an admin may filter on private metadata')
  const mysql = options.engine === 'mysql'
  const types = JSON_TYPES[options.engine]
  const column = sql.ref(`fm.${part}`)
  const path = `$."${key}"`
  const type = mysql ? sql`json_type(json_extract(${column}, ${path}))` : sql`json_type(${column}, ${path})`
  const value = mysql ? sql`json_unquote(json_extract(${column}, ${path}))` : sql`json_extract(${column}, ${path})`
  const exists = (cond: RawBuilder<unknown>) => sql<SqlBool>`exists (select 1 from user_metadata as fm where fm.user_id = users.id and ${cond})`
  const present = exists(sql`${type} is not null and ${type} <> ${types.null}`)
  const oneOf = (names: readonly string[]) => sql`${type} in (${sql.join(names.map((n) => sql`${n}`))})`
  if (node.op === 'pr') return present
  const v = node.compValue
  if (v === null) {
    if (node.op !== 'eq' && node.op !== 'ne') throw invalidFilter(`The filter compares ${node.attrPath} with null: only eq and ne`)
    return node.op === 'eq' ? sql<SqlBool>`(not ${present})` : present
  }
  if (node.op === 'ne') return negated(metadata({ ...node, op: 'eq' }, part, key, options))
  if (typeof v === 'boolean') {
    if (node.op !== 'eq') throw invalidFilter(`The filter compares the boolean ${node.attrPath} with ${node.op}: only eq and ne`)
    return exists(mysql ? sql`${type} = 'BOOLEAN' and ${value} = ${v ? 'true' : 'false'}` : sql`${type} = ${v ? 'true' : 'false'}`)
  }
  if (typeof v === 'number') {
    if (node.op === 'co' || node.op === 'sw' || node.op === 'ew') throw invalidFilter(`The filter compares the number ${node.attrPath} with ${node.op}`)
    if (!Number.isFinite(v)) throw invalidFilter(`The filter compares ${node.attrPath} with a number past what a double holds`)
    const number = mysql ? sql`(${value} + 0)` : value
    return exists(sql`${oneOf(types.number)} and ${number} ${sql.raw(OPERATORS[node.op])} ${v}`)
  }
  return exists(sql`${oneOf(types.string)} and ${text(node, value, false)}`)
}

function kindOf(path: string, names: Record<string, Kind>, scim: boolean): Kind {
  let name = path
  if (scim) {
    name = path.toLowerCase()
    if (name.startsWith(SCIM_USER_SCHEMA)) name = name.slice(SCIM_USER_SCHEMA.length)
  }
  const kind = names[name]
  if (!kind) throw invalidFilter(`The filter names an attribute it cannot filter on: ${path}`)
  return kind
}

/** `emails[type eq "work" and value co "@example.com"]`: some address of the user matches the inner filter. */
function valuePath(path: string, inner: Filter, scim: boolean): RawBuilder<SqlBool> {
  if (!scim || path.toLowerCase() !== 'emails') throw invalidFilter(`The filter uses [ ] on an attribute that has no values to select: ${path}`)
  return sql<SqlBool>`exists (select 1 from emails as fe where fe.user_id = users.id and ${emailCondition(inner)})`
}

/** A condition on one address `fe` (type is always work). */
function emailCondition(node: Filter): RawBuilder<SqlBool> {
  switch (node.op) {
    case 'and':
    case 'or':
      return sql<SqlBool>`(${sql.join(node.filters.map(emailCondition), node.op === 'and' ? sql` and ` : sql` or `)})`
    case 'not':
      return negated(emailCondition(node.filter))
    case '[]':
      throw invalidFilter('The filter nests [ ] inside [ ]')
    default:
      return emailAttribute(node)
  }
}

function emailAttribute(node: Compare | { op: 'pr'; attrPath: string }): RawBuilder<SqlBool> {
  const name = node.attrPath.toLowerCase()
  if (name === 'type') {
    if (node.op === 'pr') return sql<SqlBool>`1 = 1`
    if (node.op !== 'eq' && node.op !== 'ne') throw invalidFilter(`The filter compares type with ${node.op}: only eq and ne`)
    const work = typeof node.compValue === 'string' && node.compValue.toLowerCase() === 'work'
    return (node.op === 'eq') === work ? sql<SqlBool>`1 = 1` : sql<SqlBool>`1 = 0`
  }
  if (name === 'primary') {
    if (node.op === 'pr') return sql<SqlBool>`1 = 1`
    const primary = booleanOf(node, 'primary')
    return (node.op === 'eq') === primary ? sql<SqlBool>`fe.primary_user_id is not null` : sql<SqlBool>`fe.primary_user_id is null`
  }
  if (name === 'value') return text(node, sql.ref('fe.address_norm'), true)
  throw invalidFilter(`The filter names an attribute of emails it cannot filter on: ${node.attrPath}`)
}

function booleanOf(node: Compare, name: string): boolean {
  if (node.op !== 'eq' && node.op !== 'ne') throw invalidFilter(`The filter compares ${name} with ${node.op}: only eq and ne`)
  const v = node.compValue
  // Entra ID sends booleans as strings.
  if (v === true || v === 'true' || v === 'True') return true
  if (v === false || v === 'false' || v === 'False') return false
  throw invalidFilter(`The filter compares ${name} with ${JSON.stringify(v)}: a boolean is needed`)
}

const OPERATORS = { eq: '=', ne: '<>', gt: '>', ge: '>=', lt: '<', le: '<=' } as const

/**
 * `not`, as SCIM means it: true wherever the condition is not, a user without the attribute included (SQL's `not`
 * of a comparison with a null is null, which would leave that user out).
 */
const negated = (condition: RawBuilder<SqlBool>) => sql<SqlBool>`((${condition}) is not true)`

function stringValue(node: Compare): string {
  if (typeof node.compValue !== 'string') throw invalidFilter(`The filter compares ${node.attrPath} with ${JSON.stringify(node.compValue)}: a string is needed`)
  return node.compValue
}

/** A text comparison on `column`; `folded` when the column holds lower-cased text. */
function text(node: Compare | { op: 'pr'; attrPath: string }, column: RawBuilder<unknown>, folded: boolean): RawBuilder<SqlBool> {
  if (node.op === 'pr') return sql<SqlBool>`(${column} is not null and ${column} <> '')`
  if (node.op === 'ne') return negated(text({ ...node, op: 'eq' }, column, folded))
  const value = folded ? foldedKey(stringValue(node)) : stringValue(node)
  const like = likeEscape(value)
  switch (node.op) {
    case 'co': return sql<SqlBool>`${column} like ${`%${like}%`} escape '!'`
    case 'sw': return sql<SqlBool>`${column} like ${`${like}%`} escape '!'`
    case 'ew': return sql<SqlBool>`${column} like ${`%${like}`} escape '!'`
    default: return sql<SqlBool>`${column} ${sql.raw(OPERATORS[node.op])} ${value}`
  }
}

function compare(node: Compare | { op: 'pr'; attrPath: string }, kind: Kind): RawBuilder<SqlBool> {
  switch (kind.type) {
    case 'folded':
      return text(node, sql.ref(kind.column), true)
    case 'exact':
      return text(node, sql.ref(kind.column), false)
    case 'enum': {
      if (node.op === 'pr') return sql<SqlBool>`1 = 1`
      if (node.op !== 'eq' && node.op !== 'ne') throw invalidFilter(`The filter compares ${node.attrPath} with ${node.op}: only eq and ne`)
      const value = stringValue(node)
      if (!kind.values.includes(value)) throw invalidFilter(`The filter compares ${node.attrPath} with ${JSON.stringify(value)}: one of ${kind.values.join(', ')}`)
      return sql<SqlBool>`${sql.ref(kind.column)} ${sql.raw(OPERATORS[node.op])} ${value}`
    }
    case 'time': {
      if (node.op === 'pr') return sql<SqlBool>`1 = 1`
      if (node.op === 'co' || node.op === 'sw' || node.op === 'ew') throw invalidFilter(`The filter compares the time ${node.attrPath} with ${node.op}`)
      // Checked as the API's schemas check a time: without a zone Date.parse reads the host's, and it rolls 30 February on.
      const text = stringValue(node)
      const at = isTimestamp(text) ? Date.parse(text) : NaN
      if (!Number.isFinite(at)) throw invalidFilter(`The filter compares ${node.attrPath} with ${JSON.stringify(node.compValue)}: an RFC 3339 time is needed`)
      return sql<SqlBool>`${sql.ref(kind.column)} ${sql.raw(OPERATORS[node.op])} ${at}`
    }
    case 'id': {
      if (node.op === 'pr') return sql<SqlBool>`1 = 1`
      if (node.op === 'co' || node.op === 'sw' || node.op === 'ew') throw invalidFilter(`The filter compares the id with ${node.op}`)
      const id = typeof node.compValue === 'number' ? node.compValue : /^[1-9][0-9]{0,15}$/.test(String(node.compValue)) ? Number(node.compValue) : NaN
      if (!Number.isSafeInteger(id)) throw invalidFilter(`The filter compares the id with ${JSON.stringify(node.compValue)}: an id is needed`)
      return sql<SqlBool>`users.id ${sql.raw(OPERATORS[node.op])} ${id}`
    }
    case 'active': {
      if (node.op === 'pr') return sql<SqlBool>`1 = 1`
      const active = booleanOf(node, 'active')
      return sql<SqlBool>`users.status ${sql.raw((node.op === 'eq') === active ? '=' : '<>')} ${'ACTIVE'}`
    }
    case 'email': {
      const which = kind.primary ? sql`fe.primary_user_id = users.id` : sql`fe.user_id = users.id`
      if (node.op === 'pr') return sql<SqlBool>`exists (select 1 from emails as fe where ${which})`
      if (node.op === 'ne') return negated(compare({ ...node, op: 'eq' }, kind))
      return sql<SqlBool>`exists (select 1 from emails as fe where ${which} and ${text(node, sql.ref('fe.address_norm'), true)})`
    }
    case 'name-part': {
      // A name of one word is a given name alone: it has no family name.
      if (node.op === 'pr') return kind.part === 'first' ? sql<SqlBool>`users.name_search <> ''` : sql<SqlBool>`users.name_search like '% %'`
      const value = likeEscape(foldedKey(stringValue(node)))
      if (node.op !== 'eq' && node.op !== 'sw' && node.op !== 'co') throw invalidFilter(`The filter compares ${node.attrPath} with ${node.op}: eq, sw and co`)
      const word = node.op === 'eq' ? value : node.op === 'sw' ? `${value}%` : `%${value}%`
      if (kind.part === 'last') return sql<SqlBool>`users.name_search like ${`% ${word}`} escape '!'`
      return sql<SqlBool>`(users.name_search like ${`${word} %`} escape '!' or users.name_search like ${word} escape '!')`
    }
  }
}
