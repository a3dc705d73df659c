import { SpanKind, SpanStatusCode, type Attributes, type Span, type Tracer } from '@opentelemetry/api'

/**
 * The spans Roster makes itself, below the request's (database statements, SMTP sends, webhook posts). Tracing is
 * a process-wide concern in OpenTelemetry (one global context manager): the tracing plugin sets the tracer when
 * OTEL_EXPORTER_OTLP_ENDPOINT is set and clears it at close. Without one, a span costs one comparison.
 */
let tracer: Tracer | undefined

export function useTracer(next: Tracer | undefined): void {
  tracer = next
}

/** Whether spans are being made. */
export function tracing(): boolean {
  return tracer !== undefined
}

function failed(span: Span, err: unknown): void {
  span.recordException(err instanceof Error ? err : String(err))
  span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) })
}

/** Runs `work` inside a client span, a child of the active one (a request's, when there is one). */
export function inSpan<T>(name: string, attributes: Attributes, work: (span: Span | undefined) => Promise<T>): Promise<T> {
  if (!tracer) return work(undefined)
  return tracer.startActiveSpan(name, { kind: SpanKind.CLIENT, attributes }, async (span) => {
    try {
      return await work(span)
    } catch (err) {
      failed(span, err)
      throw err
    } finally {
      span.end()
    }
  })
}

/** As inSpan, for work that does not wait (the embedded engine's statements). */
export function inSpanSync<T>(name: string, attributes: Attributes, work: () => T): T {
  if (!tracer) return work()
  const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes })
  try {
    return work()
  } catch (err) {
    failed(span, err)
    throw err
  } finally {
    span.end()
  }
}

/** A database statement's span (OpenTelemetry's database conventions): its text, never its bound values. */
function statementSpan(system: 'mysql' | 'sqlite', sql: string): [string, Attributes] {
  const operation = /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase() ?? 'SQL'
  return [`${operation} ${system}`, { 'db.system.name': system, 'db.operation.name': operation, 'db.query.text': sql }]
}

/** Runs a statement of the MySQL driver in its span. */
export function statement<T>(sql: string, work: () => Promise<T>): Promise<T> {
  if (!tracer) return work()
  const [name, attributes] = statementSpan('mysql', sql)
  return inSpan(name, attributes, work)
}

/** Runs a statement of the embedded engine in its span. */
export function statementSync<T>(sql: string, work: () => T): T {
  if (!tracer) return work()
  const [name, attributes] = statementSpan('sqlite', sql)
  return inSpanSync(name, attributes, work)
}
