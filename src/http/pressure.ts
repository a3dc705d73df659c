import { monitorEventLoopDelay } from 'node:perf_hooks'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Unavailable } from '../common/errors.js'

/** How often the event loop is sampled (ms), and how often the verdict is renewed. */
const RESOLUTION_MS = 10
const WINDOW_MS = 250
/** How often, while requests are being shed, their count is logged. */
const REPORT_EVERY_MS = 10_000

/**
 * Load shedding: while the event loop lags more than MAX_EVENT_LOOP_DELAY_MS, requests are answered at once with
 * 503 UNAVAILABLE and Retry-After instead of queueing behind the backlog. (A saturated MySQL pool answers the
 * same way: its bounded queue refuses, see DB_QUEUE_LIMIT.) /health/live stays 200: a busy process is alive.
 *
 * The lag is the mean delay of the loop's 10 ms samples over each 250 ms window, beyond the sampling period itself;
 * a window without a single sample (the loop was stuck throughout) counts as lagging. Sampling starts once the app
 * is ready: the start itself (migrations, compiling schemas) blocks the loop and is not load. A request pays one
 * comparison with the last window's verdict.
 *
 * Shed requests are expected under overload, and logging each would add to it: they are counted, and the count is
 * logged once every REPORT_EVERY_MS while shedding lasts.
 */
async function loadShedding(app: FastifyInstance): Promise<void> {
  const max = app.config.MAX_EVENT_LOOP_DELAY_MS
  if (max === 0) return

  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS })
  let lagging = false
  let shed = 0
  let reportedAt = 0
  let timer: NodeJS.Timeout | undefined
  const judge = () => {
    const lag = histogram.count === 0 ? Infinity : histogram.mean / 1e6 - RESOLUTION_MS
    lagging = lag > max
    histogram.reset()
    const now = Date.now()
    if (shed > 0 && now - reportedAt >= REPORT_EVERY_MS) {
      app.log.warn({ shed, lagMs: Number.isFinite(lag) ? Math.round(lag) : null }, 'overloaded: requests answered 503 since the last report')
      shed = 0
      reportedAt = now
    }
  }
  app.addHook('onReady', async () => {
    histogram.enable()
    timer = setInterval(judge, WINDOW_MS)
    timer.unref()
  })
  app.addHook('onClose', async () => {
    clearInterval(timer)
    histogram.disable()
  })

  app.addHook('onRequest', (request, _reply, done) => {
    if (!lagging || request.routeOptions.url === '/health/live') return done()
    shed++
    done(new Unavailable('The service is overloaded; try again shortly', 2))
  })
}

export default fp(loadShedding, { name: 'load-shedding' })
