import { pipeline, Readable } from 'node:stream'
import { Busboy } from '@fastify/busboy'
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { Import, ImportCollection, ImportErrorCollection, ImportErrorQuery, ImportParams, ImportQuery, type ImportFields } from '../../schemas/import.js'
import { PageQuery } from '../../schemas/common.js'
import { ref } from '../../schemas/ref.js'
import { callerOf } from '../auth/steps.js'
import { InvalidInput, invalidField } from '../common/errors.js'
import { pageUnder, problems } from '../http/responses.js'
import { importPath, presentImport, presentLineError } from './present.js'
import { fieldsProblem } from './formats.js'
import type { ImportRequest } from './service.js'

const tags = ['imports']

/** The parameters of an import, from the query or from the multipart fields before the file. */
type Parameters = typeof ImportQuery.static

/**
 * A multipart upload: its fields, and its part named `file` as a stream that, once read to its end, fails if a part
 * followed the file (a `dry_run` there would be read too late to hold: the import is refused instead), if parts
 * were past the limits (one could be that `dry_run`), or if the body broke off.
 */
function multipartFile(request: FastifyRequest, body: Readable): Promise<{ fields: Record<string, string>; file: AsyncIterable<Buffer> }> {
  const malformed = (err: unknown) => new InvalidInput('The multipart body is malformed', [{ path: '', in: 'body', message: String((err as Error).message ?? err) }])
  let ended!: { resolve: () => void; reject: (err: unknown) => void }
  const end = new Promise<void>((resolve, reject) => { ended = { resolve, reject } })
  // Awaited by the file's reader; one that stopped early (a limit) leaves it unheard.
  end.catch(() => {})
  return new Promise((resolve, reject) => {
    const fields: Record<string, string> = Object.create(null) as Record<string, string>
    let file: Readable | undefined
    let late: string | undefined
    let failed = false
    const fail = (problem: Error) => {
      failed = true
      reject(problem)
      ended.reject(problem)
      file?.destroy(problem)
    }
    let parts: ReturnType<typeof Busboy>
    try {
      parts = Busboy({ headers: request.headers as { 'content-type': string }, limits: { fields: 20, fieldSize: 1024, files: 1, parts: 30 } })
    } catch (err) {
      // A content type without a boundary: refused before a byte of the body is read.
      body.resume()
      reject(malformed(err))
      return
    }
    parts.on('field', (name: string, value: string) => {
      if (file) late ??= name
      else fields[name] = value
    })
    parts.on('file', (name: string, stream: Readable) => {
      if (file || failed || name !== 'file') {
        if (file) late ??= name
        stream.resume()
        return
      }
      file = stream
      resolve({ fields, file: untilEnd(stream, end) })
    })
    // Parts past a limit are skipped unseen: a second file follows the first; a field past 20 could be any.
    parts.on('filesLimit', () => { late ??= 'file' })
    const tooMany = () => fail(invalidField('', 'body', 'holds more than 20 fields or 30 parts'))
    parts.on('fieldsLimit', tooMany)
    parts.on('partsLimit', tooMany)
    parts.on('finish', () => {
      if (!file) reject(invalidField('/file', 'body', 'is required: the file goes in a part named file'))
      else if (late !== undefined) ended.reject(invalidField(`/${late}`, 'body', 'follows the part named file: the fields go before it'))
      else ended.resolve()
    })
    // A body that breaks off (the client gone) or that busboy cannot read ends the file's reader too.
    pipeline(body, parts, (err) => { if (err) fail(malformed(err)) })
  })
}

async function * untilEnd(file: Readable, end: Promise<void>): AsyncGenerator<Buffer> {
  for await (const chunk of file) yield chunk as Buffer
  await end
}

/** Multipart fields are text: read as the query would be, with the same schema. */
function fieldsAsQuery(fields: Record<string, string>): Parameters {
  const problem = fieldsProblem(fields)
  if (problem) throw invalidField(problem.path, 'body', problem.message)
  const f = fields as typeof ImportFields.static
  return {
    format: f.format, on_conflict: f.on_conflict, dry_run: f.dry_run === undefined ? undefined : f.dry_run === 'true' || f.dry_run === true,
    firebase_signer_key: f.firebase_signer_key, firebase_salt_separator: f.firebase_salt_separator,
    firebase_rounds: f.firebase_rounds === undefined ? undefined : Number(f.firebase_rounds),
    firebase_mem_cost: f.firebase_mem_cost === undefined ? undefined : Number(f.firebase_mem_cost)
  }
}

