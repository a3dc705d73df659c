import { createHash, randomBytes } from 'node:crypto'
import { hash, verify } from '@node-rs/argon2'

/** OWASP's argon2id parameters: 19 MiB, 2 passes, 1 lane. */
const ARGON2 = { algorithm: 2 /* Algorithm.Argon2id: a const enum, not importable here */, memoryCost: 19_456, timeCost: 2, parallelism: 1 }

export function hashPassword(password: string): Promise<string> {
  return hash(password, ARGON2)
}

let dummy: Promise<string> | undefined
/**
 * Verifies a password against a stored hash, or against a fixed dummy hash when there is none,
 * so that an unknown address costs the same time as a wrong password.
 */
export async function verifyPassword(stored: string | undefined, password: string): Promise<boolean> {
  dummy ??= hashPassword(randomBytes(16).toString('hex'))
  const target = stored ?? (await dummy)
  const ok = await verify(target, password).catch(() => false)
  return ok && stored !== undefined
}

/** A new opaque bearer token (256 random bits) and the SHA-256 under which it is stored. */
export function newToken(): { token: string; hash: string } {
  const token = randomBytes(32).toString('base64url')
  return { token, hash: tokenHash(token) }
}

export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex')
}
