import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// The active admins, read locked by every change that could leave none (a ban, a demotion, a deletion): without an
// index on the role that read scanned, and so waited on, every user row another transaction was writing.

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('users_role_idx').on('users').columns(['role', 'status']).execute()
}

export async function down(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  await sql.raw(mysql ? 'drop index users_role_idx on users' : 'drop index users_role_idx').execute(db)
}
