import { context, propagation, trace } from '@opentelemetry/api'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { useTracer } from './spans.js'

/**
 * OpenTelemetry traces, when OTEL_EXPORTER_OTLP_ENDPOINT is set: a span per request (Fastify's own instrumentation,
 * `@fastify/otel`, with the route template and the request id), its handler's, and as their children the database
 * statements, SMTP sends and webhook posts (spans.ts), batched to the endpoint over OTLP/HTTP. A `traceparent` sent by
 * the client is continued. Unset, nothing is registered and nothing is made, and the SDK is not even loaded (it
 * takes about 360 ms to load, and its instrumentation package installs module hooks). The spans still batched are
 * sent at close.
 */
async function tracing(app: FastifyInstance): Promise<void> {
  const endpoint = app.config.OTEL_EXPORTER_OTLP_ENDPOINT
  if (!endpoint) return
  const [{ FastifyOtelInstrumentation }, { OTLPTraceExporter }, { resourceFromAttributes }, { BatchSpanProcessor, NodeTracerProvider }] = await Promise.all([
    import('@fastify/otel'), import('@opentelemetry/exporter-trace-otlp-http'), import('@opentelemetry/resources'), import('@opentelemetry/sdk-trace-node')
  ])
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': app.config.OTEL_SERVICE_NAME }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: `${endpoint.replace(/\/+$/, '')}/v1/traces` }))]
  })
  // The global context manager (so that a statement's span finds its request's) and the W3C propagator.
  provider.register()
  const instrumentation = new FastifyOtelInstrumentation({
    // A span per request and per handler; hooks are not worth one each.
    instrumentHooks: false,
    // The span is named by the route template, and `url.path` (the raw path and query, where an address can stand:
    // /users/email/{email}, ?email=) is replaced by it: no client value leaves in a span.
    requestHook: (span, request) => {
      const route = request.routeOptions.url ?? 'unmatched route'
      span.updateName(`${request.method} ${route}`)
      span.setAttributes({ 'url.path': route, 'http.request.id': request.id })
    }
  })
  instrumentation.setTracerProvider(provider)
  await app.register(instrumentation.plugin())
  useTracer(provider.getTracer('roster'))
  app.addHook('onClose', async () => {
    useTracer(undefined)
    await provider.shutdown().catch((err: unknown) => app.log.warn({ err }, 'tracing: the last spans could not be sent'))
    trace.disable()
    context.disable()
    propagation.disable()
  })
}

export default fp(tracing, { name: 'tracing' })
