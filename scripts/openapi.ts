// Writes the OpenAPI documents the service serves to openapi.json and openapi-3.0.json (or to the paths given), for
// review and SDK builds.
import { writeFileSync } from 'node:fs'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'

/** The documents as served at /openapi.json (3.1) and /openapi-3.0.json, as the committed files hold them. */
export async function renderDocuments(): Promise<{ v31: string; v30: string }> {
  const app = await buildApp(loadConfig({ DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'silent' }))
  try {
    await app.ready()
    const served = async (url: string) => JSON.stringify(JSON.parse((await app.inject(url)).body), null, 2) + '\n'
    return { v31: await served('/openapi.json'), v30: await served('/openapi-3.0.json') }
  } finally {
    await app.close()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [v31Path = 'openapi.json', v30Path = 'openapi-3.0.json'] = process.argv.slice(2)
  const { v31, v30 } = await renderDocuments()
  writeFileSync(v31Path, v31)
  writeFileSync(v30Path, v30)
  console.log(`wrote ${v31Path} and ${v30Path}`)
}
