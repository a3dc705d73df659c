import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t, { type Test } from 'tap'
import { adminUser, build, newUser } from '../helpers.js'
import { Receiver, until } from '../webhooks/receiver.js'
import type { FlowResult } from '../sdk/flows/result.js'
import { PROJECT_DIR as root } from '../../src/common/project.js'

// Five TypeScript SDK generators that SDK teams use, each generating from a served document (one from its 3.0.3 form), compiled strictly
// with a flow written as an SDK user writes it, and the flow run against the service; then Redocly's and
// Spectral's recommended rule sets. The generators live in test/sdk, a package of their own (so that a newcomer's
// `npm install` stays lean), installed on first use.
const sdk = join(root, 'test/sdk')
const out = join(sdk, 'out')
const bin = (name: string) => join(sdk, 'node_modules/.bin', name)
const run = promisify(execFile)

/** Runs a command in test/sdk; its output when it fails (nothing is printed when it passes). */
async function inSdk(cmd: string, args: string[]): Promise<{ code: number; output: string }> {
  return run(cmd, args, { cwd: sdk, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } })
    .then(({ stdout, stderr }) => ({ code: 0, output: `${stdout}${stderr}` }),
      (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: typeof err.code === 'number' ? err.code : 1, output: `${err.stdout ?? ''}${err.stderr ?? ''}` }))
}

const GENERATORS: Record<string, [string, string[]]> = {
  'hey-api': [bin('openapi-ts'), ['-f', 'openapi-ts.config.mjs']],
  orval: [bin('orval'), ['--config', 'orval.config.cjs']],
  // The 3.0.3 document, for a generator of 3.0's era: what mobile teams' generators that do not read 3.1 yet get.
  codegen: [process.execPath, ['node_modules/openapi-typescript-codegen/bin/index.js', '--input', 'out/openapi-3.0.json', '--output', 'out/codegen', '--client', 'fetch']],
  sta: [bin('swagger-typescript-api'), ['generate', '--path', 'out/openapi.json', '--output', 'out/sta', '--name', 'api.ts']],
  'openapi-fetch': [process.execPath, [join(root, 'node_modules/openapi-typescript/bin/cli.js'), 'out/openapi.json', '-o', 'out/openapi-typescript/roster.ts']]
}

/** Every file of test/sdk but the installed tools and the generated output: configs, flows, the tools' lock. */
function sdkSources(dir = sdk): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return dir === sdk && (entry.name === 'node_modules' || entry.name === 'out') ? [] : sdkSources(path)
    return [path]
  }).sort()
}

/**
 * What generating, compiling and linting depend on: the document, the root lock file (TypeScript,
 * openapi-typescript) and test/sdk's own files. The SQLite and MySQL legs serve the same document, so the second leg
 * finds it checked already and only drives each engine's service with each client; any change checks anew.
 */
function inputsDigest(document: string, document30: string): string {
  const digest = createHash('sha256').update(document).update(document30)
  for (const file of [join(root, 'package-lock.json'), ...sdkSources()]) digest.update(file).update(readFileSync(file))
  return digest.digest('hex')
}
const STAMP = join(out, 'checked.sha256')
// Generating, compiling and linting take half a minute of both cores, and installing test/sdk first (a machine
// without it) a minute or more: beyond tap's two minutes a file on a slow host. `npm test` runs this file alone.
t.setTimeout(600_000)
const LOCK = join(sdk, '.generating')

/**
 * Runs fn with test/sdk/out to itself: the two legs run side by side, and one generating while the other clears the
 * output would break both. The second to come waits, then finds the first's stamp. A lock left by a killed run is
 * taken over after ten minutes.
 */
async function exclusively<T>(fn: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      mkdirSync(LOCK)
      break
    } catch {
      const age = existsSync(LOCK) ? Date.now() - statSync(LOCK).mtimeMs : 0
      if (age > 600_000) rmSync(LOCK, { recursive: true, force: true })
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
  }
  try {
    return await fn()
  } finally {
    rmSync(LOCK, { recursive: true, force: true })
  }
}

