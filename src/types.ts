import type { Config } from '../schemas/config.js'
import type { Caller } from './auth/caller.js'
import type { AuthRule } from './auth/rules.js'
import type { Db, DialectName } from './database/index.js'
import type { CursorCodec } from './http/cursor.js'
import type { RoutePlan } from './http/methods.js'
import type { AnswerSeal } from './idempotency/service.js'

// What the app's plugins decorate it with. Plugins that own a decoration of their own declare it beside their code
// (limits/plugin.ts, mail/plugin.ts, idempotency/plugin.ts, services.ts).
declare module 'fastify' {
  interface FastifyInstance {
    config: Config
    db: Db
    dialect: DialectName
    cursors: CursorCodec
    /** Every route as served: its declared config and its steps, in the order src/steps.ts gave them. */
    routePlans: ReadonlyArray<RoutePlan>
  }
  interface FastifyRequest {
    /** The authenticated caller, or null (a public route's anonymous caller; see `callerOf`). */
    caller: Caller | null
    /** The client address as every per-client limit keys it (http/client-address.ts). */
    readonly client: string
    /** The Idempotency-Key this request took (its stored hash, and the seal of its answer), until the answer is kept. */
    idempotencyKey: { hash: string; seal: AnswerSeal } | null
  }
  interface FastifyContextConfig {
    auth?: AuthRule
    /** A POST that creates or sends: it honours Idempotency-Key. */
    idempotent?: boolean
    /** The body is read by the handler as a stream (an import's file): no body deadline, no parser of Fastify's. */
    streamedBody?: boolean
  }
}