function importRequest(p: Parameters, createdBy: number, requestId: string): ImportRequest {
  const firebase = [p.firebase_signer_key, p.firebase_salt_separator, p.firebase_rounds, p.firebase_mem_cost]
  const given = firebase.filter((v) => v !== undefined).length
  if (given > 0 && given < 4) {
    throw invalidField('/firebase_signer_key', 'query', 'and firebase_salt_separator, firebase_rounds and firebase_mem_cost go together')
  }
  if (given > 0 && p.format !== 'firebase') throw invalidField('/format', 'query', 'must be firebase when Firebase\'s hash parameters are given')
  return {
    format: p.format ?? 'roster',
    dryRun: p.dry_run ?? false,
    onConflict: p.on_conflict ?? 'skip',
    firebase: given === 4
      ? { signerKey: p.firebase_signer_key!, saltSeparator: p.firebase_salt_separator!, rounds: p.firebase_rounds!, memCost: p.firebase_mem_cost! }
      : null,
    createdBy,
    requestId
  }
}

/** Imports: files of users brought in, worked through in the background. Admins only. */
const imports: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.imports

  app.get('/imports', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'listImports', tags, summary: 'List imports, newest first', querystring: PageQuery,
      description: 'Every import received, with its status and counts; an upload that never finished is not listed.',
      response: { 200: ref(ImportCollection), ...problems([400, 'VALIDATION_FAILED', 'INVALID_CURSOR'], 401) }
    }
  }, async (request, reply) => pageUnder(reply, {
    base, path: '/imports', scope: 'imports', query: request.query, cursors: app.cursors,
    fetch: (before, limit) => service.list(before, limit + 1),
    present: (row) => presentImport(row, base)
  }))

  app.get('/imports/:import_id', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'getImport', tags, summary: 'Read an import', params: ImportParams,
      description: 'Its status and counts: `processed` grows while it runs, so a progress bar polls it; `detail` says why a file could not be read.',
      response: { 200: ref(Import), ...problems(400, 401, [404, 'IMPORT_NOT_FOUND']) }
    }
  }, async (request) => presentImport(await service.get(request.params.import_id), base))

  app.get('/imports/:import_id/errors', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'listImportErrors', tags, summary: 'The lines of an import that failed', params: ImportParams,
      description: 'In line order: the line (or array element) from 1, a code, a detail, and the address and external id of the line when they could be read.',
      querystring: ImportErrorQuery,
      response: { 200: ref(ImportErrorCollection), ...problems([400, 'VALIDATION_FAILED', 'INVALID_CURSOR'], 401, [404, 'IMPORT_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    const id = request.params.import_id
    return pageUnder(reply, {
      base, path: `/imports/${id}/errors`, scope: `import-errors:${id}`, query: request.query, cursors: app.cursors,
      fetch: (after, limit) => service.errors(id, after, limit + 1),
      present: presentLineError
    })
  })

  await app.register(async (scope) => {
    // The file is the body, read as a stream by the handler whatever its type: no parser of the app's reads it.
    const upload = scope.withTypeProvider<TypeBoxTypeProvider>()
    upload.removeAllContentTypeParsers()
    upload.addContentTypeParser('*', (_request, payload, done) => done(null, payload))
    upload.post('/imports', {
      config: { auth: 'admin', streamedBody: true },
      schema: {
        operationId: 'startImport', tags, summary: 'Bring users in from a file',
        description: 'The body is the file itself (`curl -T users.ndjson`), or a multipart part named `file` after the fields. It is read as a stream, up to IMPORT_MAX_BYTES, and worked through in the background: follow `processed` on the Import.',
        querystring: ImportQuery,
        response: { 202: ref(Import), ...problems([400, 'VALIDATION_FAILED'], 401, 413) }
      }
    }, async (request, reply) => {
      const caller = callerOf(request)
      const body = request.body
      if (!(body instanceof Readable)) throw invalidField('', 'body', 'is required: the file to import', 'The file to import is required as the body')
      let parameters: Parameters = request.query
      let file: AsyncIterable<Buffer> = body
      if (request.headers['content-type']?.toLowerCase().startsWith('multipart/form-data')) {
        const upload = await multipartFile(request, body)
        parameters = { ...fieldsAsQuery(upload.fields), ...Object.fromEntries(Object.entries(request.query).filter(([, v]) => v !== undefined)) }
        file = upload.file
      }
      const row = await service.receive(importRequest(parameters, caller.id, request.id), file)
      reply.code(202).header('location', base + importPath(row.id))
      return presentImport(row, base)
    })
  })
}

export default imports
