import { isIP } from 'node:net'
import ipaddr from 'ipaddr.js'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/**
 * The key a client address counts under in every per-client limit (the rate limit, failed logins, mail on demand):
 * one spelling per client. IPv6 is written canonically (`2001:DB8::1`, `2001:0db8:0:0::1` and `[2001:db8::1]` are
 * one client), an IPv4-mapped IPv6 address is its IPv4 address, and IPv6 addresses are grouped by their first
 * `v6PrefixBits` bits (a /64 by default: one subscriber's network, whose addresses a client can change at will).
 * A port after the address (`203.0.113.9:1234`, `[2001:db8::1]:443`) is dropped.
 * Anything that is not an IP address (a test's fake peer) is its own key; no address at all (the client is gone,
 * and its socket with it) is `unknown`.
 */
export function clientKey(address: string | undefined, v6PrefixBits: number): string {
  if (typeof address !== 'string' || address === '') return 'unknown'
  let text = address.trim()
  if (text.startsWith('[') && text.includes(']')) text = text.slice(1, text.indexOf(']'))
  const zone = text.indexOf('%')
  if (zone >= 0) text = text.slice(0, zone)
  const family = isIP(text)
  // An IPv4 address isIP accepts is written canonically already (four decimals, no leading zeros): the common case,
  // and the access line's, for about a tenth of the cost of parsing it.
  if (family === 4) return text
  if (family === 0) {
    // An IPv4 address with a port, as some proxies forward it (IPv6 with a port comes bracketed, and is unwrapped
    // above): the port is not the client, or a proxy that appends one would hand each request a budget of its own.
    const colon = text.indexOf(':')
    if (colon > 0 && colon === text.lastIndexOf(':') && isIP(text.slice(0, colon)) === 4) return text.slice(0, colon)
    return text.toLowerCase()
  }
  const parsed = ipaddr.process(text)
  if (parsed.kind() === 'ipv4') return parsed.toString()
  const bytes = parsed.toByteArray()
  for (let bit = v6PrefixBits; bit < 128; bit++) bytes[bit >> 3]! &= ~(0x80 >> (bit & 7))
  return `${ipaddr.fromByteArray(bytes).toString()}/${v6PrefixBits}`
}

/**
 * `request.client`: the caller's client address as a limit key (above), from the address Fastify reports (the
 * socket's, or the forwarded one when TRUST_PROXY names the proxy), IPv6 grouped by CLIENT_IPV6_PREFIX.
 */
async function clientAddress(app: FastifyInstance): Promise<void> {
  const v6PrefixBits = app.config.CLIENT_IPV6_PREFIX
  app.decorateRequest('client', {
    getter(this: { ip: string | undefined }) {
      return clientKey(this.ip, v6PrefixBits)
    }
  })
}

export default fp(clientAddress, { name: 'client-address' })
