import { MysqlAdapter, type Kysely } from 'kysely'
import type { Database } from '../../db/types.js'

export type Db = Kysely<Database>

/** MySQL/MariaDB take row locks with FOR UPDATE; SQLite serialises writers by itself and has no such clause. */
export function locksRows(db: Db): boolean {
  return db.getExecutor().adapter instanceof MysqlAdapter
}

/** Escapes LIKE's wildcards (and the escape character itself) with `!`; pair with `escape '!'`. */
export function likeEscape(text: string): string {
  return text.replace(/[!%_]/g, (c) => '!' + c)
}

/** Upper bound for a prefix range over a binary-collated column: every string starting with the prefix sorts below it. */
export function prefixUpperBound(prefix: string): string {
  return prefix + '\u{10FFFF}'
}
