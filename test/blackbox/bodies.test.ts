import { randomBytes } from 'node:crypto'
import type { Socket } from 'node:net'
import t from 'tap'
import { ADMIN } from '../helpers.js'
import { assertRecovered, rawExchange, startBuilt, statusOf, wholeAnswer, type RunningService } from './service.js'

/**
 * Bodies over a real socket, against the built service: bodies nobody reads, bodies over the limit in every
 * encoding, bodies dripped or abandoned. Each group ends with the same process answering and its descriptors and
 * memory back where they were; the groups whose failure would show only later (a timer, a stream) are checked after
 * the body deadline has passed.
 */

const BODY_TIMEOUT_MS = 10_000
const big = (n: number) => 'x'.repeat(n)

/** A request written whole (headers and body) before anything is read, as most HTTP clients send one. */
function request(method: string, path: string, headers: Record<string, string>, body: Buffer | string = ''): (s: Socket) => void {
  const payload = typeof body === 'string' ? Buffer.from(body) : body
  const head = Object.entries({ host: 'roster', 'content-length': String(payload.length), ...headers })
    .map(([name, value]) => `${name}: ${value}\r\n`).join('')
  return (socket) => {
    socket.write(`${method} ${path} HTTP/1.1\r\n${head}\r\n`)
    if (payload.length) socket.write(payload)
  }
}

async function token(service: RunningService): Promise<string> {
  const res = await fetch(`${service.base}/auth/tokens`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN)
  })
  return ((await res.json()) as { token: string }).token
}

