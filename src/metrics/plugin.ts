import { createServer, type Server } from 'node:http'
import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { StartupError } from '../common/errors.js'
import { Metrics } from './metrics.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The app's Prometheus metrics: features report to it, GET /metrics on METRICS_PORT exposes it. */
    metrics: Metrics
    /** Opens METRICS_PORT (the service's start does, once the API listens); closed with the app. */
    listenMetrics: () => Promise<void>
  }
}

/**
 * Prometheus metrics: every answer's duration (and a 429 as a refusal) counted as it is sent, exposed at
 * `GET /metrics` on a port of their own (METRICS_PORT on HOST), never on the API's: what an operator's scraper
 * reads is not reachable by the API's clients. The service's start opens the port right after the API's (a port in
 * use fails the start, with one line that names METRICS_PORT); an app that does not listen (a test's) opens none.
 */
async function metrics(app: FastifyInstance): Promise<void> {
  const recorded = new Metrics()
  app.decorate('metrics', recorded)
  const port = app.config.METRICS_PORT
  // Off (METRICS_PORT=0), nothing would read them: requests are not timed, and no server is made.
  if (port === 0) {
    app.decorate('listenMetrics', async () => {})
    return
  }
  // Labelled by the route template; what matches no route is one series, `unmatched`, not one per URL.
  app.addHook('onResponse', async (request, reply) => {
    const route = request.is404 ? undefined : request.routeOptions.url
    recorded.answered(request.method, route ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000)
  })
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '/').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Not found: the metrics are at GET /metrics\n')
      return
    }
    recorded.registry.metrics().then(
      (text) => { res.writeHead(200, { 'content-type': recorded.registry.contentType }).end(text) },
      (err: unknown) => {
        app.log.warn({ err }, 'metrics: could not be collected')
        res.writeHead(503, { 'content-type': 'text/plain' }).end('The metrics could not be collected\n')
      }
    )
  })
  app.decorate('listenMetrics', () => listen(server, port, app.config.HOST))
  app.addHook('onClose', async () => {
    if (!server.listening) return
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })
}

/** The metrics port could not be had: the start fails with this one line, naming the setting. */
export class MetricsPortError extends StartupError {
  constructor(port: number, host: string, cause: Error & { code?: string }) {
    super(cause.code === 'EADDRINUSE'
      ? `METRICS_PORT=${port} is in use on ${host}: stop what holds it, set METRICS_PORT to a free port, or to 0 to turn the metrics off`
      : `METRICS_PORT=${port}: cannot listen there on ${host} (${cause.code ?? cause.message}): set METRICS_PORT to a free port of 1024 or above, or to 0`,
    { cause })
  }
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', (err: Error) => reject(new MetricsPortError(port, host, err)))
    server.listen(port, host, () => {
      server.removeAllListeners('error')
      resolve()
    })
  })
}

export default fp(metrics, { name: 'metrics' })
