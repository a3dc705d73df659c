import { createCipheriv, createHash, createHmac, getHashes, pbkdf2, scrypt, timingSafeEqual } from 'node:crypto'
import { promisify } from 'node:util'
import { verify as argon2Verify } from '@node-rs/argon2'
import { verify as bcryptVerify } from '@node-rs/bcrypt'
import { UnsupportedHash } from '../common/errors.js'

/**
 * Password hashes made elsewhere, kept as they are in `users.password_hash` and checked as they are, until the first
 * successful check replaces them with Roster's own argon2id (accounts/secrets.ts).
 *
 * The stored forms, each one string of at most 255 characters (the column's width):
 * - argon2: PHC, `$argon2id$v=19$m=…,t=…,p=…$salt$hash` (and `$argon2i$`, `$argon2d$`), as given;
 * - bcrypt: `$2a$`, `$2b$`, `$2y$`, as given;
 * - scrypt: PHC, `$scrypt$ln=…,r=…,p=…$salt$hash`, as given;
 * - PBKDF2: passlib's `$pbkdf2-sha256$<rounds>$salt$hash` (adapted base64; `$pbkdf2$` is its SHA-1), PHC's
 *   `$pbkdf2-sha256$i=…[,l=…]$salt$hash`, and Django's `pbkdf2_sha256$<iterations>$<salt>$<base64 hash>`, as given;
 * - Firebase's modified scrypt: `$firebase-scrypt$rounds=…,mem=…$<signer key>$<salt separator>$<salt>$<hash>`;
 * - Auth0's plain and keyed digests: `$auth0-<md5|sha1|sha256|sha512|hmac-<digest>>$pos=<prefix|suffix>[,pw=<password
 *   encoding>][,key=<hmac key>]$<salt>$<hash>`.
 * Forms of Roster's own use base64 without padding, as PHC does.
 */

/** The cost of an argon2id hash as Roster makes them: memory in KiB and passes (one lane). */
export interface Argon2Cost {
  memoryKib: number
  passes: number
}

/** A Firebase project's password hash parameters ("Password Hash Parameters" in its console). */
export interface FirebaseHashParams {
  /** base64 */
  signerKey: string
  /** base64 */
  saltSeparator: string
  rounds: number
  memCost: number
}

const COLUMN_WIDTH = 255

// The costliest hashes accepted: beyond, one login would hold a core (or memory) for seconds, at anyone's asking.
const MAX_BCRYPT_COST = 15
const MAX_PBKDF2_ITERATIONS = 5_000_000
const MAX_SCRYPT_BYTES = 256 * 1024 * 1024
const MAX_ARGON2_MEMORY_KIB = 256 * 1024
const MAX_ARGON2_PASSES = 16
const MAX_LANES = 16

/** Digests PBKDF2 and Auth0's HMAC may use here: those node:crypto has among the ones they name. */
const DIGESTS = new Set(['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512', 'ripemd160'].filter((d) => getHashes().includes(d)))
/** Auth0's unkeyed digests, with their output length in bytes. */
const PLAIN_DIGESTS: Record<string, number> = { md5: 16, sha1: 20, sha256: 32, sha512: 64 }
const PASSWORD_ENCODINGS: Record<string, BufferEncoding> = { utf8: 'utf8', 'utf-8': 'utf8', utf16le: 'utf16le', ucs2: 'utf16le', latin1: 'latin1', binary: 'latin1', ascii: 'ascii' }

type Parsed =
  | { kind: 'argon2' | 'bcrypt'; text: string }
  | { kind: 'scrypt'; n: number; r: number; p: number; salt: Buffer; hash: Buffer }
  | { kind: 'pbkdf2'; digest: string; iterations: number; salt: Buffer; hash: Buffer }
  | { kind: 'firebase'; rounds: number; memCost: number; signerKey: Buffer; saltSeparator: Buffer; salt: Buffer; hash: Buffer }
  | { kind: 'digest'; algorithm: string; key: Buffer | undefined; position: 'prefix' | 'suffix'; encoding: BufferEncoding; salt: Buffer; hash: Buffer }

const unsupported = (detail: string) => new UnsupportedHash(detail)

/**
 * The stored form of a hash given in the `roster` format (an export's `password_hash`): the hash itself, once it
 * reads as one of the accepted forms; UNSUPPORTED_HASH for anything else.
 */
