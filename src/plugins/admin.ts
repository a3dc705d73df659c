import fp from 'fastify-plugin'
import { hashPassword } from '../lib/secrets.js'
import { createUser, findUserByAddress } from '../repositories/users.js'
import { ApiError } from '../lib/errors.js'

/**
 * The first admin: at start, when ADMIN_EMAIL is set and no user has that address, create an admin with it.
 * An existing user with the address is left as it is.
 */
export default fp(async (app) => {
  const { ADMIN_EMAIL: email, ADMIN_PASSWORD: password } = app.config
  if (!email || !password) return
  if (await findUserByAddress(app.db, email)) return
  try {
    await createUser(app.db, { name: 'Administrator', email, passwordHash: await hashPassword(password), role: 'admin', status: 'ACTIVE' })
    app.log.info({ email }, 'created the first admin')
  } catch (err) {
    if (!(err instanceof ApiError && err.code === 'EMAIL_TAKEN')) throw err // another instance created it meanwhile
  }
}, { name: 'admin', dependencies: ['db'], fastify: '5.x' })
