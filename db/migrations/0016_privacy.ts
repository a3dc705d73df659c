import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// Privacy: a deletion may wait out a grace (`users.deletion_scheduled_at`, when it becomes final), and a deleted user
// is forgotten. Its events keep their skeleton and are marked `erased`; `erasures` lists the users whose events are
// still being erased in batches, so that every reader shows them erased from the moment of the deletion. Deliveries
// are found by their event's id to carry the erased form.

export async function up(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  const options = mysql ? sql`engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin` : sql``

  await sql`alter table users add column deletion_scheduled_at bigint null`.execute(db)
  await db.schema.createIndex('users_deletion_idx').on('users').column('deletion_scheduled_at').execute()
  await sql`alter table events add column erased integer not null default 0`.execute(db)
  await db.schema.createIndex('outbox_event_idx').on('outbox').column('event_id').execute()
  await sql`create table erasures (
    user_id bigint not null primary key,
    created_at bigint not null
  ) ${options}`.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  await db.schema.dropTable('erasures').execute()
  await sql.raw(mysql ? 'drop index outbox_event_idx on outbox' : 'drop index outbox_event_idx').execute(db)
  await sql.raw(mysql ? 'drop index users_deletion_idx on users' : 'drop index users_deletion_idx').execute(db)
  await sql`alter table events drop column erased`.execute(db)
  await sql`alter table users drop column deletion_scheduled_at`.execute(db)
}