function multipartBody(parts: Array<{ name: string; content: string | Buffer; filename?: string; headers?: string }>) {
  const boundary = 'roster' + randomBytes(6).toString('hex')
  const chunks: Buffer[] = []
  for (const part of parts) {
    const file = part.filename ? `; filename="${part.filename}"` : ''
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"${file}\r\n${part.headers ?? ''}\r\n`))
    chunks.push(Buffer.isBuffer(part.content) ? part.content : Buffer.from(part.content))
    chunks.push(Buffer.from('\r\n'))
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`))
  return { body: Buffer.concat(chunks), type: `multipart/form-data; boundary=${boundary}` }
}

t.test('bodies over a real socket never end the process', async (t) => {
  const service = await startBuilt(t)
  const baseline = service.usage()
  const auth = `Bearer ${await token(service)}`
  const port = service.port
  const started = Date.now()

  // Dripped bodies in each encoding (408 within the deadline) and abandoned uploads, side by side with the rest.
  const drip = (contentType: string, first: string, target = 'POST /users') => rawExchange(port, (socket) => {
    socket.write(`${target} HTTP/1.1\r\nhost: roster\r\nauthorization: ${auth}\r\ncontent-type: ${contentType}\r\ncontent-length: 1000\r\n\r\n${first}`)
    const timer = setInterval(() => { if (!socket.destroyed) socket.write(' ') }, 1_000)
    socket.on('close', () => clearInterval(timer))
  }, BODY_TIMEOUT_MS + 5_000)
  const abandon = async (contentType: string) => {
    const { closed } = await rawExchange(port, (socket) => {
      socket.write(`POST /users HTTP/1.1\r\nhost: roster\r\ncontent-type: ${contentType}\r\ncontent-length: 100000\r\n\r\n${big(50_000)}`)
      setTimeout(() => socket.destroy(), 200)
    }, 2_000)
    return closed
  }
  const slow = Promise.all([
    drip('application/json', '{'),
    drip('application/x-www-form-urlencoded', 'name='),
    drip('text/plain', 'a', 'PUT /users/1/name'),
    drip('multipart/form-data; boundary=x', '--x\r\n'),
    abandon('application/json'), abandon('application/x-www-form-urlencoded'), abandon('multipart/form-data; boundary=x')
  ])

  // Bodies nobody reads: answered at once; before, each ended the process when the body deadline fired.
  const unread: Array<[string, (s: Socket) => void, number]> = [
    ['GET /health/live with a body', request('GET', '/health/live', {}, 'hello'), 200],
    ['GET /openapi.json with a body', request('GET', '/openapi.json', {}, '{}'), 200],
    ['POST /users as text/xml', request('POST', '/users', { 'content-type': 'text/xml' }, '<user/>'), 415],
    ['POST to an unknown path', request('POST', '/nope', { 'content-type': 'application/json' }, '{"a":1}'), 404],
    ['DELETE /auth/tokens/current with a body and no type', request('DELETE', '/auth/tokens/current', { authorization: auth }, '{}'), 415],
    ['POST /users, 20 KB of JSON', request('POST', '/users', { 'content-type': 'application/json' }, JSON.stringify({ name: 'a'.repeat(20_000) })), 413]
  ]
  // Read until one whole answer has come (a kept connection never closes of itself), on a host slow or not.
  const unreadAnswers = await Promise.all(unread.map(([, send]) => rawExchange(port, send, 10_000, { until: wholeAnswer })))
  unread.forEach(([what, , status], i) => t.equal(statusOf(unreadAnswers[i]!.answer), status, `${what}: ${status}`))

  // Bodies over the limit in every encoding, written whole before the answer is read: a readable 413 each.
  const mp = multipartBody([{ name: 'name', content: big(20_000) }])
  const mpFile = multipartBody([{ name: 'email', filename: 'a.txt', content: big(3_000_000) }])
  const mpParts = multipartBody(Array.from({ length: 40 }, (_, i) => ({ name: `f${i}`, content: 'x' })))
  const mpHeader = multipartBody([{ name: 'name', content: 'Ada', headers: `X-Pad: ${big(70_000)}\r\n` }])
  const oversized: Array<[string, (s: Socket) => void, number[]]> = [
    ['3 MB of JSON', request('POST', '/users', { 'content-type': 'application/json' }, Buffer.alloc(3_000_000, 'a')), [413]],
    ['3 MB chunked JSON', (socket) => {
      socket.write('POST /users HTTP/1.1\r\nhost: roster\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n')
      for (let i = 0; i < 30; i++) socket.write(`186a0\r\n${big(100_000)}\r\n`)
      socket.write('0\r\n\r\n')
    }, [413]],
    ['a 3 MB form', request('POST', '/users', { 'content-type': 'application/x-www-form-urlencoded' }, `name=${big(3_000_000)}`), [413]],
    ['3 MB of text on a key path', request('PUT', '/users/1/name', { 'content-type': 'text/plain', authorization: auth }, big(3_000_000)), [413]],
    ['a 3 MB file on a key path', request('PUT', '/users/1/name', { 'content-type': 'application/octet-stream', authorization: auth }, big(3_000_000)), [413]],
    ['a multipart field over its limit', request('POST', '/users', { 'content-type': mp.type }, mp.body), [413]],
    ['a 3 MB multipart file', request('PUT', '/users/1/email', { 'content-type': mpFile.type, authorization: auth }, mpFile.body), [413]],
    ['a multipart body of 40 parts', request('POST', '/users', { 'content-type': mpParts.type }, mpParts.body), [413]],
    ['a multipart part header of 70 KB', request('POST', '/users', { 'content-type': mpHeader.type }, mpHeader.body), [400, 413]]
  ]
  const oversizedAnswers = await Promise.all(oversized.map(([, send]) => rawExchange(port, send, 10_000)))
  for (const [i, [what, , statuses]] of oversized.entries()) {
    const { answer, error } = oversizedAnswers[i]!
    t.ok(statuses.includes(statusOf(answer)), `${what}: ${statuses.join(' or ')} read by the client (got ${statusOf(answer)}${error ? `, ${error}` : ''})`)
    t.match(answer, /application\/problem\+json/, `${what}: as problem+json`)
  }
  await assertRecovered(t, service, baseline, 'after oversized bodies')

  // A request pipelined behind an answer that closes the connection is never served (the client sends it again).
  // The body is still on its way when the 413 goes (its rest follows 300 ms later, on a client that keeps its side
  // open after the server's half-close, as one still uploading does): a body that had come whole would be read and
  // dropped, and the connection kept.
  const sentLater: string[] = []
  const later = (what: string, socket: Socket, send: () => void) => setTimeout(() => {
    if (!socket.writable) return
    send()
    sentLater.push(what)
  }, 300)
  const oversizedHead = 'POST /users HTTP/1.1\r\nhost: roster\r\ncontent-type: application/json\r\n'
  const behind = await rawExchange(port, (socket) => {
    socket.write(`${oversizedHead}content-length: 100000\r\n\r\n${big(10_000)}`)
    later('behind', socket, () => {
      socket.write(big(90_000))
      request('POST', '/users', { 'content-type': 'application/json' }, JSON.stringify({ name: 'Behind', email: 'behind@example.com', password: 'password-123' }))(socket)
    })
  }, 5_000, { allowHalfOpen: true })
  t.ok(sentLater.includes('behind'), 'the rest of the body and the request behind it were sent on the connection')
  t.same([...behind.answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])), [413], 'only the 413 is answered')
  t.match(behind.answer, /connection: close/i, 'and it says the connection closes')
  const lookup = await fetch(`${service.base}/users/email/behind@example.com`, { headers: { authorization: auth } })
  await lookup.arrayBuffer()
  t.equal(lookup.status, 404, `and the request behind it created nothing (got ${lookup.status})`)

  // A client that goes on sending requests on such a connection has them dropped, and is cut past a few.
  const flood = await rawExchange(port, (socket) => {
    socket.write(`${oversizedHead}content-length: 30000\r\n\r\n${big(1_000)}`)
    later('flood', socket, () => {
      socket.write(big(29_000) + 'GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(2_000))
      // The server's close is silent to a client that keeps its side open: its next write tells (EPIPE, then the
      // close), where a connection still lingering (for LINGER_IDLE_MS) would take it without a word.
      setTimeout(() => { if (socket.writable) socket.write('x') }, 700)
    })
  }, 5_000, { allowHalfOpen: true })
  t.ok(sentLater.includes('flood'), 'the requests behind it were sent on the connection')
  t.same([...flood.answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])), [413], 'the requests behind the 413 are not answered')
  t.ok(flood.closed, `and the connection is cut (${flood.error ?? 'no error'})`)

  // Small bodies answered from their headers alone (401, 415) keep the connection for the next request.
  const early: Array<[string, string]> = [
    ['401 without a token', 'POST /users/1/emails HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{"address":"a@example.com"}'],
    ['415', 'POST /users HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: 7\r\n\r\n<user/>']
  ]
  for (const [what, first] of early) {
    const kept = await rawExchange(port, (socket) => socket.write(`${first}GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n`), 1_500)
    const statuses = [...kept.answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]))
    t.equal(statuses.length, 2, `${what}: the request after it is answered on the same connection (${statuses.join(', ')})`)
    t.notMatch(kept.answer, /connection: close/i, `${what}: the connection is kept`)
  }

  // Clients that reset the connection while their request is served: nothing errs.
  await Promise.all(Array.from({ length: 20 }, () => rawExchange(port, (socket) => {
    request('POST', '/users/1/emails', { 'content-type': 'application/json', authorization: auth, 'idempotency-key': randomBytes(8).toString('hex') },
      JSON.stringify({ address: `reset.${randomBytes(4).toString('hex')}@example.com` }))(socket)
    socket.resetAndDestroy()
  }, 1_000)))

  const [json, form, text, multi, ...abandoned] = await slow
  t.equal(statusOf(json.answer), 408, 'a dripped JSON body: 408')
  t.equal(statusOf(form.answer), 408, 'a dripped form: 408')
  t.equal(statusOf(text.answer), 408, 'a dripped text body on a key path: 408')
  t.equal(statusOf(multi.answer), 408, 'a dripped multipart body: 408')
  t.match(json.answer, /"code":"REQUEST_TIMEOUT"/, 'as problem+json')
  t.same(abandoned, [true, true, true], 'abandoned uploads are closed')

  // Every timer started by the groups above has fired or been released by now.
  const waited = Date.now() - started
  if (waited < BODY_TIMEOUT_MS + 1_000) await new Promise((resolve) => setTimeout(resolve, BODY_TIMEOUT_MS + 1_000 - waited))
  await assertRecovered(t, service, baseline, 'past the body deadline of every request above')
  t.same(service.lines.filter((line) => /Unhandled|uncaught|"level":(50|60)/.test(line)), [], 'nothing uncaught, no error, nothing fatal in the log')
})
