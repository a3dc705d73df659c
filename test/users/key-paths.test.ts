import t from 'tap'
import type { App } from '../../src/app.js'
import { KEY_PATH_BODY_LIMIT } from '../../src/http/key-path.js'
import { adminUser, assertProblem, build, form, multipart, newUser, type TestUser } from '../helpers.js'

interface Encoding {
  name: string
  body: (key: string, value: string) => { payload?: string | Buffer; headers: Record<string, string> }
}

/** Every way a client may send the value of a key path. */
const encodings: Encoding[] = [
  { name: 'JSON object', body: (k, v) => ({ payload: JSON.stringify({ [k]: v }), headers: { 'content-type': 'application/json' } }) },
  { name: 'JSON string', body: (_k, v) => ({ payload: JSON.stringify(v), headers: { 'content-type': 'application/json' } }) },
  { name: 'urlencoded form', body: (k, v) => form({ [k]: v }) },
  { name: 'multipart field', body: (k, v) => multipart({ [k]: v }) },
  { name: 'multipart file', body: (k, v) => multipart({ [k]: { filename: 'value.txt', content: `${v}\n`, type: 'text/plain' } }) },
  { name: 'text/plain', body: (_k, v) => ({ payload: `  ${v}\r\n`, headers: { 'content-type': 'text/plain; charset=utf-8' } }) },
  { name: 'raw file (octet-stream)', body: (_k, v) => ({ payload: Buffer.from(`${v}\n`), headers: { 'content-type': 'application/octet-stream' } }) },
  { name: 'raw file (odd type)', body: (_k, v) => ({ payload: Buffer.from(`${v}\n`), headers: { 'content-type': 'image/png' } }) },
  { name: 'no content type', body: (_k, v) => ({ payload: Buffer.from(`${v}\n`), headers: {} }) }
]

const withAuth = (who: TestUser, enc: { payload: Buffer; headers: Record<string, string> }) =>
  ({ payload: enc.payload, headers: { ...enc.headers, ...who.headers } })

async function put(app: App, who: TestUser, url: string, enc: { payload?: string | Buffer; headers: Record<string, string> }, method: 'PUT' | 'POST' = 'PUT') {
  return app.inject({ method, url, headers: { ...enc.headers, ...who.headers }, payload: enc.payload })
}

t.test('every encoding places a value at a key path', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  const primaryId = (await app.inject({ url: `/users/${user.id}/email`, headers: user.headers })).json().id
  let n = 0
  for (const enc of encodings) {
    n++
    const address = `Placed${n}@Example.com`
    for (const method of ['PUT', 'POST'] as const) {
      const res = await put(app, user, `/users/${user.id}/email`, enc.body('email', method === 'PUT' ? address : `post.${address}`), method)
      t.equal(res.statusCode, 200, `${method} ${enc.name}: ${res.body.slice(0, 160)}`)
      t.equal(res.json().address, method === 'PUT' ? address : `post.${address}`, `${method} ${enc.name}: trimmed value stored as given`)
      t.equal(res.json().id, primaryId, `${method} ${enc.name}: replaced in place`)
    }
    const name = `Name via ${enc.name}`
    const renamed = await put(app, user, `/users/${user.id}/name`, enc.body('name', name))
    t.equal(renamed.statusCode, 200, `name ${enc.name}: ${renamed.body.slice(0, 160)}`)
    t.equal(renamed.json().name, name)
  }
  const me = (await app.inject({ url: `/users/${user.id}`, headers: user.headers })).json()
  t.equal(me.email, `post.Placed${n}@Example.com`, 'the user shows its new primary address')
})