/** Generates every client from the document, compiles them with their flows, lints the document: whether all passed. */
async function generateAndCheck(t: Test, document: string, document30: string, digest: string): Promise<boolean> {
  rmSync(out, { recursive: true, force: true })
  mkdirSync(out, { recursive: true })
  writeFileSync(join(out, 'openapi.json'), document)
  writeFileSync(join(out, 'openapi-3.0.json'), document30)

  let passed = true
  for (const [name, [cmd, args]] of Object.entries(GENERATORS)) {
    const generated = await inSdk(cmd, args)
    passed = t.equal(generated.code, 0, `${name} generates:\n${generated.output.slice(-2000)}`) && passed
  }
  const tsc = await inSdk(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'])
  const compiled = t.equal(tsc.code, 0, `every client compiles with its flow under --strict:\n${tsc.output.slice(0, 4000)}`)

  const redocly = await inSdk(bin('redocly'), ['lint', 'out/openapi.json', '--extends', 'recommended', '--format', 'stylish'])
  passed = t.equal(redocly.code, 0, `Redocly (recommended): no error\n${redocly.output.slice(-3000)}`) && passed
  const spectral = await inSdk(bin('spectral'), ['lint', 'out/openapi.json', '--ruleset', '.spectral.yaml', '--fail-severity', 'error'])
  passed = t.equal(spectral.code, 0, `Spectral (spectral:oas): no error\n${spectral.output.slice(-3000)}`) && passed
  if (passed && compiled) writeFileSync(STAMP, digest)
  return compiled
}

t.test('every SDK generator generates, compiles strictly and drives the service; the linters find no error', async (t) => {
  if (!existsSync(join(sdk, 'node_modules/.package-lock.json'))) {
    const install = await inSdk('npm', ['ci', '--no-audit', '--no-fund'])
    t.equal(install.code, 0, `test/sdk installed (npm ci):\n${install.output.slice(-2000)}`)
    if (install.code !== 0) return
  }
  // Webhooks to the receiver in this process: http on this machine allowed.
  const app = await build(t, { env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, mail: { pollMs: 50 }, events: { pollMs: 50 } })
  const address = await app.listen({ port: 0, host: '127.0.0.1' })
  const document = (await app.inject('/openapi.json')).body
  const document30 = (await app.inject('/openapi-3.0.json')).body
  const checked = await exclusively(async () => {
    const digest = inputsDigest(document, document30)
    if (!existsSync(STAMP) || readFileSync(STAMP, 'utf8') !== digest) return generateAndCheck(t, document, document30, digest)
    t.pass('generated, compiled and linted from this same document with these same tools by an earlier run')
    return true
  })
  if (!checked) return

  for (const name of Object.keys(GENERATORS)) {
    const ran = await inSdk(process.execPath, ['--import', 'tsx', 'run-flow.ts', name, address])
    t.equal(ran.code, 0, `${name}: the flow runs:\n${ran.output.slice(-2000)}`)
    if (ran.code !== 0) continue
    const result = JSON.parse(ran.output) as FlowResult
    const stored = await app.db.selectFrom('users').select(['name']).where('id', '=', result.userId).executeTakeFirstOrThrow()
    t.equal(stored.name, `Renamed ${name}`, `${name}: the rename stored the name itself`)
    t.equal(result.name, `Renamed ${name}`, `${name}: and answered it`)
    t.same(result.listedIds, [result.userId], `${name}: listed without limit, filtered by name`)
    const addresses = await app.db.selectFrom('emails').select(['address']).where('user_id', '=', result.userId).orderBy('id').execute()
    t.same(addresses.map((a) => a.address), [`sdk.${name}@example.com`, `second.${name}@example.com`], `${name}: the address was added`)
    t.equal(result.primary, false, `${name}: a second address is not primary`)
    t.same([result.forbiddenStatus, result.forbiddenCode], [401, 'FORBIDDEN'], `${name}: a typed FORBIDDEN problem`)
  }

  // A real delivered event, written as a value of the generated type of its webhook's request body, compiles
  // strictly: the document's `webhooks` section types what receivers are actually sent.
  const receiver = await Receiver.start(t)
  const admin = await adminUser(app)
  const hook = await app.inject({ method: 'POST', url: '/webhooks', headers: admin.headers, payload: { url: receiver.url, events: ['user.created', 'session.ended'] } })
  t.equal(hook.statusCode, 201)
  const user = await newUser(app)
  await app.inject({ method: 'DELETE', url: '/auth/tokens/current', headers: user.headers })
  await until('the deliveries', () => receiver.received.length === 2)
  const typed = (type: string, body: string) =>
    `export const ${type.replace('.', '_')}: webhooks['${type}']['post']['requestBody']['content']['application/json'] = ${body}\n`
  const checkFile = join(out, 'delivered-events.ts')
  await exclusively(async () => {
    writeFileSync(checkFile, "import type { webhooks } from './openapi-typescript/roster.js'\n" +
      receiver.received.map((r) => typed(r.event.type, r.body)).join(''))
    const tsc = await inSdk(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '--noEmit', '--strict', '--skipLibCheck',
      '--target', 'ES2022', '--module', 'ESNext', '--moduleResolution', 'Bundler', checkFile])
    t.equal(tsc.code, 0, `delivered user.created and session.ended events are values of the generated webhook types:\n${tsc.output.slice(0, 3000)}`)
    rmSync(checkFile, { force: true })
  })
})
