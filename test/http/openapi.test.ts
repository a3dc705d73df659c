import { execFile } from 'node:child_process'
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { Validator } from '@seriousme/openapi-schema-validator'
import openapiTS, { astToString } from 'openapi-typescript'
import t from 'tap'
import { assertProblem, build, ENGINE } from '../helpers.js'
import { PROJECT_DIR as root } from '../../src/common/project.js'

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const
type Obj = Record<string, any>

function operations(doc: Obj): Array<{ method: string; path: string; op: Obj }> {
  const out = []
  for (const [path, item] of Object.entries<Obj>(doc.paths)) {
    for (const method of METHODS) if (item[method]) out.push({ method, path, op: item[method] })
  }
  return out
}

/** The document with its shared parameters and responses written out where they are referenced. */
function inlineShared(doc: Obj): Obj {
  const copy = JSON.parse(JSON.stringify(doc)) as Obj
  const follow = (x: Obj): Obj => {
    const m = /^#\/components\/(parameters|responses)\/(\w+)$/.exec(x?.$ref ?? '')
    return m ? copy.components[m[1]!][m[2]!] : x
  }
  for (const { op } of operations(copy)) {
    op.parameters = (op.parameters ?? []).map(follow)
    for (const status of Object.keys(op.responses)) op.responses[status] = follow(op.responses[status])
  }
  return copy
}

