import type { Import, ImportLineError } from '../../schemas/import.js'
import { isoTimestamp as iso } from '../common/timestamps.js'
import type { ImportErrorRow, ImportRow } from './repository.js'

export const importPath = (id: number) => `/imports/${id}`

export function presentImport(row: ImportRow, base: string): Import {
  return {
    id: row.id,
    href: base + importPath(row.id),
    status: row.status,
    format: row.format,
    dry_run: row.dry_run === 1,
    on_conflict: row.on_conflict,
    created_at: iso(row.created_at),
    started_at: row.started_at === null ? null : iso(row.started_at),
    finished_at: row.finished_at === null ? null : iso(row.finished_at),
    lines: row.total_lines,
    processed: row.processed,
    created: row.created,
    updated: row.updated,
    skipped: row.skipped,
    failed: row.failed,
    detail: row.detail,
    errors: `${base}${importPath(row.id)}/errors`
  }
}

export function presentLineError(row: ImportErrorRow): ImportLineError {
  return { line: row.line, code: row.code, detail: row.detail, email: row.email, external_id: row.external_id }
}
