import { loadConfig } from '../src/config.js'
import { createDatabase, migrateToLatest } from '../src/database/index.js'

const config = loadConfig()
const { db, dialect } = createDatabase({ url: config.DATABASE_URL })
try {
  const applied = await migrateToLatest(db)
  console.log(applied.length ? `${dialect}: applied ${applied.join(', ')}` : `${dialect}: already up to date`)
} finally {
  await db.destroy()
}
