import { sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// The tally leaves out the users whose deletion is scheduled, as SCIM does: those already scheduled leave it here.

export async function up(db: Kysely<unknown>): Promise<void> {
  const scheduled = await sql<{ n: number | string }>`select count(*) as n from users where deletion_scheduled_at is not null`.execute(db)
  await sql`update user_tally set users = users - ${Number(scheduled.rows[0]?.n ?? 0)} where slot = 0`.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  const scheduled = await sql<{ n: number | string }>`select count(*) as n from users where deletion_scheduled_at is not null`.execute(db)
  await sql`update user_tally set users = users + ${Number(scheduled.rows[0]?.n ?? 0)} where slot = 0`.execute(db)
}
