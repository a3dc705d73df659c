import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { systemCause } from '../events/record.js'

/** The first admin (ADMIN_EMAIL, ADMIN_PASSWORD): created at start when no user has the address. */
async function firstAdmin(app: FastifyInstance): Promise<void> {
  const { ADMIN_EMAIL: email, ADMIN_PASSWORD: password } = app.config
  if (email && password && (await app.services.users.ensureAdmin(email, password, systemCause(app.config.PUBLIC_URL ?? '')))) app.log.info({ email }, 'created the first admin')
}

export default fp(firstAdmin, { name: 'first-admin', dependencies: ['services'] })
