import type { Config } from '../schemas/config.js'
import type { Caller } from './auth/repository.js'
import type { AuthRule } from './auth/rules.js'
import type { AuthService } from './auth/service.js'
import type { Db, DialectName } from './database/index.js'
import type { EmailsService } from './emails/service.js'
import type { CursorCodec } from './http/cursor.js'
import type { RoutePlan } from './http/lifecycle.js'
import type { SessionsService } from './sessions/service.js'
import type { AnswerSeal } from './idempotency/service.js'
import type { MailDeliverer } from './mail/deliverer.js'
import type { UsersService } from './users/service.js'
import type { VerificationService } from './verification/service.js'

export interface Services {
  users: UsersService
  emails: EmailsService
  auth: AuthService
  sessions: SessionsService
  verification: VerificationService
}

declare module 'fastify' {
  interface FastifyInstance {
    config: Config
    db: Db
    dialect: DialectName
    cursors: CursorCodec
    services: Services
    /** Delivers the mail outbox in the background while the app is ready. */
    mail: MailDeliverer
    /** Every route as served: its rule and its steps, in the order the lifecycle gave them. */
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
  }
}
