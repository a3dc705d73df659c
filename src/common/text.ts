import { InvalidInput } from './errors.js'

/**
 * The form under which text is compared, indexed and searched: case-insensitive, Unicode-normalised. Addresses
 * (`emails.address_norm`) and names (`users.name_search`) are both kept under it.
 */
export function foldedKey(text: string): string {
  return text.normalize('NFC').toLowerCase()
}

/**
 * The key under which an address given by a client is looked up, or undefined when no stored address can match it.
 * Stored addresses never hold white space, and MySQL/MariaDB collations pad trailing spaces, so `a@b.c ` must be
 * refused here rather than left to the engine.
 */
export function addressLookupKey(address: string): string | undefined {
  const key = foldedKey(address)
  return /\s/.test(key) ? undefined : key
}

/** Whether two addresses name the same mailbox (letter case and Unicode normalisation aside). */
export function sameMailbox(a: string, b: string): boolean {
  return foldedKey(a) === foldedKey(b)
}

/** The longest name, in code points, as stored and as searched (users.name and users.name_search). */
export const MAX_NAME_LENGTH = 200

/**
 * The search key of a name about to be stored. Lower-casing and NFC can lengthen a name (`İ` becomes two code points,
 * U+0958 two as well), so a name valid as sent may not fit its search column: that is the client's 400 here, the same
 * on every engine, rather than a driver error on one and a silent overflow on another.
 */
export function storedNameKey(name: string): string {
  const key = foldedKey(name)
  if ([...key].length > MAX_NAME_LENGTH) {
    throw new InvalidInput(`name is too long once lower-cased and normalised (at most ${MAX_NAME_LENGTH} characters)`,
      [{ path: '/name', in: 'body', message: `must have at most ${MAX_NAME_LENGTH} characters once lower-cased and normalised` }])
  }
  return key
}

/** A `\u` escape of a UTF-16 surrogate in JSON text: only such text parses into a string with a lone one. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * Whether what JSON `text` parsed into holds a lone UTF-16 surrogate, in a string or a key: UTF-8 has no form for
 * one, and the engines would keep it differently (SQLite its bytes, MariaDB a replacement character).
 */
export function holdsLoneSurrogate(text: string, value: unknown): boolean {
  if (!SURROGATE_ESCAPE.test(text)) return false
  const lone = (v: unknown): boolean => {
    if (typeof v === 'string') return LONE_SURROGATE.test(v)
    if (Array.isArray(v)) return v.some(lone)
    return v !== null && typeof v === 'object' && Object.entries(v).some(([k, x]) => LONE_SURROGATE.test(k) || lone(x))
  }
  return lone(value)
}
