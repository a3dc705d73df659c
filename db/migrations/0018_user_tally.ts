import { sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// How many users there are, kept by the writes that make and delete them, so that SCIM's totalResults of an
// unfiltered list is read from a few rows rather than counted from the users table on every page. The count is spread
// over slots (a user's id picks one) so that concurrent sign-ups do not queue on one row's lock; the total is the sum.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table user_tally (slot integer not null primary key, users bigint not null)`.execute(db)
  const counted = await sql<{ n: number | string }>`select count(*) as n from users`.execute(db)
  for (let slot = 0; slot < 16; slot++) {
    await sql`insert into user_tally (slot, users) values (${slot}, ${slot === 0 ? Number(counted.rows[0]?.n ?? 0) : 0})`.execute(db)
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('user_tally').execute()
}