export function parsePasswordHash(text: string): string {
  read(text)
  return fitting(text)
}

/** Whether a password matches a stored hash of any accepted form; false for a form not accepted (never a throw). */
export async function verifyPasswordHash(stored: string, password: string): Promise<boolean> {
  let parsed: Parsed
  try {
    parsed = read(stored)
  } catch {
    return false
  }
  return check(parsed, password).catch(() => false)
}

async function check(parsed: Parsed, password: string): Promise<boolean> {
  switch (parsed.kind) {
    case 'argon2':
      return argon2Verify(parsed.text, password)
    case 'bcrypt':
      return bcryptVerify(password, parsed.text)
    case 'scrypt': {
      const { n, r, p, salt, hash } = parsed
      return same(await scryptAsync(password, salt, hash.length, { N: n, r, p, maxmem: scryptMemory(n, r, p) * 2 }), hash)
    }
    case 'pbkdf2':
      return same(await pbkdf2Async(password, parsed.salt, parsed.iterations, parsed.hash.length, parsed.digest), parsed.hash)
    case 'firebase': {
      const { rounds, memCost, signerKey, saltSeparator, salt, hash } = parsed
      const n = 2 ** memCost
      const key = await scryptAsync(password, Buffer.concat([salt, saltSeparator]), 32, { N: n, r: rounds, p: 1, maxmem: scryptMemory(n, rounds, 1) * 2 })
      const cipher = createCipheriv('aes-256-ctr', key, Buffer.alloc(16))
      return same(Buffer.concat([cipher.update(signerKey), cipher.final()]), hash)
    }
    case 'digest': {
      const { algorithm, key, position, encoding, salt, hash } = parsed
      const pw = Buffer.from(password, encoding)
      const message = position === 'prefix' ? Buffer.concat([salt, pw]) : Buffer.concat([pw, salt])
      const digest = key === undefined ? createHash(algorithm).update(message).digest() : createHmac(algorithm, key).update(message).digest()
      return same(digest, hash)
    }
  }
}

/** Whether a stored hash is Roster's own argon2id at the given cost: anything else is replaced at its next good check. */
export function isNativeHash(stored: string, cost: Argon2Cost): boolean {
  return stored.startsWith(`$argon2id$v=19$m=${cost.memoryKib},t=${cost.passes},p=1$`)
}

/** The stored form of Auth0's `custom_password_hash` object (its bulk import's), or UNSUPPORTED_HASH. */
export function fromAuth0Custom(obj: unknown): string {
  if (!isRecord(obj)) throw unsupported('custom_password_hash must be an object')
  const { algorithm, hash } = obj
  if (typeof algorithm !== 'string') throw unsupported('custom_password_hash.algorithm must be a string')
  if (!isRecord(hash) || typeof hash.value !== 'string') throw unsupported('custom_password_hash.hash.value must be a string')
  const value = hash.value
  const salt = obj.salt ?? hash.salt
  const given = hash.encoding ?? 'utf8'
  switch (algorithm) {
    case 'argon2':
    case 'bcrypt':
    case 'pbkdf2': {
      if (given !== 'utf8') throw unsupported(`hash.encoding must be utf8 for ${algorithm}`)
      if (salt !== undefined) throw unsupported(`salt is not allowed for ${algorithm}: it is part of the hash`)
      const text = algorithm === 'pbkdf2' ? auth0Pbkdf2(value) : value
      if (read(text).kind !== algorithm) throw unsupported(`hash.value is not ${algorithm === 'bcrypt' ? 'a bcrypt hash' : `a PHC string of ${algorithm}`}`)
      return fitting(text)
    }
    case 'md5':
    case 'sha1':
    case 'sha256':
    case 'sha512':
    case 'hmac': {
      let digest: string = algorithm
      let key: Buffer | undefined
      if (algorithm === 'hmac') {
        if (typeof hash.digest !== 'string' || !DIGESTS.has(hash.digest)) throw unsupported(`hash.digest must be one of ${[...DIGESTS].join(', ')}`)
        digest = hash.digest
        if (!isRecord(hash.key) || typeof hash.key.value !== 'string' || hash.key.value === '') throw unsupported('hash.key.value is required for hmac')
        key = decoded(hash.key.value, hash.key.encoding ?? 'utf8', 'hash.key')
      }
      const bytes = decoded(value, given, 'hash', false)
      const length = createHash(digest).digest().length
      if (bytes.length !== length) throw unsupported(`hash.value is ${bytes.length} bytes, where ${digest} gives ${length}`)
      let saltBytes: Buffer = Buffer.alloc(0)
      let position: 'prefix' | 'suffix' = 'prefix'
      if (salt !== undefined) {
        if (!isRecord(salt) || typeof salt.value !== 'string') throw unsupported('salt.value must be a string')
        if (salt.position !== 'prefix' && salt.position !== 'suffix') throw unsupported('salt.position must be prefix or suffix')
        saltBytes = decoded(salt.value, salt.encoding ?? 'utf8', 'salt')
        position = salt.position
      }
      const password = isRecord(obj.password) ? obj.password.encoding ?? 'utf8' : 'utf8'
      if (typeof password !== 'string' || PASSWORD_ENCODINGS[password] === undefined) {
        throw unsupported(`password.encoding must be one of ${Object.keys(PASSWORD_ENCODINGS).join(', ')}`)
      }
      const params = [`pos=${position}`]
      if (PASSWORD_ENCODINGS[password] !== 'utf8') params.push(`pw=${PASSWORD_ENCODINGS[password]}`)
      if (key !== undefined) params.push(`key=${b64(key)}`)
      const id = key === undefined ? `auth0-${digest}` : `auth0-hmac-${digest}`
      return fitting(`$${id}$${params.join(',')}$${b64(saltBytes)}$${b64(bytes)}`)
    }
    default:
      throw unsupported(`custom_password_hash.algorithm ${JSON.stringify(algorithm).slice(0, 40)} is not one Roster checks`)
  }
}

