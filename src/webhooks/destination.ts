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

/** Why a webhook's URL may not be used. */
export class RefusedDestination extends Error {}

/**
 * Whether an address is on the public internet: not loopback, private (RFC 1918, unique local), link-local (cloud
 * metadata at 169.254.169.254), carrier-grade NAT, multicast, reserved or unspecified. IPv4 written as IPv6
 * (::ffff:127.0.0.1) is judged as IPv4.
 */
export function isPublic(address: string): boolean {
  if (!ipaddr.isValid(address)) return false
  return ipaddr.process(address).range() === 'unicast'
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
 * private address among public ones is refused, since a connection may take any of them.
 */
export async function resolvePublic(hostname: string, rules: DestinationRules, resolve: Resolver): Promise<Resolved[]> {
  let addresses: Resolved[]
  try {
    addresses = ipaddr.isValid(hostname) ? [{ address: hostname, family: hostname.includes(':') ? 6 : 4 }] : await resolve(hostname)
  } catch (err) {
    throw new RefusedDestination(`does not resolve (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`)
  }
  if (addresses.length === 0) throw new RefusedDestination('does not resolve')
  if (!rules.allowPrivate) {
    const inner = addresses.find((a) => !isPublic(a.address))
    if (inner) {
      throw new RefusedDestination(`resolves to ${inner.address}, which is not a public address (allowed only with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true)`)
    }
  }
  return addresses
}
