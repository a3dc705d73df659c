import { randomBytes } from 'node:crypto'
import { isUniqueViolation } from './errors.js'
import type { Db } from './index.js'

/**
 * A secret shared by every instance on the same database, made on first use. Cursors signed on one instance
 * are then valid on all of them, and across restarts.
 */
export async function sharedSecret(db: Db, name: string): Promise<Buffer> {
  const existing = await db.selectFrom('app_secrets').select('value').where('name', '=', name).executeTakeFirst()
  if (existing) return Buffer.from(existing.value, 'base64url')
  try {
    await db.insertInto('app_secrets').values({ name, value: randomBytes(32).toString('base64url') }).execute()
  } catch (err) {
    if (!isUniqueViolation(err)) throw err // another instance made it first
  }
  const row = await db.selectFrom('app_secrets').select('value').where('name', '=', name).executeTakeFirstOrThrow()
  return Buffer.from(row.value, 'base64url')
}
