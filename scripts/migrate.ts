import { loadConfig } from '../src/config.js'
import { createDatabase } from '../src/database/index.js'

const config = loadConfig()
const { db, dialect, migrate } = createDatabase({ url: config.DATABASE_URL })
try {
  const applied = await migrate()
  console.log(applied.length ? `${dialect}: applied ${applied.join(', ')}` : `${dialect}: already up to date`)
} finally {
  await db.destroy()
}