/** The stored form of a user's Firebase hash (`passwordHash`, `salt`: base64, from `firebase auth:export`), or UNSUPPORTED_HASH. */
export function fromFirebase(user: { passwordHash: string; salt: string }, params: FirebaseHashParams): string {
  const signerKey = strictBase64(params.signerKey, 'firebase_signer_key')
  const saltSeparator = strictBase64(params.saltSeparator, 'firebase_salt_separator')
  const salt = strictBase64(user.salt, 'salt')
  const hash = strictBase64(user.passwordHash, 'passwordHash')
  const text = `$firebase-scrypt$rounds=${params.rounds},mem=${params.memCost}$${b64(signerKey)}$${b64(saltSeparator)}$${b64(salt)}$${b64(hash)}`
  read(text)
  return fitting(text)
}

/** Reads a stored hash of any accepted form, or throws UNSUPPORTED_HASH saying what is wrong with it. */
function read(text: string): Parsed {
  if (text.startsWith('$argon2')) return argon2(text)
  if (/^\$2[aby]\$/.test(text)) return bcrypt(text)
  if (text.startsWith('$scrypt$')) return scryptPhc(text)
  if (text.startsWith('$pbkdf2')) return pbkdf2Phc(text)
  if (text.startsWith('pbkdf2_')) return django(text)
  if (text.startsWith('$firebase-scrypt$')) return firebase(text)
  if (text.startsWith('$auth0-')) return auth0(text)
  throw unsupported('not argon2, bcrypt, scrypt, PBKDF2 (PHC, passlib or Django) nor a form an import makes')
}

function argon2(text: string): Parsed {
  const m = /^\$argon2(?:id|i|d)\$(?:v=(?:16|19)\$)?m=(\d{1,10}),t=(\d{1,10}),p=(\d{1,3})\$([A-Za-z0-9+/]{11,})\$([A-Za-z0-9+/]{16,})$/.exec(text)
  if (!m) throw unsupported('argon2 must be a PHC string: $argon2id$v=19$m=…,t=…,p=…$salt$hash')
  const [memory, passes, lanes] = [Number(m[1]), Number(m[2]), Number(m[3])]
  within(memory, 8 * lanes, MAX_ARGON2_MEMORY_KIB, 'argon2 m')
  within(passes, 1, MAX_ARGON2_PASSES, 'argon2 t')
  within(lanes, 1, MAX_LANES, 'argon2 p')
  phcBase64(m[4]!, 'argon2 salt')
  phcBase64(m[5]!, 'argon2 hash')
  return { kind: 'argon2', text }
}

