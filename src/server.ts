import { buildApp } from './app.js'
import { ConfigError, loadConfig } from './config.js'

let config
try {
  config = loadConfig()
} catch (err) {
  if (!(err instanceof ConfigError)) throw err
  console.error(err.message)
  process.exit(1)
}

const app = await buildApp(config)

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
} catch (err) {
  app.log.error({ err }, 'could not start')
  process.exit(1)
}
