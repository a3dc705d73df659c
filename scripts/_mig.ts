import { createDatabase } from '../src/database/index.js'
import { createConnection } from 'mysql2/promise'
const c = await createConnection('mysql://root@127.0.0.1:3306'); await c.query('drop database if exists migt'); await c.query('create database migt'); await c.end()
const t0 = Date.now()
const o = createDatabase({ url: 'mysql://root@127.0.0.1:3306/migt', poolSize: 5, queueLimit: 100, timeoutMs: 5000 })
await o.migrate(); console.log('migrate ms', Date.now() - t0); await o.db.destroy()