function bcrypt(text: string): Parsed {
  const m = /^\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}$/.exec(text)
  if (!m) throw unsupported('bcrypt must be $2a$, $2b$ or $2y$, a two-digit cost and 53 characters of salt and hash')
  within(Number(m[1]), 4, MAX_BCRYPT_COST, 'bcrypt cost')
  return { kind: 'bcrypt', text }
}

function scryptPhc(text: string): Parsed {
  const [, , params, salt, hash, ...rest] = text.split('$')
  if (params === undefined || salt === undefined || hash === undefined || rest.length) throw unsupported('scrypt must be $scrypt$ln=…,r=…,p=…$salt$hash')
  const values = phcParams(params, ['ln', 'r', 'p'], 'scrypt')
  const [ln, r, p] = [values.get('ln'), values.get('r'), values.get('p')]
  if (ln === undefined || r === undefined || p === undefined) throw unsupported('scrypt needs ln, r and p')
  within(ln, 1, 30, 'scrypt ln')
  within(r, 1, 64, 'scrypt r')
  within(p, 1, MAX_LANES, 'scrypt p')
  const n = 2 ** ln
  within(scryptMemory(n, r, p), 0, MAX_SCRYPT_BYTES, 'scrypt memory (128·N·r bytes)')
  return { kind: 'scrypt', n, r, p, salt: phcBase64(salt, 'scrypt salt'), hash: digestLength(phcBase64(hash, 'scrypt hash'), 'scrypt') }
}

/** passlib's `$pbkdf2-<digest>$<rounds>$…` in its adapted base64, or PHC's `$pbkdf2-<digest>$i=…[,l=…]$…`. */
function pbkdf2Phc(text: string): Parsed {
  const [, id, params, salt, hash, ...rest] = text.split('$')
  if (id === undefined || params === undefined || salt === undefined || hash === undefined || rest.length) {
    throw unsupported('PBKDF2 must be $pbkdf2-<digest>$<rounds>$salt$hash (passlib) or $pbkdf2-<digest>$i=…$salt$hash (PHC)')
  }
  const digest = id === 'pbkdf2' ? 'sha1' : id.startsWith('pbkdf2-') ? id.slice('pbkdf2-'.length) : ''
  if (!DIGESTS.has(digest)) throw unsupported(`PBKDF2 digest must be one of ${[...DIGESTS].join(', ')}`)
  if (/^\d+$/.test(params)) {
    const iterations = Number(params)
    within(iterations, 1, MAX_PBKDF2_ITERATIONS, 'PBKDF2 rounds')
    return { kind: 'pbkdf2', digest, iterations, salt: adaptedBase64(salt, 'PBKDF2 salt'), hash: digestLength(adaptedBase64(hash, 'PBKDF2 hash'), 'PBKDF2') }
  }
  const values = phcParams(params, ['i', 'l'], 'PBKDF2')
  const iterations = values.get('i')
  if (iterations === undefined) throw unsupported('PBKDF2 needs i, its iterations')
  within(iterations, 1, MAX_PBKDF2_ITERATIONS, 'PBKDF2 i')
  const bytes = digestLength(phcBase64(hash, 'PBKDF2 hash'), 'PBKDF2')
  const length = values.get('l')
  if (length !== undefined && length !== bytes.length) throw unsupported(`PBKDF2 l=${length}, but the hash is ${bytes.length} bytes`)
  return { kind: 'pbkdf2', digest, iterations, salt: phcBase64(salt, 'PBKDF2 salt'), hash: bytes }
}

/** Django's `pbkdf2_sha256$<iterations>$<salt>$<base64 hash>` (and `pbkdf2_sha1`): the salt is text, used as it is. */
function django(text: string): Parsed {
  const m = /^pbkdf2_(sha256|sha1)\$(\d{1,10})\$([\x21-\x23\x25-\x7e]{1,128})\$([A-Za-z0-9+/]+={0,2})$/.exec(text)
  if (!m) throw unsupported('Django PBKDF2 must be pbkdf2_sha256$<iterations>$<salt>$<base64 hash>')
  const iterations = Number(m[2])
  within(iterations, 1, MAX_PBKDF2_ITERATIONS, 'PBKDF2 iterations')
  const hash = strictBase64(m[4]!, 'Django PBKDF2 hash')
  const length = m[1] === 'sha256' ? 32 : 20
  if (hash.length !== length) throw unsupported(`Django's ${m[1]} hash must be ${length} bytes`)
  return { kind: 'pbkdf2', digest: m[1]!, iterations, salt: Buffer.from(m[3]!, 'latin1'), hash }
}

