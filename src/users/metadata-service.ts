import type { MetadataPatch, MetadataReplacement } from '../../schemas/metadata.js'
import { changeMetadata, presentMetadata, readMetadata, type MetadataChange } from '../accounts/metadata.js'
import { userExists } from '../accounts/users.js'
import type { Caller } from '../auth/caller.js'
import { Forbidden, userNotFound } from '../common/errors.js'
import type { Expected } from '../common/versions.js'
import type { Db } from '../database/index.js'
import { inTransaction } from '../database/transaction.js'
import type { Cause } from '../events/record.js'

export interface MetadataOptions {
  /** METADATA_MAX_BYTES: the most a part may hold, as compact JSON. */
  maxBytes: number
}

/**
 * A user's metadata: who reads and writes which part. The route rule (self-or-admin) has already let the caller
 * reach the user; here `private` is kept from plain users, and `public` and `private` are written by admins only.
 */
export class MetadataService {
  constructor(private readonly db: Db, private readonly options: MetadataOptions) {}

  async get(caller: Caller, userId: number) {
    const stored = await readMetadata(this.db, userId)
    if (!stored.exists && !(await userExists(this.db, userId))) throw userNotFound(`id ${userId}`)
    return { version: stored.version, metadata: (base: string) => presentMetadata(userId, stored.parts, base, caller.role === 'admin') }
  }

  patch(caller: Caller, userId: number, body: MetadataPatch, expected: Expected, cause: Cause) {
    return this.write(caller, userId, body, { merge: body }, expected, cause)
  }

  replace(caller: Caller, userId: number, body: MetadataReplacement, expected: Expected, cause: Cause) {
    return this.write(caller, userId, body, { replace: body }, expected, cause)
  }

  private async write(caller: Caller, userId: number, named: MetadataPatch, change: MetadataChange, expected: Expected, cause: Cause) {
    // Refused before anything is read or written: nothing changes, whatever else the body holds.
    if (caller.role !== 'admin' && (named.public !== undefined || named.private !== undefined)) {
      throw new Forbidden('Only an admin may write public or private metadata; a user writes its unsafe metadata')
    }
    const stored = await inTransaction(this.db, (trx) => changeMetadata(trx, userId, change, expected, cause, this.options.maxBytes))
    return { version: stored.version, metadata: (base: string) => presentMetadata(userId, stored.parts, base, caller.role === 'admin') }
  }
}