t.test('the same validation and errors whatever the encoding', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  const before = (await app.inject({ url: `/users/${user.id}`, headers: user.headers })).json()
  for (const enc of encodings) {
    const bad = await put(app, user, `/users/${user.id}/email`, enc.body('email', 'not an address'))
    assertProblem(t, bad, 400, 'VALIDATION_FAILED', `bad address, ${enc.name}`)
    t.equal(bad.json().errors[0].path, '/email', `${enc.name}: path names the field`)
    const long = await put(app, user, `/users/${user.id}/email`, enc.body('email', `${'a'.repeat(250)}@example.com`))
    assertProblem(t, long, 400, 'VALIDATION_FAILED', `over-long value, ${enc.name}`)
    const blank = await put(app, user, `/users/${user.id}/name`, enc.body('name', '   '))
    assertProblem(t, blank, 400, 'VALIDATION_FAILED', `blank name, ${enc.name}`)
  }
  const huge = await put(app, user, `/users/${user.id}/name`, { payload: Buffer.alloc(KEY_PATH_BODY_LIMIT + 1, 'a'), headers: { 'content-type': 'application/octet-stream' } })
  assertProblem(t, huge, 413, 'PAYLOAD_TOO_LARGE', 'oversized raw body')
  const hugeJson = await put(app, user, `/users/${user.id}/name`, { payload: JSON.stringify({ name: 'a'.repeat(KEY_PATH_BODY_LIMIT) }), headers: { 'content-type': 'application/json' } })
  assertProblem(t, hugeJson, 413, 'PAYLOAD_TOO_LARGE', 'oversized JSON body')
  const hugeFile = await put(app, user, `/users/${user.id}/name`, multipart({ name: { filename: 'n.txt', content: Buffer.alloc(5000, 'a') } }))
  assertProblem(t, hugeFile, 413, 'PAYLOAD_TOO_LARGE', 'oversized multipart file')
  const extra = await put(app, user, `/users/${user.id}/name`, { payload: JSON.stringify({ name: 'X', role: 'admin' }), headers: { 'content-type': 'application/json' } })
  assertProblem(t, extra, 400, 'VALIDATION_FAILED', 'another field next to the key')
  const empty = await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: user.headers })
  assertProblem(t, empty, 400, 'VALIDATION_FAILED', 'no body at all')
  const latin1 = await put(app, user, `/users/${user.id}/name`, { payload: Buffer.from([0x41, 0xff, 0xfe]), headers: { 'content-type': 'application/octet-stream' } })
  assertProblem(t, latin1, 400, 'VALIDATION_FAILED', 'not UTF-8')
  const number = await put(app, user, `/users/${user.id}/name`, { payload: '42', headers: { 'content-type': 'application/json' } })
  assertProblem(t, number, 400, 'VALIDATION_FAILED', 'a JSON number is not a name')
  const after = (await app.inject({ url: `/users/${user.id}`, headers: user.headers })).json()
  t.same(after, before, 'nothing changed')
})

t.test('status and role key paths take bare values too', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app)
  const res = await app.inject({ method: 'PUT', url: `/users/${user.id}/role`, headers: { ...admin.headers, 'content-type': 'text/plain' }, payload: 'admin\n' })
  t.equal(res.statusCode, 200)
  t.equal(res.json().role, 'admin')
  const status = await app.inject({ method: 'PUT', url: `/users/${user.id}/status`, ...withAuth(admin, multipart({ status: { filename: 's.txt', content: 'BANNED' } })) })
  t.equal(status.statusCode, 200)
  t.equal(status.json().status, 'BANNED')
})

t.test('write routes that are not key paths refuse other content types', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  const res = await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: { ...user.headers, 'content-type': 'text/plain' }, payload: 'a@example.com' })
  assertProblem(t, res, 415, 'UNSUPPORTED_MEDIA_TYPE')
  const ok = await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, ...withAuth(user, multipart({ address: { filename: 'a.txt', content: 'file@example.com\n' } })) })
  t.equal(ok.statusCode, 201, 'a multipart file part is a value too')
  t.equal(ok.json().address, 'file@example.com')
})