function firebase(text: string): Parsed {
  const [, , params, signerKey, separator, salt, hash, ...rest] = text.split('$')
  if (params === undefined || signerKey === undefined || separator === undefined || salt === undefined || hash === undefined || rest.length) {
    throw unsupported('Firebase scrypt must be $firebase-scrypt$rounds=…,mem=…$signer key$salt separator$salt$hash')
  }
  const values = phcParams(params, ['rounds', 'mem'], 'Firebase scrypt')
  const [rounds, memCost] = [values.get('rounds'), values.get('mem')]
  if (rounds === undefined || memCost === undefined) throw unsupported('Firebase scrypt needs rounds and mem')
  within(rounds, 1, 64, 'firebase_rounds')
  within(memCost, 1, 30, 'firebase_mem_cost')
  within(scryptMemory(2 ** memCost, rounds, 1), 0, MAX_SCRYPT_BYTES, 'Firebase scrypt memory (128·2^mem·rounds bytes)')
  const key = phcBase64(signerKey, 'firebase_signer_key')
  const bytes = phcBase64(hash, 'Firebase passwordHash')
  if (key.length === 0) throw unsupported('firebase_signer_key is empty')
  // The hash is the signer key encrypted in counter mode: as long as the key, or the two were not made together.
  if (bytes.length !== key.length) throw unsupported(`passwordHash is ${bytes.length} bytes and firebase_signer_key ${key.length}: base64 of another project, or hex?`)
  return { kind: 'firebase', rounds, memCost, signerKey: key, saltSeparator: phcBase64(separator, 'firebase_salt_separator'), salt: phcBase64(salt, 'Firebase salt'), hash: bytes }
}

function auth0(text: string): Parsed {
  const [, id, params, salt, hash, ...rest] = text.split('$')
  if (id === undefined || params === undefined || salt === undefined || hash === undefined || rest.length) {
    throw unsupported('Auth0 digests must be $auth0-<algorithm>$pos=…$salt$hash')
  }
  const hmac = /^auth0-hmac-(\w+)$/.exec(id)
  const algorithm = hmac ? hmac[1]! : id.slice('auth0-'.length)
  if (hmac ? !DIGESTS.has(algorithm) : PLAIN_DIGESTS[algorithm] === undefined) throw unsupported(`${id} is not a digest Roster checks`)
  const values = new Map<string, string>()
  for (const pair of params.split(',')) {
    const [name, value, ...more] = pair.split('=')
    if (name === undefined || value === undefined || more.length || values.has(name)) throw unsupported(`${id}: malformed parameters`)
    values.set(name, value)
  }
  const position = values.get('pos')
  if (position !== 'prefix' && position !== 'suffix') throw unsupported(`${id}: pos must be prefix or suffix`)
  const encoding = PASSWORD_ENCODINGS[values.get('pw') ?? 'utf8']
  if (encoding === undefined) throw unsupported(`${id}: pw is not an encoding Roster knows`)
  const keyText = values.get('key')
  if (hmac ? keyText === undefined : keyText !== undefined) throw unsupported(`${id}: key goes with hmac, and only with it`)
  for (const name of values.keys()) if (!['pos', 'pw', 'key'].includes(name)) throw unsupported(`${id}: unknown parameter ${name}`)
  const bytes = phcBase64(hash, `${id} hash`)
  if (bytes.length !== createHash(algorithm).digest().length) throw unsupported(`${id}: the hash is not as long as ${algorithm} gives`)
  const key = keyText === undefined ? undefined : phcBase64(keyText, `${id} key`)
  return { kind: 'digest', algorithm, key, position, encoding, salt: phcBase64(salt, `${id} salt`), hash: bytes }
}

