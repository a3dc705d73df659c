// The outbox's drain, measured by `npm run bench` (scenario `drain`): how fast mail and webhook deliveries leave a
// full outbox for receivers on this machine that answer at once, and how long a sign-up's mail takes to leave while
// the service is under the bench's write load. The receivers run in this process: an SMTP server (smtp-server) that
// accepts everything, and an HTTP server that answers 204.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomBytes } from 'node:crypto'
import { createConnection } from 'mysql2/promise'
import { SMTPServer } from 'smtp-server'

export interface DrainRate {
  count: number
  /** From the messages' commit to the last one received. */
  seconds: number
  perSecond: number
}

export interface DrainFigures {
  mail: DrainRate
  webhookOne: DrainRate
  webhookEight: DrainRate
  /** Sign-up to its mail received by the SMTP server, under the rename load. */
  signupMail: { count: number; medianMs: number; maxMs: number; missing: number }
}

/** An SMTP server that accepts every mail and notes when each recipient's arrived. */
export async function smtpSink(): Promise<{ url: string; received: Map<string, number>; close: () => Promise<void> }> {
  const received = new Map<string, number>()
  const server = new SMTPServer({
    authOptional: true, disabledCommands: ['STARTTLS', 'AUTH'], logger: false, closeTimeout: 50,
    onData: (stream, session, callback) => {
      stream.on('data', () => {})
      stream.on('end', () => {
        for (const to of session.envelope.rcptTo) received.set(to.address, Date.now())
        callback()
      })
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.server.address() as AddressInfo).port
  return { url: `smtp://127.0.0.1:${port}`, received, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

/** An HTTP receiver that answers 204 at once and notes when each delivery (by webhook-id) arrived. */
export async function webhookSink(): Promise<{ url: string; received: Map<string, number>; close: () => Promise<void> }> {
  const received = new Map<string, number>()
  const server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      received.set(String(req.headers['webhook-id']), Date.now())
      res.statusCode = 204
      res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}`, received,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) })
  }
}

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
}

const rate = (count: number, from: number, last: number): DrainRate => {
  const seconds = Math.max(0.001, (last - from) / 1000)
  return { count, seconds: Math.round(seconds * 100) / 100, perSecond: Math.round(count / seconds) }
}

/** Writes `count` mails into the outbox in one transaction, as a burst of sign-ups would; the recipients. */
async function fillMail(databaseUrl: string, count: number): Promise<string[]> {
  const conn = await createConnection(databaseUrl)
  const now = Date.now()
  const tag = randomBytes(3).toString('hex')
  const recipients = Array.from({ length: count }, (_, i) => `drain.${tag}.${i}@example.com`)
  try {
    await conn.beginTransaction()
    for (let i = 0; i < count; i += 500) {
      const rows = recipients.slice(i, i + 500).map((to) => ['mail', 'verify-address', to,
        JSON.stringify({ address: to, token: randomBytes(32).toString('base64url'), link: null, expires_at: now + 86_400_000 }), 'pending', 0, now, now])
      await conn.query('insert into outbox (kind, template, recipient, data, state, attempts, created_at, next_attempt_at) values ?', [rows])
    }
    await conn.commit()
  } finally {
    await conn.end()
  }
  return recipients
}

/** Writes `count` deliveries, shared among the webhooks, into the outbox in one transaction; their webhook-ids. */
async function fillWebhooks(databaseUrl: string, webhookIds: number[], count: number): Promise<string[]> {
  const conn = await createConnection(databaseUrl)
  const now = Date.now()
  const ids = Array.from({ length: count }, () => `evt_${randomBytes(13).toString('hex').toUpperCase().slice(0, 26)}`)
  try {
    await conn.beginTransaction()
    for (let i = 0; i < count; i += 500) {
      const rows = ids.slice(i, i + 500).map((id, j) => ['webhook', 'user.updated', '', JSON.stringify({ id, type: 'user.updated', data: { name: 'Drained' } }),
        'pending', 0, now, now, webhookIds[(i + j) % webhookIds.length], id])
      await conn.query('insert into outbox (kind, template, recipient, data, state, attempts, created_at, next_attempt_at, webhook_id, event_id) values ?', [rows])
    }
    await conn.commit()
  } finally {
    await conn.end()
  }
  return ids
}

export interface DrainTarget {
  url: string
  databaseUrl: string
  adminToken: string
  /** Runs the rename load against the target for the bench's duration. */
  renameLoad: () => Promise<unknown>
  duration: number
}

/**
 * The drain figures, against a Roster started with SMTP_URL at `smtp` and webhooks allowed to this machine. Every
 * webhook made here is deleted before it returns.
 */
export async function measureDrain(target: DrainTarget, smtp: Awaited<ReturnType<typeof smtpSink>>, count = 2000): Promise<DrainFigures> {
  const hooks = await webhookSink()
  const made: number[] = []
  const api = (method: string, path: string, body?: unknown) => fetch(`${target.url}${path}`, {
    method, headers: { authorization: `Bearer ${target.adminToken}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined
  })
  try {
    let from = Date.now()
    const recipients = await fillMail(target.databaseUrl, count)
    await until(() => recipients.every((r) => smtp.received.has(r)), 120_000)
    const mail = rate(recipients.filter((r) => smtp.received.has(r)).length, from, Math.max(...recipients.map((r) => smtp.received.get(r) ?? 0)))

    const webhook = async (n: number): Promise<DrainRate> => {
      const ids: number[] = []
      for (let i = 0; i < n; i++) {
        const res = await api('POST', '/webhooks', { url: `${hooks.url}/hook/${i}`, events: ['user.updated'], description: 'bench drain' })
        if (res.status !== 201) throw new Error(`POST /webhooks answered ${res.status}: ${await res.text()}`)
        const id = ((await res.json()) as { id: number }).id
        ids.push(id)
        made.push(id)
      }
      from = Date.now()
      const events = await fillWebhooks(target.databaseUrl, ids, count)
      await until(() => events.every((e) => hooks.received.has(e)), 120_000)
      return rate(events.filter((e) => hooks.received.has(e)).length, from, Math.max(...events.map((e) => hooks.received.get(e) ?? 0)))
    }
    const webhookOne = await webhook(1)
    const webhookEight = await webhook(8)
    // The sign-ups below measure mail alone: no webhook takes the rename load's events.
    for (const id of made.splice(0)) await api('DELETE', `/webhooks/${id}`)

    // Sign-ups while the service renames at full load: each mail's time from the answer to the SMTP server.
    const load = target.renameLoad()
    const sent = new Map<string, number>()
    const spacing = (target.duration * 1000) / 25
    for (let i = 0; i < 20; i++) {
      await new Promise((r) => setTimeout(r, spacing))
      const email = `signup.${randomBytes(4).toString('hex')}@example.com`
      const res = await fetch(`${target.url}/users`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Bench sign-up', email, password: 'bench-password-1' })
      })
      if (res.status === 201) sent.set(email, Date.now())
    }
    await load
    await until(() => [...sent.keys()].every((e) => smtp.received.has(e)), 10_000)
    const latencies = [...sent].filter(([e]) => smtp.received.has(e)).map(([e, at]) => smtp.received.get(e)! - at).sort((a, b) => a - b)
    const signupMail = {
      count: latencies.length, missing: sent.size - latencies.length,
      medianMs: latencies[Math.floor(latencies.length / 2)] ?? NaN, maxMs: latencies[latencies.length - 1] ?? NaN
    }
    return { mail, webhookOne, webhookEight, signupMail }
  } finally {
    for (const id of made) await api('DELETE', `/webhooks/${id}`).catch(() => undefined)
    await hooks.close()
  }
}
