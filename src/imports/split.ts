/*
 * An import's file cut into its records as the bytes arrive: the lines of NDJSON, or the elements of one JSON array
 * (Auth0's file is an array, Firebase's an object whose `users` is one). Hand-written rather than a streaming JSON
 * parser because each record is needed as its own text, bounded in size before it is held: a record past the bound is
 * skipped byte by byte and reported, so neither a 10 MB line nor a file of a million users grows the heap.
 */

/** A record of the file: its text, or why it cannot be one. Lines count from 1. */
export type Piece = { line: number; text: string } | { line: number; problem: 'LINE_TOO_LONG' | 'INVALID_UTF8'; detail: string }

/** The file as a whole is not of the format named: nothing of it is kept. */
export class UnreadableFile extends Error {}

/** Where the records stand: the lines of NDJSON, the root array, or the array under the root object's `users`. */
export type Layout = 'ndjson' | 'array' | 'users-array'

const utf8 = new TextDecoder('utf-8', { fatal: true })
const NL = 0x0a
const isSpace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09

/** One record being collected: its bytes, unless it grew past the bound. */
class Collector {
  private parts: Buffer[] = []
  private size = 0
  tooLong = false
  constructor(private readonly maxBytes: number) {}

  add(chunk: Buffer): void {
    if (this.tooLong || chunk.length === 0) return
    this.size += chunk.length
    if (this.size > this.maxBytes) {
      this.tooLong = true
      this.parts = []
    } else {
      this.parts.push(chunk)
    }
  }

  get empty(): boolean {
    return this.size === 0
  }

  take(line: number): Piece {
    const tooLong = this.tooLong
    const bytes = Buffer.concat(this.parts)
    this.parts = []
    this.size = 0
    this.tooLong = false
    if (tooLong) return { line, problem: 'LINE_TOO_LONG', detail: `The record is longer than ${this.maxBytes} bytes` }
    try {
      return { line, text: utf8.decode(bytes) }
    } catch {
      return { line, problem: 'INVALID_UTF8', detail: 'The record is not valid UTF-8' }
    }
  }
}

