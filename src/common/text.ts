/** The form under which addresses are compared and indexed: case-insensitive, Unicode-normalised. */
export function normalizeAddress(address: string): string {
  return address.normalize('NFC').toLowerCase()
}

/**
 * The key under which an address given by a client is looked up, or undefined when no stored address can match it.
 * Stored addresses never hold white space, and MySQL/MariaDB collations pad trailing spaces, so `a@b.c ` must be
 * refused here rather than left to the engine.
 */
export function addressLookupKey(address: string): string | undefined {
  const key = normalizeAddress(address)
  return /\s/.test(key) ? undefined : key
}

/** The form under which names are searched: case-insensitive, Unicode-normalised. */
export function nameSearchKey(name: string): string {
  return name.normalize('NFC').toLowerCase()
}

/** A canonical decimal id: no sign, no leading zero, no exponent, no white space. */
export const CANONICAL_ID = /^[1-9][0-9]*$/