t.test('the served document', async (t) => {
  const app = await build(t)
  const res = await app.inject('/openapi.json')
  t.equal(res.statusCode, 200)
  const served = res.json()
  const doc = inlineShared(served)

  t.test('shares what recurs: components/parameters and components/responses', async (t) => {
    t.ok(served.components.parameters.UserId, 'user_id')
    t.ok(served.components.parameters.IfMatch, 'If-Match')
    t.ok(served.components.responses.RateLimited, '429')
    t.ok(served.components.responses.Internal, '500')
    t.same(served.paths['/users/{user_id}'].get.parameters[0], { $ref: '#/components/parameters/UserId' })
    t.same(served.paths['/users/{user_id}'].get.responses['429'], { $ref: '#/components/responses/RateLimited' })
  })

  t.test('validates against the OpenAPI specification', async (t) => {
    const validator = new Validator()
    const result = await validator.validate(served)
    t.ok(result.valid, JSON.stringify(result.errors ?? []).slice(0, 2000))
    t.equal(validator.version, '3.1')
  })

  t.test('matches the committed openapi.json (regenerate with npm run openapi)', async (t) => {
    const committed = JSON.parse(readFileSync(join(root, 'openapi.json'), 'utf8'))
    t.same(served, committed)
  })

  t.test('as OpenAPI 3.0.3 too: valid 3.0, the same operations and components, committed beside it', async (t) => {
    const res30 = await app.inject('/openapi-3.0.json')
    t.equal(res30.statusCode, 200)
    const v30 = res30.json()
    const validator = new Validator()
    const result = await validator.validate(v30)
    t.ok(result.valid, JSON.stringify(result.errors ?? []).slice(0, 2000))
    t.equal(validator.version, '3.0', 'validated as 3.0')
    t.equal(v30.openapi, '3.0.3')
    const ids = (d: Obj) => Object.values<Obj>(d.paths).flatMap((item) => METHODS.flatMap((m) => (item[m] ? [item[m].operationId] : []))).sort()
    t.same(ids(v30), ids(served), 'every operation, by its operationId')
    t.same(Object.keys(v30.components.schemas).sort(), Object.keys(served.components.schemas).sort(), 'every component')
    t.notMatch(res30.body, /"examples":\s*\[/, 'no schema keeps a list of examples (3.1 only)')
    t.same(v30, JSON.parse(readFileSync(join(root, 'openapi-3.0.json'), 'utf8')), 'matches the committed openapi-3.0.json (npm run openapi)')
  })

  t.test('documents exactly the routes the app serves', async (t) => {
    // POST /users/{user_id}/email does what PUT does: documented once, under PUT, so that SDKs get one method. The
    // console's page and its own sign-in are not the API's.
    const served = app.routePlans
      .filter((r) => r.method !== 'HEAD' && !r.url.startsWith('/docs') && !r.url.startsWith('/console') && r.url !== '/openapi.json' && r.url !== '/openapi-3.0.json')
      .filter((r) => !(r.method === 'POST' && r.url === '/users/:user_id/email'))
      .map((r) => `${r.method} ${r.url.replace(/:(\w+)/g, '{$1}')}`)
      .sort()
    const documented = operations(doc).map(({ method, path }) => `${method.toUpperCase()} ${path}`).sort()
    t.same(documented, served)
  })

  t.test('every operation is SDK-grade', async (t) => {
    const ids = new Set<string>()
    for (const { method, path, op } of operations(doc)) {
      const name = `${method.toUpperCase()} ${path}`
      t.match(op.operationId, /^[a-z][A-Za-z]+$/, `${name}: operationId`)
      t.notOk(ids.has(op.operationId), `${name}: operationId is unique`)
      ids.add(op.operationId)
      t.ok(op.tags?.length, `${name}: tagged`)
      t.ok(op.summary, `${name}: summary`)
      for (const [status, response] of Object.entries<Obj>(op.responses)) {
        if (Number(status) >= 400 && path.startsWith('/scim/v2/')) {
          // SCIM's clients read SCIM's errors (RFC 7644 §3.12), not problems.
          t.same(response.content, { 'application/scim+json': { schema: { $ref: '#/components/schemas/ScimError' } } }, `${name} ${status}: SCIM's error`)
        } else if (Number(status) >= 400) {
          t.same(Object.keys(response.content), ['application/problem+json'], `${name} ${status}: problem+json`)
          const problem = response.content['application/problem+json']
          t.same(problem.schema, { $ref: '#/components/schemas/Problem' }, `${name} ${status}: Problem`)
          t.equal(problem.example?.status, Number(status), `${name} ${status}: an example of that status`)
        }
      }
      t.ok(op.responses['503'], `${name}: 503 documented`)
      t.ok(op.responses['500'], `${name}: 500 documented`)
      for (const status of ['404', '409']) {
        if (op.responses[status]) t.match(op.responses[status].description, /\([A-Z_]+(, [A-Z_]+)*\)$/, `${name} ${status}: names its codes`)
      }
      t.ok(op.description && !/^Authorization: `[a-z-]+`\.$/.test(op.description), `${name}: described beyond its authorization rule`)
      for (const p of op.parameters ?? []) {
        t.ok(p.description ?? p.schema?.description, `${name}: parameter ${p.name} described`)
        const example = p.example !== undefined || p.examples || p.schema?.examples || p.schema?.example !== undefined
        // A page's "try it" fills its fields with examples: no parameter has one (openapi-document.ts).
        t.notOk(example, `${name}: parameter ${p.name} has no example to pre-fill`)
      }
      for (const p of op.parameters ?? []) {
        if (p.in === 'header') t.match(p.name, /^[A-Z][a-z]*(-[A-Z][a-z]*)*$/, `${name}: header ${p.name} written as HTTP writes it`)
        if (p.in === 'query' && p.name === 'limit') t.notOk(p.required, `${name}: limit has a default, so it is optional`)
        if (p.in === 'path' && p.name.endsWith('_id')) t.equal(p.schema.format, 'int64', `${name}: ${p.name} is int64`)
      }
      if (/Collection$/.test(op.responses['200']?.content?.['application/json']?.schema?.$ref ?? '')) {
        const cursorParam = (op.parameters ?? []).some((p: { name: string }) => p.name === 'after') ? 'after' : 'cursor'
        t.match(op['x-pagination'], { cursorParam, limitParam: 'limit', nextField: 'next', itemsField: 'items' }, `${name}: machine-readable paging`)
      }
      if (path.includes('{user_id}')) {
        t.ok(op.parameters.some((p: Obj) => p.in === 'path' && p.name === 'user_id' && p.schema.type === 'integer'), `${name}: user_id`)
      }
      const security = op.security
      const anonymous = ['/users', '/auth/tokens', '/auth/email-verifications', '/auth/password-resets', '/auth/password-resets/confirm', '/auth/email-codes', '/auth/email-reverts']
      if (path.startsWith('/health') || (method === 'post' && anonymous.includes(path))) {
        t.same(security, [], `${name}: public`)
      } else {
        t.equal(security, undefined, `${name}: bearer by default`)
      }
    }
    t.same(doc.security, [{ bearer: [] }])
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
    t.equal(doc.info.version, pkg.version, 'the version is the service\'s')
    t.ok(doc.info.license?.name, 'a licence')
    t.notOk(doc.info.contact, 'no contact without PUBLIC_URL: the page is wherever it was read')
    t.match(doc.info.description, /## Versioning/, 'the versioning policy')
    // Without PUBLIC_URL the server is the one the document was read from, so that /docs works on localhost and on
    // 127.0.0.1 alike; with it, the public address (below).
    t.same(doc.servers.map((s: Obj) => s.url), ['/'], 'a relative server')
    for (const [name, schema] of Object.entries<Obj>(doc.components.schemas)) t.ok(schema.description, `component ${name} described`)
    for (const name of ['User', 'Email', 'UserCollection', 'EmailCollection', 'Session', 'SessionCollection', 'Token']) {
      t.not(doc.components.schemas[name].additionalProperties, false, `${name}: open to fields added later`)
      t.ok(doc.components.schemas[name].examples?.length, `${name}: an example`)
    }
    t.equal(doc.components.schemas.NewUser.additionalProperties, false, 'request bodies stay closed')
    t.notOk(doc.components.schemas.NewUser.examples[0].role, 'the sign-up example sends no admin-only field')
    t.same(doc.components.schemas.FieldError.properties.in, { $ref: '#/components/schemas/FieldLocation' }, 'a named enum, not an inline one')
    const token = doc.paths['/auth/tokens'].post.responses['201']
    t.notOk(token.headers?.ETag, 'a token answer has no ETag')
    t.notOk(token.headers?.Location, 'nor a Location')
    t.equal(doc.components.securitySchemes.bearer.scheme, 'bearer')
  })

  t.test('every answer declares X-Request-Id; a retry-safe operation\'s successes declare Idempotent-Replayed', async (t) => {
    for (const { method, path, op } of operations(doc)) {
      const idempotent = (op.parameters ?? []).some((p: Obj) => p.in === 'header' && p.name === 'Idempotency-Key')
      for (const [status, response] of Object.entries<Obj>(op.responses)) {
        const where = `${method.toUpperCase()} ${path} ${status}`
        t.same(response.headers?.['X-Request-Id'], { $ref: '#/components/headers/RequestId' }, `${where}: X-Request-Id`)
        const success = /^2/.test(status)
        t.equal(Boolean(response.headers?.['Idempotent-Replayed']), idempotent && success, `${where}: Idempotent-Replayed ${idempotent && success ? 'declared' : 'not declared'}`)
      }
    }
    t.ok(operations(doc).some(({ op }) => (op.parameters ?? []).some((p: Obj) => p.name === 'Idempotency-Key')), 'some operation takes an Idempotency-Key')
    // What the document declares, an answer carries, in the form it gives.
    const pattern = new RegExp(served.components.headers.RequestId.schema.pattern)
    for (const url of ['/health/live', '/users/1', '/nope']) {
      const res = await app.inject({ url, headers: { 'x-request-id': 'sdk-trace:7' } })
      t.equal(res.headers['x-request-id'], 'sdk-trace:7', `${url}: the id sent`)
      const own = await app.inject(url)
      t.match(String(own.headers['x-request-id']), pattern, `${url}: the service's own id has the declared form`)
    }
  })

  t.test('named components, enums, headers and content types', async (t) => {
    const schemas = doc.components.schemas
    for (const name of ['User', 'Email', 'UserCollection', 'EmailCollection', 'Problem', 'Token', 'TokenRequest', 'Session', 'SessionCollection', 'NewUser', 'NewEmail']) {
      t.ok(schemas[name], `component ${name}`)
    }
    t.same(schemas.UserStatus.enum, ['ACTIVE', 'BANNED'])
    t.same(schemas.UserRole.enum, ['user', 'admin'])
    t.ok(schemas.ErrorCode.enum.includes('EMAIL_TAKEN'))
    t.same(schemas.User.properties.status, { $ref: '#/components/schemas/UserStatus' })
    t.equal(doc.paths['/users'].get.responses['200'].content['application/json'].schema.$ref, '#/components/schemas/UserCollection')
    t.ok(doc.paths['/users'].get.responses['200'].headers.Link, 'Link on collections')
    t.ok(doc.paths['/users'].post.responses['201'].headers.Location, 'Location on creation')
    t.ok(doc.paths['/users/{user_id}'].get.responses['200'].headers.ETag, 'ETag')
    t.ok(doc.paths['/users/{user_id}'].get.responses['304'], '304')
    t.ok(doc.paths['/auth/tokens'].post.responses['429'].headers['Retry-After'], 'Retry-After')
    // A key path: one named body schema in the three form encodings; the bare value is described, not listed.
    const keyPath = doc.paths['/users/{user_id}/email'].put
    t.same(Object.keys(keyPath.requestBody.content), ['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data'])
    for (const media of Object.values<Obj>(keyPath.requestBody.content)) t.same(media.schema, { $ref: '#/components/schemas/PrimaryEmailValue' })
    t.match(keyPath.description, /POST to the same path does the same/)
    t.match(keyPath.description, /text\/plain/)
    t.same(doc.paths['/users/{user_id}/name'].put.requestBody.content['application/json'].schema, { $ref: '#/components/schemas/NameValue' })
    t.same(Object.keys(doc.paths['/users'].post.requestBody.content), ['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data'])
    t.equal(doc.paths['/users/email/{email}'].get.parameters[0].name, 'email')
    t.ok(doc.paths['/users/{user_id}/emails/{email_id}'].get.parameters.some((p: Obj) => p.name === 'email_id'))
  })

  const docs = await app.inject('/docs')
  t.ok([200, 302].includes(docs.statusCode), '/docs answers')
  const page = await app.inject(docs.statusCode === 302 ? String(docs.headers.location).replace(/^\.\//, '/docs/') : '/docs')
  t.equal(page.statusCode, 200)
  t.match(page.body, /swagger-ui/i, '/docs serves the browsable page')
  t.match(page.body, /<title>Roster [\d.]+: API documentation<\/title>/, 'titled with the product\'s name')
  t.match(page.body, /<link rel="icon" type="image\/svg\+xml" href="\/docs\/static\/theme\/roster\.svg"/, 'and its icon')
  const icon = await app.inject('/docs/static/theme/roster.svg')
  t.equal(icon.statusCode, 200)
  t.match(icon.body, /^<svg /, 'the icon is served')
  const initializer = (await app.inject('/docs/static/swagger-initializer.js')).body
  const logo = /img\.src = 'data:image\/svg\+xml;base64,([^']+)'/.exec(initializer)?.[1] ?? ''
  t.match(Buffer.from(logo, 'base64').toString('utf8'), /aria-label="Roster"/, 'the framework\'s logo is replaced by the product\'s')
  // The page's own plugin (folded error responses and headers): its script is served, and the configuration, written
  // out as script, calls it by the name the script gives it, with nothing of the server's module around it.
  t.match(page.body, /<script src="\/docs\/static\/theme\/roster-docs\.js"/, 'the page loads its plugin')
  const script = await app.inject('/docs/static/theme/roster-docs.js')
  t.equal(script.statusCode, 200)
  t.match(script.body, 'window.rosterDocs = rosterDocs', 'which names itself on the page')
  const plugins = /"plugins":\[(.*?)\]\s*\}/s.exec(initializer)?.[1] ?? ''
  t.match(plugins, /\.rosterDocs\(system\)/, 'the configuration calls it')
  t.match(plugins, /\.DownloadUrl\(system\)/, 'beside the bundle\'s own download plugin')
  t.notMatch(plugins, /__name|require\(|import\b/, 'each plugin stands alone in the page')
})

interface FlowResult {
  created: { id: number; name: string }
  me: { id: number }
  listed: { items: Array<{ id: number }> }
  added: { address: string; primary: boolean }
  error: { status: number }
  errorStatus: number
  errorCode: string
}

t.test('a client generated from the document drives the live service, strictly typed', async (t) => {
  const app = await build(t)
  const doc = (await app.inject('/openapi.json')).json()
  // Generated and compiled in a folder of this engine's own: both legs run this test at the same time.
  const dir = join(root, 'test/client/out', ENGINE)
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(join(dir, 'generated'), { recursive: true })
  for (const file of ['flow.ts', 'tsconfig.json']) copyFileSync(join(root, 'test/client', file), join(dir, file))
  writeFileSync(join(dir, 'generated/roster.ts'), astToString(await openapiTS(doc)))

  // Compiled in a child process without blocking this one: the app under test keeps its event loop.
  const tsc = await promisify(execFile)(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(dir, 'tsconfig.json')])
    .then(() => ({ code: 0, output: '' }), (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? 1, output: `${err.stdout ?? ''}${err.stderr ?? ''}` }))
  t.equal(tsc.code, 0, `the client compiles strictly:\n${tsc.output}`)

  const address = await app.listen({ port: 0, host: '127.0.0.1' })
  // What its own strict tsconfig compiled above, into that folder's out/: not part of the suite's build.
  const { flow } = await import(pathToFileURL(join(dir, 'out', 'flow.js')).href) as { flow: (baseUrl: string) => Promise<FlowResult> }
  const result = await flow(address)
  t.equal(result.created.name, 'Sdk User')
  t.equal(result.me.id, result.created.id)
  t.same(result.listed.items.map((u) => u.id), [result.created.id])
  t.equal(result.added.address, 'sdk.second@example.com')
  t.equal(result.added.primary, false)
  t.equal(result.errorStatus, 401)
  t.equal(result.errorCode, 'FORBIDDEN')
  t.equal(result.error.status, 401)
  assertProblem(t, await app.inject('/users/1'), 401, 'UNAUTHENTICATED')
})

t.test('with PUBLIC_URL the document names the public address, and its docs page as the contact', async (t) => {
  const app = await build(t, { env: { PUBLIC_URL: 'https://api.example.com' } })
  const doc = (await app.inject('/openapi.json')).json<{ servers: Array<{ url: string }>; info: { contact?: { url?: string } } }>()
  t.same(doc.servers.map((s) => s.url), ['https://api.example.com'])
  t.equal(doc.info.contact?.url, 'https://api.example.com/docs')
})
