import cors from '@fastify/cors'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/** What a browser's script may send, and read back. */
const ALLOWED_HEADERS = ['Authorization', 'Content-Type', 'If-Match', 'If-None-Match', 'Idempotency-Key', 'X-HTTP-Method-Override', 'X-Request-Id']
const EXPOSED_HEADERS = ['ETag', 'Location', 'Link', 'Retry-After', 'RateLimit', 'RateLimit-Policy', 'WWW-Authenticate', 'Idempotent-Replayed', 'X-Request-Id']

/**
 * CORS for the origins of CORS_ORIGINS (a list, or `*`), preflight included; off when unset. Requests from other
 * origins, or without one, get no CORS headers, and an OPTIONS among them is answered as any OPTIONS is (204 with
 * Allow). Registered before the route lifecycle: its catch-all OPTIONS route is the plugin's, not an API route.
 */
async function corsOrigins(app: FastifyInstance): Promise<void> {
  const origins = app.config.CORS_ORIGINS
  if (!origins) return
  const list = origins.split(',').map((o) => o.trim())
  const any = list.includes('*')
  const allowed = new Set(list)
  await app.register(cors, {
    origin: (origin, callback) => callback(null, origin !== undefined && (any || allowed.has(origin)) ? origin : false),
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE'],
    allowedHeaders: ALLOWED_HEADERS,
    exposedHeaders: EXPOSED_HEADERS,
    maxAge: 600,
    strictPreflight: false
  })
}

export default fp(corsOrigins, { name: 'cors' })