t.test('X-HTTP-Method-Override routes POST as PUT or DELETE, rules included', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app)
  const renamed = await app.inject({ method: 'POST', url: `/users/${user.id}/name`, headers: { ...user.headers, 'x-http-method-override': 'PUT' }, payload: { name: 'Overridden' } })
  t.equal(renamed.statusCode, 200)
  t.equal(renamed.json().name, 'Overridden')
  const invalid = await app.inject({ method: 'POST', url: `/users/${user.id}/name`, headers: { ...user.headers, 'x-http-method-override': 'put' }, payload: { name: 7 } })
  assertProblem(t, invalid, 400, 'VALIDATION_FAILED', 'validation applies')
  const second = await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'second@example.com' } })
  const emailUrl = `/users/${user.id}/emails/${second.json().id}`
  const byAdmin = await app.inject({ method: 'POST', url: emailUrl, headers: { ...admin.headers, 'x-http-method-override': 'DELETE' } })
  assertProblem(t, byAdmin, 401, 'FORBIDDEN', 'an override cannot reach a forbidden method')
  const escalate = await app.inject({ method: 'POST', url: `/users/${user.id}/role`, headers: { ...user.headers, 'x-http-method-override': 'PUT' }, payload: { role: 'admin' } })
  assertProblem(t, escalate, 401, 'FORBIDDEN', 'nor an admin-only route')
  const byOwner = await app.inject({ method: 'POST', url: emailUrl, headers: { ...user.headers, 'x-http-method-override': 'DELETE' } })
  t.equal(byOwner.statusCode, 204)
  const onGet = await app.inject({ method: 'GET', url: `/users/${user.id}`, headers: { ...user.headers, 'x-http-method-override': 'DELETE' } })
  t.equal(onGet.statusCode, 200, 'only POST is overridden')
})

t.test('every write that is not a key path, in each of its encodings', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  let n = 0
  const encodings: Array<[string, (fields: Record<string, string>) => { payload: string | Buffer; headers: Record<string, string> }]> = [
    ['JSON', (f) => ({ payload: JSON.stringify(f), headers: { 'content-type': 'application/json' } })],
    ['form', form],
    ['multipart fields', multipart],
    ['multipart files', (f) => multipart(Object.fromEntries(Object.entries(f).map(([k, v]) => [k, { filename: `${k}.txt`, content: `${v}\n` }])))]
  ]
  for (const [name, encode] of encodings) {
    n++
    const signup = await app.inject({ method: 'POST', url: '/users', ...encode({ name: `Enc ${n}`, email: `enc${n}@example.com`, password: 'password-123' }) })
    t.equal(signup.statusCode, 201, `POST /users, ${name}`)
    const user = signup.json()
    const login = await app.inject({ method: 'POST', url: '/auth/tokens', ...encode({ email: `enc${n}@example.com`, password: 'password-123' }) })
    t.equal(login.statusCode, 201, `POST /auth/tokens, ${name}`)
    const headers = (enc: { headers: Record<string, string> }) => ({ ...enc.headers, ...admin.headers })
    const addEnc = encode({ address: `enc${n}.b@example.com` })
    const added = await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, payload: addEnc.payload, headers: headers(addEnc) })
    t.equal(added.statusCode, 201, `POST /users/{id}/emails, ${name}`)
    const putEnc = encode({ address: `enc${n}.c@example.com` })
    const changed = await app.inject({ method: 'PUT', url: `/users/${user.id}/emails/${added.json().id}`, payload: putEnc.payload, headers: headers(putEnc) })
    t.equal(changed.statusCode, 200, `PUT /users/{id}/emails/{email_id}, ${name}`)
    t.equal(changed.json().address, `enc${n}.c@example.com`)
    const pwEnc = encode({ password: 'password-456' })
    t.equal((await app.inject({ method: 'PUT', url: `/users/${user.id}/password`, payload: pwEnc.payload, headers: headers(pwEnc) })).statusCode, 204, `PUT password, ${name}`)
  }
  for (const [type, payload] of [['text/plain', 'address=x@example.com'], ['application/octet-stream', Buffer.from('x@example.com')], ['application/xml', '<a/>']] as const) {
    for (const url of ['/users', '/auth/tokens', `/users/${admin.id}/emails`]) {
      assertProblem(t, await app.inject({ method: 'POST', url, headers: { ...admin.headers, 'content-type': type }, payload }), 415, 'UNSUPPORTED_MEDIA_TYPE', `${url} as ${type}`)
    }
  }
})

