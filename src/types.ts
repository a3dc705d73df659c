import type { FastifyRequest } from 'fastify'
import type { Kysely } from 'kysely'
import type { Database } from '../db/types.js'
import type { Config } from '../schemas/config.js'
import type { DialectName } from './database.js'
import type { CursorCodec } from './lib/cursor.js'
import type { Caller } from './repositories/tokens.js'

/**
 * Who may call a route, declared in each route's `config.auth`:
 * - public: anyone (a valid token is still recognised);
 * - caller: any authenticated caller (the handler may narrow it);
 * - self-or-admin: the user named by `user_id`, or an admin;
 * - owner: only the user named by `user_id`, admins included in the refusal;
 * - admin: admins only.
 */
export type AuthRule = 'public' | 'caller' | 'self-or-admin' | 'owner' | 'admin'

/** A step run on a request refused at authentication: an error to answer with instead of the 401, or nothing. */
export type AuthRefusalStep = (request: FastifyRequest) => Error | undefined | Promise<Error | undefined>

declare module 'fastify' {
  interface FastifyInstance {
    config: Config
    db: Kysely<Database>
    dialect: DialectName
    cursors: CursorCodec
    /** Every route with its authorization rule, as registered. */
    routeRules: ReadonlyArray<{ method: string; url: string; rule: AuthRule }>
    /**
     * Adds a step run when a request is refused at authentication (no caller on a route that needs one), before
     * the 401: a step may answer instead with an error of its own (the rate limit's 429).
     */
    onAuthRefusal(step: AuthRefusalStep): void
  }
  interface FastifyRequest {
    caller: Caller | null
  }
  interface FastifyContextConfig {
    auth?: AuthRule
  }
}
