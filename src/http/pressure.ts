import underPressure from '@fastify/under-pressure'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Unavailable } from '../common/errors.js'

/** How often the event loop's delay is judged (ms); a verdict holds until the next. */
const SAMPLE_INTERVAL_MS = 250
/** How often, while requests are being shed, their count is logged. */
const REPORT_EVERY_MS = 10_000

/**
 * Load shedding with `@fastify/under-pressure`: while the event loop's mean delay over a sample exceeds
 * MAX_EVENT_LOOP_DELAY_MS, requests are answered 503 UNAVAILABLE (problem+json, Retry-After, the request's id) by
 * the error handler. /health/live stays 200: a busy process is alive. The library samples from its registration, so
 * verdicts of the first two samples after ready, which may hold the start's own blocking, are not acted on.
 * Shed requests are counted, and the count logged REPORT_EVERY_MS after the first: not one line each.
 */
async function loadShedding(app: FastifyInstance): Promise<void> {
  const max = app.config.MAX_EVENT_LOOP_DELAY_MS
  if (max === 0) return
  let settledAt = Infinity
  app.addHook('onReady', async () => { settledAt = Date.now() + 2 * SAMPLE_INTERVAL_MS })
  let shed = 0
  let report: NodeJS.Timeout | undefined
  const reportShed = () => {
    app.log.warn({ shed }, 'overloaded: requests answered 503 since the last report')
    shed = 0
    report = undefined
  }
  app.addHook('onClose', async () => clearTimeout(report))
  await app.register(underPressure, {
    maxEventLoopDelay: max,
    sampleInterval: SAMPLE_INTERVAL_MS,
    pressureHandler: async (request) => {
      if (Date.now() < settledAt || request.routeOptions.url === '/health/live') return
      if (shed++ === 0) {
        report = setTimeout(reportShed, REPORT_EVERY_MS)
        report.unref()
      }
      throw new Unavailable('The service is overloaded; try again shortly', 2)
    }
  })
}

export default fp(loadShedding, { name: 'load-shedding' })
