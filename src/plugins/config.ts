import fp from 'fastify-plugin'
import type { Config } from '../../schemas/config.js'

/** Makes the validated configuration available as `app.config`. */
export default fp<{ config: Config }>(async (app, { config }) => {
  app.decorate('config', config)
}, { name: 'config', fastify: '5.x' })