/** The lines of NDJSON; blank lines are counted but yield nothing. The first record must be a JSON object. */
async function * ndjson(chunks: AsyncIterable<Buffer>, maxBytes: number): AsyncGenerator<Piece> {
  const record = new Collector(maxBytes)
  let line = 0
  let seenRecord = false
  const finish = (): Piece | undefined => {
    line++
    const piece = record.take(line)
    if ('text' in piece) {
      const text = piece.text.replace(/^\uFEFF/, '').trim()
      if (text === '') return undefined
      if (!seenRecord && !text.startsWith('{')) throw new UnreadableFile('The file is not NDJSON: its first line is not a JSON object (is it another format?)')
      seenRecord = true
      return { line, text }
    }
    seenRecord = true
    return piece
  }
  for await (const chunk of chunks) {
    let start = 0
    for (let at = chunk.indexOf(NL); at >= 0; at = chunk.indexOf(NL, start)) {
      record.add(chunk.subarray(start, at))
      start = at + 1
      const piece = finish()
      if (piece) yield piece
    }
    record.add(chunk.subarray(start))
  }
  if (!record.empty || record.tooLong) {
    const piece = finish()
    // A last line without its newline that is not JSON is where the file was cut: nothing of it is applied.
    if (piece && 'text' in piece && !isJson(piece.text)) throw new UnreadableFile(`The file ends inside its line ${piece.line}: is it truncated?`)
    if (piece) yield piece
  }
  if (!seenRecord) throw new UnreadableFile('The file holds no user')
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

/**
 * The elements of a JSON array: the root itself, or the value of the root object's `users`. Only the nesting and
 * the strings are followed here; each element is parsed on its own later, and a broken one fails only itself.
 */
async function * jsonArray(chunks: AsyncIterable<Buffer>, maxBytes: number, underUsers: boolean): AsyncGenerator<Piece> {
  const record = new Collector(maxBytes)
  const targetDepth = underUsers ? 2 : 1
  let depth = 0
  let inString = false
  let escaped = false
  let started = false
  let inTarget = false
  let targetDone = false
  let collecting = false
  let line = 0
  // The last key read at the root object's depth, and whether a ':' followed it (for `users`).
  let key = ''
  let keyBytes: number[] = []
  let readingKey = false
  let afterUsersColon = false

  for await (const chunk of chunks) {
    let from = -1
    const pieces: Piece[] = []
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i]!
      if (collecting && from < 0) from = i
      if (inString) {
        if (readingKey && !escaped && b !== 0x22 && keyBytes.length < 64) keyBytes.push(b)
        if (escaped) escaped = false
        else if (b === 0x5c) escaped = true
        else if (b === 0x22) {
          inString = false
          if (readingKey) {
            key = Buffer.from(keyBytes).toString('utf8')
            readingKey = false
          }
          if (collecting && depth === targetDepth) {
            record.add(chunk.subarray(from, i + 1))
            from = -1
            collecting = false
            pieces.push(record.take(++line))
          }
        }
        continue
      }
      if (!started) {
        if (isSpace(b) || (i <= 2 && (b === 0xef || b === 0xbb || b === 0xbf))) continue
        if (underUsers ? b !== 0x7b : b !== 0x5b) {
          throw new UnreadableFile(underUsers ? 'The file is not a Firebase export: it is not a JSON object with a `users` array' : 'The file is not an Auth0 import: it is not a JSON array')
        }
        started = true
        depth = 1
        inTarget = !underUsers
        continue
      }
      if (depth === 0) {
        if (!isSpace(b)) throw new UnreadableFile('The file goes on after its JSON ends')
        continue
      }
      const atElementLevel = inTarget && depth === targetDepth
      if (atElementLevel && !collecting) {
        if (isSpace(b) || b === 0x2c) continue
        if (b === 0x5d) {
          depth--
          inTarget = false
          targetDone = true
          continue
        }
        collecting = true
        from = i
      }
      if (collecting && depth === targetDepth && (b === 0x2c || b === 0x5d || isSpace(b))) {
        // A scalar element ends here.
        record.add(chunk.subarray(from, i))
        from = -1
        collecting = false
        pieces.push(record.take(++line))
        if (b === 0x5d) {
          depth--
          inTarget = false
          targetDone = true
        }
        continue
      }
      if (b === 0x22) {
        inString = true
        if (underUsers && depth === 1 && !collecting) {
          readingKey = true
          keyBytes = []
        }
        continue
      }
      if (underUsers && depth === 1) {
        if (b === 0x3a) {
          // A parser keeps one of two lists of one name, and which one differs between parsers: the file is refused.
          if (key === 'users' && targetDone) throw new UnreadableFile('The file holds `users` twice: which list is meant?')
          afterUsersColon = key === 'users'
        }
        else if (b === 0x5b && afterUsersColon) {
          depth = 2
          inTarget = true
          afterUsersColon = false
          continue
        } else if (!isSpace(b)) afterUsersColon = false
      }
      if (b === 0x7b || b === 0x5b) depth++
      else if (b === 0x7d || b === 0x5d) {
        depth--
        if (collecting && depth === targetDepth) {
          record.add(chunk.subarray(from, i + 1))
          from = -1
          collecting = false
          pieces.push(record.take(++line))
        }
      }
    }
    if (collecting && from >= 0) record.add(chunk.subarray(from))
    yield * pieces
  }
  if (!started) throw new UnreadableFile('The file is empty')
  if (depth !== 0 || inString) throw new UnreadableFile('The file ends before its JSON does: is it truncated?')
  if (!targetDone) throw new UnreadableFile('The file is not a Firebase export: it has no `users` array')
  if (line === 0) throw new UnreadableFile('The file holds no user')
}

/** The records of a file in the given layout, each at most `maxBytes`; UnreadableFile when the file as a whole is not. */
export function records(chunks: AsyncIterable<Buffer>, layout: Layout, maxBytes: number): AsyncGenerator<Piece> {
  if (layout === 'ndjson') return ndjson(chunks, maxBytes)
  return jsonArray(chunks, maxBytes, layout === 'users-array')
}
