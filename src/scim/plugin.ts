import type { FastifyInstance } from 'fastify'
import { Passwords } from '../accounts/secrets.js'
import { registerScim } from './routes.js'
import { ScimService } from './service.js'

/** SCIM 2.0 for identity providers: the tokens admins make, and /scim/v2 (registered after the route machinery). */
export default async function scim(app: FastifyInstance): Promise<void> {
  const config = app.config
  const passwords = new Passwords({ memoryKib: config.PASSWORD_HASH_MEMORY_KIB, passes: config.PASSWORD_HASH_PASSES })
  await registerScim(app, new ScimService(app.db, passwords, { claimSeconds: config.UNVERIFIED_CLAIM_SECONDS, maxEmailsPerUser: config.MAX_EMAILS_PER_USER }))
}
