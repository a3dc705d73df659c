import { createHash } from 'node:crypto'
import type { Expected } from '../common/versions.js'

/**
 * Strong ETag of a versioned resource. `ended` tags its representation once a ban's end has come and before the
 * background lift writes a new version: it shows lifted, so it is not the representation that showed it banned.
 */
export function versionTag(version: number, ended = false): string {
  return ended ? `"v${version}-ended"` : `"v${version}"`
}

/**
 * What an If-Match header asks for: undefined without the header, 'any' for `*`, else the versions it names.
 * Tags that are not ours name no version, so they can never match.
 */
export function ifMatchVersions(header: string | string[] | undefined): Expected {
  if (header === undefined) return undefined
  const value = Array.isArray(header) ? header.join(',') : header
  if (value.trim() === '*') return 'any'
  const versions: number[] = []
  for (const tag of value.split(',')) {
    // Either representation of a version names it: a write checks what it was read at.
    const m = /^\s*"v([1-9][0-9]{0,14})(?:-ended)?"\s*$/.exec(tag)
    if (m) versions.push(Number(m[1]))
  }
  return versions
}

/** Weak comparison of If-None-Match against a tag (RFC 9110 13.1.2). */
export function noneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false
  if (header.trim() === '*') return true
  const bare = etag.replace(/^W\//, '')
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === bare)
}

/** Strong ETag of content without a version: a digest of its bytes. */
export function digestTag(content: string | Buffer): string {
  return `"${createHash('sha1').update(content).digest('base64url')}"`
}

/** Strong ETag of a resource without a version, from its representation rather than the bytes it is sent as. */
export const contentTag = (representation: unknown): string => digestTag(JSON.stringify(representation))

/** Whether an If-Match header allows a write to the resource now tagged `tag` (strong comparison, RFC 9110 13.1.1). */
export function ifMatchAllows(header: string | undefined, tag: string): boolean {
  if (header === undefined || header.trim() === '*') return true
  return header.split(',').some((t) => t.trim() === tag)
}