t.test('multipart limits answer 413, malformed multipart 400, and nothing is written', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  const url = `/users/${user.id}/emails`
  const send = (enc: { payload: Buffer; headers: Record<string, string> }) =>
    app.inject({ method: 'POST', url, payload: enc.payload, headers: { ...enc.headers, ...user.headers } })
  const many = (count: number, file: boolean) => multipart(Object.fromEntries(Array.from({ length: count }, (_, i) =>
    [`f${i}`, file ? { filename: `${i}.txt`, content: 'x' } : 'x'])))
  assertProblem(t, await send(many(11, true)), 413, 'PAYLOAD_TOO_LARGE', 'too many files')
  assertProblem(t, await send(many(11, false)), 413, 'PAYLOAD_TOO_LARGE', 'too many fields')
  assertProblem(t, await send(multipart({ address: 'a'.repeat(5000) })), 413, 'PAYLOAD_TOO_LARGE', 'a field over 4 KiB')
  assertProblem(t, await send(multipart({ address: { filename: 'a.txt', content: Buffer.alloc(5000, 'a') } })), 413, 'PAYLOAD_TOO_LARGE', 'a file over 4 KiB')
  const mixed = multipart({
    ...Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`f${i}`, 'x'])),
    ...Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`g${i}`, { filename: `${i}.txt`, content: 'x' }]))
  })
  assertProblem(t, await send(mixed), 413, 'PAYLOAD_TOO_LARGE', 'too many parts')
  for (const [type, payload] of [['multipart/form-data', '--x--\r\n'], ['multipart/form-data; boundary=x', 'no parts at all'],
    ['multipart/form-data; boundary=x', '--x\r\nContent-Disposition: form-data; name="address"\r\n\r\nunterminated']] as const) {
    assertProblem(t, await app.inject({ method: 'POST', url, payload, headers: { 'content-type': type, ...user.headers } }), 400, 'VALIDATION_FAILED', `malformed: ${payload.slice(0, 20)}`)
  }
  const rows = await app.db.selectFrom('emails').select('id').where('user_id', '=', user.id).execute()
  t.equal(rows.length, 1, 'only the sign-up address exists')
})

t.test('a password is never trimmed, in any encoding', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app)
  const spaced = '  spaced password  '
  const encodings: Array<[string, { payload: string | Buffer; headers: Record<string, string> }]> = [
    ['text/plain', { payload: spaced, headers: { 'content-type': 'text/plain' } }],
    ['a JSON string', { payload: JSON.stringify(spaced), headers: { 'content-type': 'application/json' } }],
    ['a file as the body', { payload: Buffer.from(spaced), headers: { 'content-type': 'application/octet-stream' } }],
    ['a multipart file part', multipart({ password: { filename: 'password.txt', content: spaced } })],
    ['a JSON object', { payload: JSON.stringify({ password: spaced }), headers: { 'content-type': 'application/json' } }]
  ]
  for (const [name, body] of encodings) {
    const res = await app.inject({ method: 'PUT', url: `/users/${user.id}/password`, payload: body.payload, headers: { ...body.headers, ...admin.headers } })
    t.equal(res.statusCode, 204, `set as ${name}`)
    const exact = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: spaced }, remoteAddress: '198.51.100.1' })
    t.equal(exact.statusCode, 201, `${name}: the password is the value with its spaces`)
    const trimmed = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: spaced.trim() }, remoteAddress: '198.51.100.2' })
    t.equal(trimmed.statusCode, 401, `${name}: not the trimmed value`)
  }
})