/** Auth0's pbkdf2 PHC string with its defaults written out (i=100000, l=64), so the stored form says all it needs. */
function auth0Pbkdf2(value: string): string {
  const parts = value.split('$')
  // PHC lets the parameters go altogether: `$pbkdf2-sha512$salt$hash`.
  if (parts.length === 4) parts.splice(2, 0, '')
  const [, id, params, salt, hash] = parts
  if (!value.startsWith('$pbkdf2-') || id === undefined || params === undefined || /^\d+$/.test(params)) throw unsupported('pbkdf2 hash.value must be a PHC string: $pbkdf2-<digest>$i=…,l=…$salt$hash')
  const values = params === '' ? new Map<string, number>() : phcParams(params, ['i', 'l'], 'PBKDF2')
  return `$${id}$i=${values.get('i') ?? 100_000},l=${values.get('l') ?? 64}$${salt}$${hash}`
}

/** A PHC parameter list of decimal values, each name at most once and among those known. */
function phcParams(params: string, known: string[], what: string): Map<string, number> {
  const values = new Map<string, number>()
  for (const pair of params.split(',')) {
    const m = /^([a-z]+)=(\d{1,10})$/.exec(pair)
    if (!m || !known.includes(m[1]!) || values.has(m[1]!)) throw unsupported(`${what}: malformed parameter ${JSON.stringify(pair).slice(0, 40)}`)
    values.set(m[1]!, Number(m[2]))
  }
  return values
}

/** PHC's B64: standard base64 without padding. */
function phcBase64(text: string, what: string): Buffer {
  if (!/^[A-Za-z0-9+/]*$/.test(text) || text.length % 4 === 1) throw unsupported(`${what} is not base64 without padding`)
  return Buffer.from(text, 'base64')
}

/** passlib's adapted base64: `.` for `+`, no padding. */
function adaptedBase64(text: string, what: string): Buffer {
  if (!/^[A-Za-z0-9./]*$/.test(text) || text.length % 4 === 1) throw unsupported(`${what} is not passlib's adapted base64`)
  return Buffer.from(text.replaceAll('.', '+'), 'base64')
}

/** Base64 as files carry it: standard or URL-safe, padded or not, and nothing else. */
function strictBase64(text: string, what: string): Buffer {
  if (!/^(?:[A-Za-z0-9+/]*|[A-Za-z0-9_-]*)={0,2}$/.test(text) || text.replace(/=+$/, '').length % 4 === 1) throw unsupported(`${what} is not base64`)
  if (/=/.test(text) && text.length % 4 !== 0) throw unsupported(`${what} is not base64: misplaced padding`)
  return Buffer.from(text, 'base64')
}

/** A value in one of Auth0's encodings: hex (either case), base64 (standard or URL-safe) and, where allowed, utf8. */
function decoded(value: string, encoding: unknown, what: string, utf8 = true): Buffer {
  if (encoding === 'hex') {
    if (!/^(?:[0-9a-fA-F]{2})*$/.test(value)) throw unsupported(`${what} is not hex`)
    return Buffer.from(value, 'hex')
  }
  if (encoding === 'base64') return strictBase64(value, what)
  if (encoding === 'utf8' && utf8) return Buffer.from(value, 'utf8')
  throw unsupported(`${what}.encoding must be hex${utf8 ? ', base64 or utf8' : ' or base64'}`)
}

function digestLength(hash: Buffer, what: string): Buffer {
  if (hash.length < 16 || hash.length > 128) throw unsupported(`${what} hash must be 16 to 128 bytes`)
  return hash
}

function within(value: number, min: number, max: number, what: string): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) throw unsupported(`${what} must be from ${min} to ${max}`)
}

function fitting(text: string): string {
  if (text.length > COLUMN_WIDTH) throw unsupported(`its stored form would be ${text.length} characters, more than ${COLUMN_WIDTH}`)
  return text
}

/** What scrypt holds while it runs: its block of 128·N·r bytes and p blocks of 128·r. */
function scryptMemory(n: number, r: number, p: number): number {
  return 128 * r * (n + p + 2)
}

const b64 = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '')

/** Equal bytes, compared in a time that does not depend on where they differ. */
function same(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b)
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function scryptAsync(password: string, salt: Buffer, keylen: number, options: { N: number; r: number; p: number; maxmem: number }): Promise<Buffer> {
  return new Promise((resolve, reject) => scrypt(password, salt, keylen, options, (err, key) => (err ? reject(err) : resolve(key))))
}

const pbkdf2Async = promisify(pbkdf2)
