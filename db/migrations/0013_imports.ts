import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// Imports: the file of a POST /imports is split into lines as it arrives and staged in `import_lines`, then worked
// through in batches in the background by whichever instance holds the import's lease (`lease`, `lease_until`),
// each batch committed with the count of lines done, so a restart resumes after the last committed line and no line
// is applied twice. A line that fails is written to `import_errors`. An import becomes `pending` once its whole file
// is staged (`received`); one left unreceived by a crashed upload is dropped.
// `users.external_id`: the user's id in the system it came from, unique, so that an import finds it again.

export async function up(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  const id = mysql ? sql`bigint unsigned not null auto_increment primary key` : sql`integer primary key autoincrement not null`
  const ref = mysql ? sql`bigint unsigned` : sql`integer`
  const options = mysql ? sql`engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin` : sql``
  const text = mysql ? sql`mediumtext` : sql`text`

  await sql`alter table users add column external_id varchar(255) null`.execute(db)
  await db.schema.createIndex('users_external_id_uq').on('users').column('external_id').unique().execute()

  await sql`create table imports (
    id ${id},
    status varchar(16) not null,
    received integer not null default 0,
    format varchar(16) not null,
    dry_run integer not null,
    on_conflict varchar(16) not null,
    parameters ${text} null,
    created_by bigint null,
    request_id varchar(128) null,
    created_at bigint not null,
    started_at bigint null,
    finished_at bigint null,
    total_lines integer not null default 0,
    processed integer not null default 0,
    created integer not null default 0,
    updated integer not null default 0,
    skipped integer not null default 0,
    failed integer not null default 0,
    detail varchar(500) null,
    lease varchar(32) null,
    lease_until bigint null
  ) ${options}`.execute(db)
  await db.schema.createIndex('imports_status_idx').on('imports').columns(['status', 'id']).execute()

  await sql`create table import_lines (
    import_id ${ref} not null references imports (id) on delete cascade,
    line integer not null,
    body ${text} not null,
    primary key (import_id, line)
  ) ${options}`.execute(db)

  await sql`create table import_errors (
    id ${id},
    import_id ${ref} not null references imports (id) on delete cascade,
    line integer not null,
    code varchar(40) not null,
    detail varchar(500) not null,
    email varchar(254) null,
    external_id varchar(255) null
  ) ${options}`.execute(db)
  await db.schema.createIndex('import_errors_line_idx').on('import_errors').columns(['import_id', 'line', 'id']).execute()
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('import_errors').execute()
  await db.schema.dropTable('import_lines').execute()
  await db.schema.dropTable('imports').execute()
  await db.schema.dropIndex('users_external_id_uq').on('users').execute()
  await sql`alter table users drop column external_id`.execute(db)
}
