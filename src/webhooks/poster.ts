import http from 'node:http'
import https from 'node:https'
import type { LookupFunction } from 'node:net'
import { DeliveryFailure } from '../outbox/kind.js'
import { inSpan } from '../tracing/spans.js'
import { hostOf, RefusedDestination, resolvePublic, type DestinationRules, type Resolved, type Resolver } from './destination.js'

/** Of a receiver's answer, at most this much is read: its status is what counts. */
const MAX_ANSWER_BYTES = 4096

/** Where webhook deliveries log what only operators may read: the addresses behind names, the errors as they came. */
export interface WebhookLog {
  warn(details: object, message: string): void
  debug(details: object, message: string): void
}

export interface PosterOptions {
  timeoutMs: number
  rules: DestinationRules
  resolve: Resolver
  log: WebhookLog
}

/** A request that got no answer in time: its message is the delivery's record as it is. */
class NoAnswer extends Error {}

/** A lookup that answers with the address checked before connecting, so that the connection goes where the check said. */
function pinned(to: Resolved): LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all) callback(null, [{ address: to.address, family: to.family }])
    else callback(null, to.address, to.family)
  }
}

/**
 * POSTs webhook deliveries. The host is resolved and every address checked (no private network unless allowed)
 * at each delivery, and the connection is made to the address checked: a name that changes its answer between the
 * check and the connection cannot lead it elsewhere. Redirects are not followed; at most 4 KiB of an answer is read;
 * the whole exchange has WEBHOOK_TIMEOUT_MS. Connections are kept alive between deliveries to the same receiver.
 */
export class Poster {
  // No socket limit: the outbox's lanes and the one-request-per-webhook lease bound what is in flight, and a
  // delivery queued for a socket would spend its timeout before it was sent.
  private readonly agents = { 'http:': new http.Agent({ keepAlive: true }), 'https:': new https.Agent({ keepAlive: true }) }

  constructor(private readonly options: PosterOptions) {}

  /** The answer's status (2xx); a DeliveryFailure, with the status when there was one, otherwise. */
  async post(url: URL, body: string, headers: Record<string, string>): Promise<number> {
    let to: Resolved
    try {
      to = (await resolvePublic(hostOf(url), this.options.rules, this.options.resolve))[0]!
    } catch (err) {
      if (!(err instanceof RefusedDestination)) throw err
      this.options.log.warn({ host: url.hostname, detail: err.detail }, `webhook: not sent: the URL ${err.message}`)
      throw new DeliveryFailure(`the URL ${err.message}`, false)
    }
    const status = await inSpan('POST', {
      'http.request.method': 'POST', 'server.address': url.hostname, 'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80))
    }, async (span) => {
      const answered = await this.exchange(url, to, body, headers)
      span?.setAttribute('http.response.status_code', answered)
      return answered
    })
    if (status >= 200 && status < 300) return status
    if (status >= 300 && status < 400) throw new DeliveryFailure(`answered ${status}: redirects are not followed`, false, status)
    throw new DeliveryFailure(`answered ${status}`, false, status)
  }

  private exchange(url: URL, to: Resolved, body: string, headers: Record<string, string>): Promise<number> {
    const transport = url.protocol === 'https:' ? https : http
    return new Promise<number>((resolve, reject) => {
      const request = transport.request(url, {
        method: 'POST',
        agent: this.agents[url.protocol === 'https:' ? 'https:' : 'http:'],
        lookup: pinned(to),
        headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'user-agent': 'Roster-Webhooks/1' }
      })
      const timer = setTimeout(() => request.destroy(new NoAnswer(`no answer within ${this.options.timeoutMs} ms`)), this.options.timeoutMs)
      const fail = (err: NodeJS.ErrnoException) => {
        clearTimeout(timer)
        if (err instanceof NoAnswer) return reject(new DeliveryFailure(err.message, false))
        // Node's own message names the address connected to, which an admin reading the delivery must not learn.
        this.options.log.debug({ host: url.hostname, detail: err.message }, 'webhook: the exchange failed')
        reject(new DeliveryFailure(err.code ? `the exchange failed (${err.code})` : 'the exchange failed', false))
      }
      request.on('error', fail)
      request.on('response', (response) => {
        let read = 0
        response.on('data', (chunk: Buffer) => {
          read += chunk.length
          if (read > MAX_ANSWER_BYTES) response.destroy() // the rest is not read
        })
        const done = () => {
          clearTimeout(timer)
          resolve(response.statusCode ?? 0)
        }
        response.on('end', done)
        response.on('close', done)
        response.on('error', done)
      })
      request.end(body)
    })
  }

  close(): void {
    this.agents['http:'].destroy()
    this.agents['https:'].destroy()
  }
}
