import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// Sessions: a login starts one; its access tokens (rows of `tokens`, now with a session) and its refresh tokens
// belong to it, and end with it. Spent refresh tokens are kept (used_at set) until their session ends, so that a
// replay is recognised.

export async function up(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  const id = mysql ? sql`bigint unsigned not null auto_increment primary key` : sql`integer primary key autoincrement not null`
  const ref = mysql ? sql`bigint unsigned` : sql`integer`
  const options = mysql ? sql`engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin` : sql``

  await sql`create table sessions (
    id ${id},
    user_id ${ref} not null references users (id) on delete cascade,
    created_at bigint not null,
    last_used_at bigint not null,
    expires_at bigint not null,
    ends_at bigint not null,
    client varchar(200) not null
  ) ${options}`.execute(db)
  await db.schema.createIndex('sessions_user_idx').on('sessions').columns(['user_id', 'id']).execute()

  await sql`create table refresh_tokens (
    id ${id},
    token_hash char(64) not null,
    session_id ${ref} not null references sessions (id) on delete cascade,
    created_at bigint not null,
    expires_at bigint not null,
    used_at bigint
  ) ${options}`.execute(db)
  await db.schema.createIndex('refresh_tokens_hash_uq').on('refresh_tokens').column('token_hash').unique().execute()
  await db.schema.createIndex('refresh_tokens_session_idx').on('refresh_tokens').column('session_id').execute()

  if (mysql) {
    await sql`alter table tokens add column session_id bigint unsigned null,
      add constraint tokens_session_fk foreign key (session_id) references sessions (id) on delete cascade`.execute(db)
  } else {
    await sql`alter table tokens add column session_id integer references sessions (id) on delete cascade`.execute(db)
  }
  await db.schema.createIndex('tokens_session_idx').on('tokens').column('session_id').execute()
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (db.getExecutor().adapter instanceof MysqlAdapter) {
    await sql`alter table tokens drop foreign key tokens_session_fk`.execute(db)
  }
  await db.schema.dropIndex('tokens_session_idx').on('tokens').execute()
  await sql`alter table tokens drop column session_id`.execute(db)
  await db.schema.dropTable('refresh_tokens').execute()
  await db.schema.dropTable('sessions').execute()
}
