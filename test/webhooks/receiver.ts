import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { Webhook } from 'standardwebhooks'

/** One request the receiver got. */
export interface Received {
  id: string
  timestamp: string
  signature: string
  body: string
  event: { id: string; type: string; user_id: number | null; data: Record<string, unknown>; previous: Record<string, unknown> | null }
  /** Whether `standardwebhooks` verified it with each of the receiver's secrets, in order. */
  verified: boolean[]
  at: number
}

/** What the receiver answers a request: a status, after a delay, with a body of some size, or a redirect. */
export interface Answer {
  status: number
  delayMs?: number
  bodyBytes?: number
  location?: string
}

/**
 * A webhook receiver in the test process, as a customer's would be: an HTTP server that verifies every delivery's
 * signature with the `standardwebhooks` library, can go down and come back on the same port, and answers as the test
 * says.
 */
export class Receiver {
  readonly received: Received[] = []
  secrets: string[] = []
  answer: (r: Received) => Answer = () => ({ status: 204 })
  /** The most requests it had in flight at once. */
  maxInFlight = 0
  private inFlight = 0
  private isDown = false
  private server: http.Server
  port = 0

  private constructor() {
    this.server = this.make()
  }

  static async start(t: Test): Promise<Receiver> {
    const r = new Receiver()
    await r.listen()
    t.teardown(() => r.stop())
    return r
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`
  }

  private make(): http.Server {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        this.inFlight += 1
        this.maxInFlight = Math.max(this.maxInFlight, this.inFlight)
        const body = Buffer.concat(chunks).toString()
        const headers = { 'webhook-id': String(req.headers['webhook-id']), 'webhook-timestamp': String(req.headers['webhook-timestamp']), 'webhook-signature': String(req.headers['webhook-signature']) }
        const verified = this.secrets.map((secret) => {
          try {
            new Webhook(secret).verify(body, headers)
            return true
          } catch {
            return false
          }
        })
        const got: Received = {
          id: headers['webhook-id'], timestamp: headers['webhook-timestamp'], signature: headers['webhook-signature'], body,
          event: JSON.parse(body) as Received['event'], verified, at: Date.now()
        }
        this.received.push(got)
        const answer = this.answer(got)
        setTimeout(() => {
          this.inFlight -= 1
          if (answer.location) res.setHeader('location', answer.location)
          res.statusCode = answer.status
          if (answer.bodyBytes) {
            res.setHeader('content-type', 'text/plain')
            const chunk = Buffer.alloc(65536, 'x')
            let left = answer.bodyBytes
            const write = () => {
              while (left > 0) {
                left -= chunk.length
                if (!res.write(chunk)) return void res.once('drain', write)
              }
              res.end()
            }
            res.on('error', () => {})
            write()
          } else {
            res.end()
          }
        }, answer.delayMs ?? 0)
      })
    })
    server.on('connection', (socket) => { if (this.isDown) socket.destroy() })
    return server
  }

  /** Listens (again, on the same port once it had one). */
  async listen(): Promise<void> {
    this.server = this.make()
    await new Promise<void>((resolve) => this.server.listen(this.port, '127.0.0.1', resolve))
    this.port = (this.server.address() as AddressInfo).port
  }

  /**
   * Goes down: every connection is cut as it is made, and no delivery gets an answer. The port stays bound, so that
   * nothing else on the machine (another test's client socket) can take it before the receiver is back.
   */
  down(): void {
    this.isDown = true
    this.server.closeAllConnections()
  }

  /** Back up on the same port. */
  up(): void {
    this.isDown = false
  }

  /** Closes for good: the port is given back. */
  async stop(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  ids(): string[] {
    return this.received.map((r) => r.id)
  }
}

export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}
