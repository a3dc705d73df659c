import type { AddressInfo } from 'node:net'
import PostalMime from 'postal-mime'
import { SMTPServer, type SMTPServerAddress } from 'smtp-server'
import type { Test } from 'tap'

/** A mail as the SMTP server received and parsed it. */
export interface Received {
  to: string
  from: string
  subject: string
  text: string
  html: string
}

/** How the server answers a recipient: accept it, or refuse it with an SMTP reply code. */
export type Verdict = 'accept' | { code: number; message: string }

/**
 * A real SMTP server in the test process (smtp-server), so that tests read what was delivered over SMTP, parse it
 * (postal-mime) and finish flows with the tokens inside. It can be stopped and started again on the same port, and
 * told to refuse recipients, to play an outage or a refusal.
 */
export class TestSmtp {
  readonly received: Received[] = []
  /** Decides each recipient's answer; accepts all by default. */
  verdict: (to: string) => Verdict = () => 'accept'
  private server: SMTPServer | undefined
  private waiters: Array<() => void> = []
  port = 0

  /** With `tls`, the server speaks TLS from the first byte (smtps://) with this key and certificate. */
  constructor(private readonly tls?: { key: string; cert: string }) {}

  static async start(t: Test, tls?: { key: string; cert: string }): Promise<TestSmtp> {
    const smtp = new TestSmtp(tls)
    await smtp.listen()
    t.teardown(() => smtp.stop())
    return smtp
  }

  get url(): string {
    return `${this.tls ? 'smtps' : 'smtp'}://127.0.0.1:${this.port}`
  }

  async listen(): Promise<void> {
    const server = new SMTPServer({
      ...(this.tls ? { secure: true, key: this.tls.key, cert: this.tls.cert } : {}),
      authOptional: true,
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      closeTimeout: 50,
      onRcptTo: (address: SMTPServerAddress, _session, callback) => {
        const verdict = this.verdict(address.address)
        if (verdict === 'accept') return callback()
        callback(Object.assign(new Error(verdict.message), { responseCode: verdict.code }))
      },
      onData: (stream, _session, callback) => {
        const chunks: Buffer[] = []
        stream.on('data', (chunk: Buffer) => chunks.push(chunk))
        stream.on('end', () => {
          PostalMime.parse(Buffer.concat(chunks)).then((mail) => {
            this.received.push({
              to: mail.to?.[0]?.address ?? '',
              from: mail.from?.address ?? '',
              subject: mail.subject ?? '',
              text: mail.text ?? '',
              html: mail.html ?? ''
            })
            for (const wake of this.waiters.splice(0)) wake()
            callback()
          }, callback)
        })
      }
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(this.port, '127.0.0.1', () => resolve())
    })
    // A client that hangs up (one refusing the server's certificate) is the client's business, not an error here.
    server.on('error', () => {})
    this.port = (server.server.address() as AddressInfo).port
    this.server = server
  }

  /** Stops listening and drops open sessions: the service sees connections refused until `listen()`. */
  async stop(): Promise<void> {
    const server = this.server
    this.server = undefined
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  /** Mail received for an address (case-insensitively). */
  to(address: string): Received[] {
    return this.received.filter((m) => m.to.toLowerCase() === address.toLowerCase())
  }

  /** Waits until `count` mails have come for `address`; the last of them. */
  async waitFor(address: string, count = 1, timeoutMs = 15_000): Promise<Received> {
    const deadline = Date.now() + timeoutMs
    while (this.to(address).length < count) {
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`no mail #${count} for ${address} within ${timeoutMs} ms (got ${this.to(address).length})`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200))
        this.waiters.push(() => { clearTimeout(timer); resolve() })
      })
    }
    return this.to(address)[count - 1]!
  }
}

/** The token a mail carries. */
export function tokenIn(mail: { text: string }): string {
  const match = /Your token: ([A-Za-z0-9_-]{43})/.exec(mail.text)
  if (!match) throw new Error(`no token in the mail: ${mail.text}`)
  return match[1]!
}

/** The code of a mail: six digits on a line of their own, where phones look for it. */
export function codeIn(mail: { text: string }): string {
  const match = /^([0-9]{6})$/m.exec(mail.text)
  if (!match) throw new Error(`no code on a line of its own in: ${mail.text}`)
  return match[1]!
}

/** A code that is not `code`: the `n`-th after it. */
export const otherCode = (code: string, n = 1) => String((Number(code) + n) % 1_000_000).padStart(6, '0')
