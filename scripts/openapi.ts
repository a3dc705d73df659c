// Writes the OpenAPI document the service serves to openapi.json (or the path given), for review and SDK builds.
import { writeFileSync } from 'node:fs'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'

export async function renderDocument(): Promise<string> {
  const app = await buildApp(loadConfig({ DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'silent' }))
  try {
    await app.ready()
    return JSON.stringify(app.swagger(), null, 2) + '\n'
  } finally {
    await app.close()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const target = process.argv[2] ?? 'openapi.json'
  writeFileSync(target, await renderDocument())
  console.log(`wrote ${target}`)
}
