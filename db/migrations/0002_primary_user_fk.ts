import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// emails.primary_user_id names the user whose primary address the row is; 0001 gave it a unique index but no
// foreign key. It gets one here, cascading like user_id: a user's deletion removes its addresses either way.

export async function up(db: Kysely<unknown>): Promise<void> {
  if (db.getExecutor().adapter instanceof MysqlAdapter) {
    await sql`alter table emails add constraint emails_primary_user_fk
      foreign key (primary_user_id) references users (id) on delete cascade`.execute(db)
    return
  }
  // SQLite cannot add a constraint to a table: the table is rebuilt with it, as its documentation prescribes
  // (create the new table, copy, drop the old, rename, re-create the indexes). Nothing references emails.
  await sql`create table emails_new (
    id integer primary key autoincrement not null,
    user_id integer not null references users (id) on delete cascade,
    address varchar(254) not null,
    address_norm varchar(254) not null,
    primary_user_id integer references users (id) on delete cascade,
    version integer default 1 not null,
    created_at bigint not null,
    updated_at bigint not null
  )`.execute(db)
  await sql`insert into emails_new (id, user_id, address, address_norm, primary_user_id, version, created_at, updated_at)
    select id, user_id, address, address_norm, primary_user_id, version, created_at, updated_at from emails`.execute(db)
  await sql`drop table emails`.execute(db)
  await sql`alter table emails_new rename to emails`.execute(db)
  await db.schema.createIndex('emails_address_norm_uq').on('emails').column('address_norm').unique().execute()
  await db.schema.createIndex('emails_primary_user_uq').on('emails').column('primary_user_id').unique().execute()
  await db.schema.createIndex('emails_user_idx').on('emails').columns(['user_id', 'id']).execute()
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (db.getExecutor().adapter instanceof MysqlAdapter) {
    await sql`alter table emails drop foreign key emails_primary_user_fk`.execute(db)
  }
  // On SQLite the constraint stays: removing it would mean rebuilding the table again, for no gain.
}
