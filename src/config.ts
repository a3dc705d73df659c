import { isIP } from 'node:net'
import { Value } from '@sinclair/typebox/value'
import { Config } from '../schemas/config.js'
import { StartupError } from './common/errors.js'

/** A setting that is not valid: the start stops with the message, which names each. */
export class ConfigError extends StartupError {}

function convert(raw: string, schema: { type?: unknown; anyOf?: Array<{ const?: unknown }> }): unknown {
  if (schema.type === 'boolean') {
    if (/^(true|1|yes|on)$/i.test(raw)) return true
    if (/^(false|0|no|off)$/i.test(raw)) return false
    return raw
  }
  const numeric = schema.type === 'integer' || schema.anyOf?.some((s) => typeof s.const === 'number')
  return numeric && /^\d+$/.test(raw) ? Number(raw) : raw
}

/** One entry of TRUST_PROXY: a keyword of proxy-addr, an IP address, or a CIDR range. */
function isProxyEntry(entry: string): boolean {
  if (['loopback', 'linklocal', 'uniquelocal'].includes(entry)) return true
  const [address, prefix, extra] = entry.split('/')
  const version = isIP(address ?? '')
  if (!version || extra !== undefined) return false
  if (prefix === undefined) return true
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128)
}

/** Whether a mysql:// URL parses and names a database (its path). */
function namesDatabase(url: string): boolean {
  try {
    return new URL(url).pathname.replace(/^\/+|\/+$/g, '') !== ''
  } catch {
    return false
  }
}

/** A URL as a message may show it: without its password. */
function redacted(url: string): string {
  return url.replace(/^(mysql:\/\/[^:/@]*:)[^@]*@/, '$1***@')
}

/** An origin as browsers send it: scheme, host and optional port, nothing else; or `*` for any. */
function isOrigin(entry: string): boolean {
  return entry === '*' || /^https?:\/\/[^\s/?#:]+(:\d{1,5})?$/.test(entry)
}

/** What a setting checked by a pattern expects, in words: the pattern itself reads as a regular expression. */
const EXPECTED: Record<string, string> = {
  DATABASE_URL: 'mysql://user:password@host:3306/database, or sqlite: and a path (sqlite:///abs/path, sqlite:relative/path, sqlite::memory:)',
  PUBLIC_URL: 'an http(s) URL such as https://api.example.com, with no query or fragment',
  ADMIN_EMAIL: 'an e-mail address',
  SMTP_URL: 'smtp://user:password@host:587 or smtps://user:password@host:465',
  MAIL_FROM: 'a sender address, such as Roster <no-reply@example.com>',
  APP_LINK_TEMPLATE: 'a link holding {token}, such as https://app.example.com/verify?token={token}',
  RATE_LIMIT_REDIS_URL: 'redis://host:6379 or rediss://host:6380'
}

function describe(key: string, schema: Record<string, unknown>): string {
  const expected = EXPECTED[key]
  if (expected) return expected
  if (schema.type === 'boolean') return 'true or false (also 1/0, yes/no, on/off)'
  if (schema.type === 'integer') return `an integer from ${String(schema.minimum)} to ${String(schema.maximum)}`
  if (Array.isArray(schema.anyOf)) {
    const values = schema.anyOf.map((s: { const: string | number }) => String(s.const))
    return values.length === 2 ? `${values[0]} or ${values[1]}` : `one of ${values.join(', ')}`
  }
  if (schema.maxLength === 254) return 'an e-mail address'
  if (typeof schema.pattern === 'string') return `a value matching ${schema.pattern}`
  if (typeof schema.minLength === 'number') return `at least ${schema.minLength} characters`
  return 'a valid value'
}

/**
 * Reads the service's configuration from an environment (process.env by default).
 * Empty variables count as unset. Throws a ConfigError naming each bad variable and what it expected.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const input: Record<string, unknown> = {}
  const problems: string[] = []
  for (const [key, schema] of Object.entries(Config.properties)) {
    const raw = env[key]
    if (raw === undefined || raw.trim() === '') continue
    input[key] = convert(raw.trim(), schema)
  }
  const withDefaults = Value.Default(Config, input) as Record<string, unknown>
  for (const error of Value.Errors(Config, withDefaults)) {
    const key = error.path.slice(1).split('/')[0] ?? ''
    const schema = (Config.properties as Record<string, Record<string, unknown>>)[key]
    if (!schema || problems.some((p) => p.startsWith(key + ' '))) continue
    problems.push(`${key} must be ${describe(key, schema)} (got ${JSON.stringify(env[key])})`)
  }
  if (typeof withDefaults.DATABASE_URL === 'string' && withDefaults.DATABASE_URL.startsWith('mysql://') && !namesDatabase(withDefaults.DATABASE_URL)) {
    problems.push(`DATABASE_URL must name a database, as in mysql://user:password@host:3306/roster (got ${JSON.stringify(redacted(withDefaults.DATABASE_URL))})`)
  }
  if (typeof withDefaults.TRUST_PROXY === 'string' && !withDefaults.TRUST_PROXY.split(',').every((e) => isProxyEntry(e.trim()))) {
    problems.push(`TRUST_PROXY must be a comma-separated list of addresses, CIDR ranges, loopback, linklocal or uniquelocal (got ${JSON.stringify(env.TRUST_PROXY)})`)
  }
  if (typeof withDefaults.CORS_ORIGINS === 'string' && !withDefaults.CORS_ORIGINS.split(',').every((o) => isOrigin(o.trim()))) {
    problems.push(`CORS_ORIGINS must be * or a comma-separated list of origins such as https://app.example.com (got ${JSON.stringify(env.CORS_ORIGINS)})`)
  }
  if (withDefaults.ADMIN_EMAIL !== undefined && withDefaults.ADMIN_PASSWORD === undefined) {
    problems.push('ADMIN_PASSWORD must be set when ADMIN_EMAIL is')
  }
  if (problems.length > 0) throw new ConfigError(`Invalid configuration: ${problems.join('; ')}`)
  // TOKEN_TTL_SECONDS, the access token's lifetime in version 1, stays accepted under its old name.
  if (!env.ACCESS_TOKEN_TTL_SECONDS?.trim() && typeof withDefaults.TOKEN_TTL_SECONDS === 'number') {
    withDefaults.ACCESS_TOKEN_TTL_SECONDS = withDefaults.TOKEN_TTL_SECONDS
  }
  if (typeof withDefaults.PUBLIC_URL === 'string') withDefaults.PUBLIC_URL = withDefaults.PUBLIC_URL.replace(/\/+$/, '')
  return withDefaults as Config
}
