import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// The user a kept idempotent answer presents, so that a deletion drops the answers about its user by an index (the
// answers themselves are sealed and cannot be searched). Answers kept before it are given the user their Location
// names (a sign-up's, an added address's); a login's, whose user is only in its sealed body, expire within a day.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table idempotency_keys add column user_id bigint null`.execute(db)
  await db.schema.createIndex('idempotency_keys_user_idx').on('idempotency_keys').column('user_id').execute()
  const kept = await sql<{ id: number; location: string }>`select id, location from idempotency_keys where location is not null`.execute(db)
  for (const { id, location } of kept.rows) {
    const user = /\/users\/(\d+)(?:\/|$)/.exec(location)?.[1]
    if (user) await sql`update idempotency_keys set user_id = ${Number(user)} where id = ${id}`.execute(db)
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  await sql.raw(mysql ? 'drop index idempotency_keys_user_idx on idempotency_keys' : 'drop index idempotency_keys_user_idx').execute(db)
  await sql`alter table idempotency_keys drop column user_id`.execute(db)
}
