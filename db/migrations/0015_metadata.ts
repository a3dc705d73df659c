import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// Metadata: what an app keeps about a user beside its name, in three parts (public, private, unsafe), each a JSON
// object kept as compact JSON text. A row of its own per user, so that the User and the caller read stay as they
// are; no row means three empty parts at version 1.

export async function up(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  const ref = mysql ? sql`bigint unsigned` : sql`integer`
  const options = mysql ? sql`engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin` : sql``
  const text = mysql ? sql`mediumtext` : sql`text`

  await sql`create table user_metadata (
    user_id ${ref} not null primary key references users (id) on delete cascade,
    public ${text} not null,
    private ${text} not null,
    unsafe ${text} not null,
    version integer not null,
    updated_at bigint not null
  ) ${options}`.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('user_metadata').execute()
}
