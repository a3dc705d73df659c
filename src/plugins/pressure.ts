import underPressure from '@fastify/under-pressure'
import fp from 'fastify-plugin'
import { ApiError } from '../lib/errors.js'

/**
 * Load shedding: while the event loop lags more than MAX_EVENT_LOOP_DELAY_MS, requests are answered at once with
 * 503 UNAVAILABLE and Retry-After instead of queueing behind the backlog. (A saturated MySQL pool answers the
 * same way: its bounded queue refuses, see DB_QUEUE_LIMIT.) /health/live stays 200: a busy process is alive.
 */
export default fp(async (app) => {
  await app.register(underPressure, {
    maxEventLoopDelay: app.config.MAX_EVENT_LOOP_DELAY_MS,
    sampleInterval: 250,
    exposeStatusRoute: false,
    pressureHandler: async (request) => {
      if (request.routeOptions.url === '/health/live') return
      throw new ApiError(503, 'UNAVAILABLE', 'The service is overloaded; try again shortly', { headers: { 'retry-after': '2' } })
    }
  })
}, { name: 'pressure', dependencies: ['config', 'errors'], fastify: '5.x' })
