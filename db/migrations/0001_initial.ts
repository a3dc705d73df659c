import { MysqlAdapter, sql, type ColumnDefinitionBuilder, type Kysely, type CreateTableBuilder } from 'kysely'

// Frozen once landed: later changes go into new migrations.

type Dialect = 'mysql' | 'sqlite'

function dialectOf(db: Kysely<unknown>): Dialect {
  return db.getExecutor().adapter instanceof MysqlAdapter ? 'mysql' : 'sqlite'
}

function idColumn(dialect: Dialect) {
  return dialect === 'mysql'
    ? (c: ColumnDefinitionBuilder) => c.primaryKey().autoIncrement().modifyFront(sql`unsigned`)
    : (c: ColumnDefinitionBuilder) => c.primaryKey().autoIncrement()
}

function refType(dialect: Dialect) {
  return dialect === 'mysql' ? sql`bigint unsigned` : sql`integer`
}

/** Binary collation on MySQL/MariaDB: comparisons are exact, case folding is done by the application. */
function tableOptions<T extends string, C extends string>(dialect: Dialect, t: CreateTableBuilder<T, C>) {
  return dialect === 'mysql'
    ? t.modifyEnd(sql`engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin`)
    : t
}

export async function up(db: Kysely<unknown>): Promise<void> {
  const dialect = dialectOf(db)
  const id = dialect === 'mysql' ? sql`bigint` : sql`integer`

  await tableOptions(dialect, db.schema.createTable('users')
    .addColumn('id', id, idColumn(dialect))
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    .addColumn('name_search', 'varchar(200)', (c) => c.notNull())
    .addColumn('password_hash', 'varchar(255)', (c) => c.notNull())
    .addColumn('status', 'varchar(16)', (c) => c.notNull().defaultTo('ACTIVE'))
    .addColumn('role', 'varchar(16)', (c) => c.notNull().defaultTo('user'))
    .addColumn('version', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())).execute()
  await db.schema.createIndex('users_name_search_idx').on('users').columns(['name_search', 'id']).execute()
  await db.schema.createIndex('users_status_idx').on('users').columns(['status', 'id']).execute()

  await tableOptions(dialect, db.schema.createTable('emails')
    .addColumn('id', id, idColumn(dialect))
    .addColumn('user_id', refType(dialect), (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('address', 'varchar(254)', (c) => c.notNull())
    .addColumn('address_norm', 'varchar(254)', (c) => c.notNull())
    .addColumn('primary_user_id', refType(dialect))
    .addColumn('version', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())).execute()
  await db.schema.createIndex('emails_address_norm_uq').on('emails').column('address_norm').unique().execute()
  await db.schema.createIndex('emails_primary_user_uq').on('emails').column('primary_user_id').unique().execute()
  await db.schema.createIndex('emails_user_idx').on('emails').columns(['user_id', 'id']).execute()

  await tableOptions(dialect, db.schema.createTable('tokens')
    .addColumn('id', id, idColumn(dialect))
    .addColumn('token_hash', 'char(64)', (c) => c.notNull())
    .addColumn('user_id', refType(dialect), (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())).execute()
  await db.schema.createIndex('tokens_hash_uq').on('tokens').column('token_hash').unique().execute()
  await db.schema.createIndex('tokens_user_idx').on('tokens').column('user_id').execute()

  await tableOptions(dialect, db.schema.createTable('app_secrets')
    .addColumn('name', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('value', 'varchar(255)', (c) => c.notNull())).execute()
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['tokens', 'emails', 'app_secrets', 'users']) {
    await db.schema.dropTable(table).ifExists().execute()
  }
}
