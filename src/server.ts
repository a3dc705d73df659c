import type { App } from './app.js'
import { StartupError } from './common/errors.js'
import { loadConfig } from './config.js'
import { installFatalPolicy } from './fatal.js'
import { startupMessage } from './startup.js'
import type { Config } from '../schemas/config.js'

/** Stops the start with one line: what is wrong and which setting to change; the stack only when nothing is known. */
function fail(err: unknown, config?: Config, phase: 'build' | 'listen' = 'build'): never {
  const known = err instanceof StartupError ? err.message : config ? startupMessage(err, config, phase) : undefined
  console.error(known ? `Roster could not start: ${known}` : err)
  process.exit(1)
}

/** The URL a person can open: the port listened on, and a host name for the any-address. */
function addressOf(app: App, config: Config): string {
  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : config.PORT
  const host = config.HOST === '0.0.0.0' || config.HOST === '::' ? 'localhost' : config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST
  return `http://${host}:${port}`
}

let config
try {
  config = loadConfig()
} catch (err) {
  fail(err)
}

let app: App
try {
  // The app's modules load once the settings check out: a wrong setting is told at once, not after their load.
  const { buildApp } = await import('./app.js')
  app = await buildApp(config)
} catch (err) {
  fail(err, config)
}

installFatalPolicy(process, { log: app.log, exit: (code) => process.exit(code) })

let closing = false
async function shutdown(signal: string) {
  if (closing) return
  closing = true
  app.log.info({ signal }, 'shutting down: finishing in-flight requests')
  const timer = setTimeout(() => {
    app.log.error('shutdown took too long; exiting')
    process.exit(1)
  }, 20_000)
  timer.unref()
  try {
    await app.close()
    process.exit(0)
  } catch (err) {
    app.log.error({ err }, 'error while shutting down')
    process.exit(1)
  }
}
process.on('SIGTERM', () => void shutdown('SIGTERM'))
process.on('SIGINT', () => void shutdown('SIGINT'))

try {
  await app.listen({ port: config.PORT, host: config.HOST })
  await app.listenMetrics()
} catch (err) {
  await app.close().catch(() => {})
  fail(err, config, 'listen')
}

// For a person at a terminal, one line to open; standard output stays JSON lines for the log's readers, and a
// service's standard error that is not a terminal (a container's, a supervisor's) gets nothing.
if (process.stderr.isTTY) process.stderr.write(`Roster ready on ${addressOf(app, config)} — API docs at /docs\n`)
