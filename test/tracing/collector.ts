import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'

interface Value { stringValue?: string; intValue?: string | number; boolValue?: boolean }
export interface Span {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  attributes: Record<string, string | number | boolean | undefined>
  service: string
}

/** An OTLP/HTTP receiver (JSON, as the exporter sends it): every span it was sent, flattened. */
export class Collector {
  readonly spans: Span[] = []
  private server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      if (req.url === '/v1/traces') this.take(JSON.parse(Buffer.concat(chunks).toString('utf8')))
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })

  static async start(t: Test): Promise<Collector> {
    const c = new Collector()
    await new Promise<void>((resolve) => c.server.listen(0, '127.0.0.1', resolve))
    t.teardown(() => c.server.listening ? c.stop() : undefined)
    return c
  }

  /** Stops answering, its connections dropped: an exporter finds nobody there. */
  stop(): Promise<void> {
    this.server.closeAllConnections()
    return new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  private take(body: {
    resourceSpans: Array<{
      resource: { attributes: Array<{ key: string; value: Value }> }
      scopeSpans: Array<{ spans: Array<Omit<Span, 'attributes' | 'service'> & { attributes?: Array<{ key: string; value: Value }> }> }>
    }>
  }): void {
    const flat = (list: Array<{ key: string; value: Value }> = []) => Object.fromEntries(list.map(({ key, value }) =>
      [key, value.stringValue ?? (value.intValue === undefined ? value.boolValue : Number(value.intValue))]))
    for (const rs of body.resourceSpans) {
      const service = String(flat(rs.resource.attributes)['service.name'])
      for (const ss of rs.scopeSpans) for (const s of ss.spans) this.spans.push({ ...s, attributes: flat(s.attributes), service })
    }
  }
}
