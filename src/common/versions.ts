import { VersionConflict } from './errors.js'

/** The versions a write is allowed to find (If-Match): undefined (no precondition), 'any' (`*`), or a list. */
export type Expected = 'any' | number[] | undefined

/** PRECONDITION_FAILED unless `version` is one the write allows. */
export function mustMatch(version: number, expected: Expected): void {
  if (Array.isArray(expected) && !expected.includes(version)) throw new VersionConflict()
}
