import { createHash } from 'node:crypto'
import type { Expected } from '../common/versions.js'

/**
 * Strong ETag of a versioned resource. `ended` tags its representation once a ban's end has come and before the
 * background lift writes a new version: it shows lifted, so it is not the representation that showed it banned.
 */
export function versionTag(version: number, ended = false): string {
  return ended ? `"v${version}-ended"` : `"v${version}"`
}

/** The tags an If-Match header names, each trimmed: undefined without the header, 'any' for `*`. */
export function ifMatchTags(header: string | string[] | undefined): 'any' | string[] | undefined {
  if (header === undefined) return undefined
  const value = Array.isArray(header) ? header.join(',') : header
  if (value.trim() === '*') return 'any'
  return value.split(',').map((tag) => tag.trim())
}

/**
 * What an If-Match header asks for: undefined without the header, 'any' for `*`, else the versions it names.
 * Tags that are not ours name no version, so they can never match.
 */
export function ifMatchVersions(header: string | string[] | undefined): Expected {
  const tags = ifMatchTags(header)
  if (!Array.isArray(tags)) return tags
  // Either representation of a version names it: a write checks what it was read at.
  return tags.flatMap((tag) => /^"v([1-9][0-9]{0,14})(?:-ended)?"$/.exec(tag)?.[1] ?? []).map(Number)
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
  const tags = ifMatchTags(header)
  return !Array.isArray(tags) || tags.includes(tag)
}
