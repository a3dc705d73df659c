import { createHash, randomBytes } from 'node:crypto'
import { availableParallelism } from 'node:os'
import { hash } from '@node-rs/argon2'
import pLimit from 'p-limit'
import { isNativeHash, verifyPasswordHash } from './password-hashes.js'

/** What one argon2id hash costs: memory in KiB and passes over it (one lane). */
export interface HashCost {
  memoryKib: number
  passes: number
}

/** OWASP's argon2id parameters: 19 MiB, 2 passes, 1 lane (PASSWORD_HASH_MEMORY_KIB, PASSWORD_HASH_PASSES). */
export const OWASP_COST: HashCost = { memoryKib: 19_456, passes: 2 }

/** OWASP's equivalent argon2id settings: for each number of passes, the least memory in KiB (5 passes and more: 7 MiB). */
const OWASP_MEMORY_BY_PASSES = [47_104, 19_456, 12_288, 9_216, 7_168]

/** Whether a cost is at least one of OWASP's equivalent settings (below it the service warns at start). */
export function meetsOwasp(cost: HashCost): boolean {
  return cost.memoryKib >= OWASP_MEMORY_BY_PASSES[Math.min(cost.passes, 5) - 1]!
}

/**
 * Hashes under way at once in this process: one a core, the rest wait their turn. Each holds its whole memory cost
 * (19 MiB by default) until it ends and takes a core throughout, so more at once would not end sooner: they would
 * only hold more memory, and take all four of libuv's threads from the file system and name lookups.
 */
const hashing = pLimit(availableParallelism())

/** The stored hash of a user with no password: nothing verifies against it. */
export const NO_PASSWORD = ''

/**
 * Password hashes (argon2id) at a configured cost. A stored hash names the cost it was made with, so a hash made at
 * another cost still verifies, and so does a hash made elsewhere and imported (accounts/password-hashes.ts).
 */
export class Passwords {
  private readonly options
  private dummy: Promise<string> | undefined

  constructor(private readonly cost: HashCost = OWASP_COST) {
    // algorithm 2 is Algorithm.Argon2id: a const enum, not importable here.
    this.options = { algorithm: 2, memoryCost: cost.memoryKib, timeCost: cost.passes, parallelism: 1 }
  }

  hash(password: string): Promise<string> {
    return hashing(() => hash(password, this.options))
  }

  /**
   * Verifies a password against a stored hash of any accepted form, or against a fixed dummy argon2id hash when there
   * is none (or the user has no password), so that an unknown address costs the same time as a wrong password to a
   * native hash (SECURITY.md says what a foreign hash's time tells).
   */
  async verify(stored: string | undefined, password: string): Promise<boolean> {
    this.dummy ??= this.hash(randomBytes(16).toString('hex'))
    const usable = stored !== undefined && stored !== NO_PASSWORD
    const target = usable ? stored : await this.dummy
    const ok = await hashing(() => verifyPasswordHash(target, password))
    return ok && usable
  }

  /**
   * Whether a stored hash that just checked out is to be replaced by this one's argon2id: a foreign hash, or Roster's
   * own at another cost.
   */
  needsRehash(stored: string): boolean {
    return stored !== NO_PASSWORD && !isNativeHash(stored, this.cost)
  }
}

/** A token as this service makes them (access, refresh and mailed tokens): 256 random bits, base64url. */
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/

/** Whether a token presented has the shape of one this service makes: anything else is refused unread. */
export function isTokenShaped(token: string): boolean {
  return TOKEN_SHAPE.test(token)
}

/** A new opaque bearer token (256 random bits) and the SHA-256 under which it is stored. */
export function newToken(): { token: string; hash: string } {
  const token = randomBytes(32).toString('base64url')
  return { token, hash: tokenHash(token) }
}

export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex')
}
