import { lookup } from 'node:dns/promises'
import ipaddr from 'ipaddr.js'

/** Where webhooks may point (WEBHOOK_ALLOW_HTTP, WEBHOOK_ALLOW_PRIVATE_NETWORKS). */
export interface DestinationRules {
  allowHttp: boolean
  allowPrivate: boolean
}

/** An address a host name resolves to. */
export interface Resolved {
  address: string
  family: number
}

/** Resolves a host name to all its addresses (the system's resolver; tests give their own). */
export type Resolver = (hostname: string) => Promise<Resolved[]>

export const systemResolver: Resolver = (hostname) => lookup(hostname, { all: true, verbatim: true })

/**
 * Why a webhook's URL may not be used: the message is what the admin is told and a delivery's record keeps; `detail`
 * (the address a name resolved to, the resolver's error) is for the operator's log only, since telling an admin
 * token what internal names resolve to would map the network for it.
 */
export class RefusedDestination extends Error {
  constructor(message: string, readonly detail?: string) {
    super(message)
  }
}

const NAT64 = ipaddr.IPv6.parseCIDR('64:ff9b::/96')
const NAT64_LOCAL = ipaddr.IPv6.parseCIDR('64:ff9b:1::/48')
const SIX_TO_FOUR = ipaddr.IPv6.parseCIDR('2002::/16')
const TEREDO = ipaddr.IPv6.parseCIDR('2001::/32')

/** Where RFC 6052 puts an IPv4 address after a prefix of 48, 56, 64 and 96 bits (byte 8 is left out). */
const RFC6052_PLACES = [[6, 7, 9, 10], [7, 9, 10, 11], [9, 10, 11, 12], [12, 13, 14, 15]]

/**
 * The IPv4 addresses an IPv6 address carries to a network that reaches them: IPv4-compatible (`::a.b.c.d`, with
 * `::` and `::1` as 0.0.0.0 and 0.0.0.1) and mapped (`::ffff:a.b.c.d`), NAT64, 6to4, and Teredo's server and
 * client (the client's bits inverted). The local NAT64 prefix may be cut at any RFC 6052 length: every place counts.
 */
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4[] {
  const bytes = address.toByteArray()
  const at = (places: number[], invert = 0) => new ipaddr.IPv4(places.map((i) => bytes[i]! ^ invert))
  const last = [12, 13, 14, 15]
  const compatible = bytes.slice(0, 12).every((b) => b === 0)
  const mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff
  if (compatible || mapped) return [at(last)]
  if (address.match(NAT64)) return [at(last)]
  if (address.match(NAT64_LOCAL)) return RFC6052_PLACES.map((places) => at(places))
  if (address.match(SIX_TO_FOUR)) return [at([2, 3, 4, 5])]
  if (address.match(TEREDO)) return [at([4, 5, 6, 7]), at(last, 0xff)]
  return []
}

/**
 * Whether an address is on the public internet: not loopback, private (RFC 1918, unique local), link-local (cloud
 * metadata at 169.254.169.254), carrier-grade NAT, multicast, reserved or unspecified. An IPv6 address that embeds
 * IPv4 is judged by the IPv4 it embeds (all of them, where several may be meant), since that is where it leads.
 */
export function isPublic(address: string): boolean {
  if (!ipaddr.isValid(address)) return false
  const parsed = ipaddr.parse(address)
  if (parsed.kind() === 'ipv4') return parsed.range() === 'unicast'
  const embedded = embeddedIPv4(parsed as ipaddr.IPv6)
  if (embedded.length > 0) return embedded.every((v4) => v4.range() === 'unicast')
  return parsed.range() === 'unicast'
}

/** The URL's form: https (or http when allowed), no credentials in it, a host. */
export function checkUrl(raw: string, rules: DestinationRules): URL {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new RefusedDestination('is not a URL')
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && rules.allowHttp)) {
    throw new RefusedDestination(rules.allowHttp ? 'must be https:// or http://' : 'must be https:// (http:// only with WEBHOOK_ALLOW_HTTP=true)')
  }
  if (url.username || url.password) throw new RefusedDestination('must not carry credentials: the signature authenticates deliveries')
  if (!url.hostname) throw new RefusedDestination('has no host')
  return url
}

/** A URL's host as the resolver takes it: an IPv6 literal without its brackets. */
export const hostOf = (url: URL): string => url.hostname.replace(/^\[(.*)\]$/, '$1')

/**
 * The addresses a host resolves to, every one of them public unless private networks are allowed: a name with one
 * private address among public ones is refused, since a connection may take any of them. A refusal says only that
 * the host does not resolve or is not public; what it resolved to, and why not, are its `detail`.
 */
export async function resolvePublic(hostname: string, rules: DestinationRules, resolve: Resolver): Promise<Resolved[]> {
  let addresses: Resolved[]
  try {
    addresses = ipaddr.isValid(hostname) ? [{ address: hostname, family: hostname.includes(':') ? 6 : 4 }] : await resolve(hostname)
  } catch (err) {
    throw new RefusedDestination('has a host that does not resolve', (err as NodeJS.ErrnoException).code ?? (err as Error).message)
  }
  if (addresses.length === 0) throw new RefusedDestination('has a host that does not resolve', 'no addresses')
  if (!rules.allowPrivate) {
    const inner = addresses.find((a) => !isPublic(a.address))
    if (inner) {
      throw new RefusedDestination(
        'has a host that is not public: it is or resolves to a non-public address (allowed only with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true)',
        `resolved to ${inner.address}`
      )
    }
  }
  return addresses
}
