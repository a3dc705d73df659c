import { createHmac, timingSafeEqual } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { InvalidInput } from '../common/errors.js'
import { sharedSecret } from '../database/app-secrets.js'

/**
 * Opaque keyset cursors: the last id of a page and a digest of the filters it was made for, signed with a secret,
 * so a cursor cannot be forged, altered, or reused with other filters.
 */
export class CursorCodec {
  constructor(private readonly secret: Buffer) {}

  private mac(payload: string): Buffer {
    return createHmac('sha256', this.secret).update(payload).digest().subarray(0, 16)
  }

  private scope(filters: string): string {
    return createHmac('sha256', this.secret).update('scope\0' + filters).digest('base64url').slice(0, 16)
  }

  encode(afterId: number, filters: string): string {
    const payload = Buffer.from(`${afterId}.${this.scope(filters)}`).toString('base64url')
    return `${payload}.${this.mac(payload).toString('base64url')}`
  }

  /** The id after which the next page starts; INVALID_CURSOR when the cursor is not one of ours for these filters. */
  decode(cursor: string, filters: string): number {
    const invalid = () => new InvalidInput('The cursor is not valid for this collection and these filters', [], 'INVALID_CURSOR')
    const [payload, mac, extra] = cursor.split('.')
    if (!payload || !mac || extra !== undefined) throw invalid()
    const given = Buffer.from(mac, 'base64url')
    const expected = this.mac(payload)
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid()
    const [after, scope] = Buffer.from(payload, 'base64url').toString().split('.')
    if (scope !== this.scope(filters) || !after || !/^[1-9][0-9]*$/.test(after)) throw invalid()
    const id = Number(after)
    if (!Number.isSafeInteger(id)) throw invalid()
    return id
  }
}

/** `app.cursors`: signed with the secret every instance on the database shares, so a cursor is valid on all of them. */
async function cursors(app: FastifyInstance): Promise<void> {
  app.decorate('cursors', new CursorCodec(await sharedSecret(app.db, 'cursor')))
}

export default fp(cursors, { name: 'cursors', dependencies: ['database'] })
