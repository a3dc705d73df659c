import type { Metric } from 'prom-client'

type Labels = { method: string; route: string; status_code: string }

/** One series: its labels, its count in each bucket (not yet cumulative; the last one past every bound), its sum. */
interface Series {
  labels: Labels
  buckets: number[]
  sum: number
  count: number
}

/** A sample as prom-client's registry writes it out. */
interface Sample {
  metricName: string
  labels: Labels | (Labels & { le: number | string })
  value: number
}

/**
 * The request-duration histogram, observed once per answer, exposed through prom-client's registry like any of its
 * metrics, in the same text as prom-client's own histogram (`le` first, then the labels in their order). prom-client's
 * own hashes and validates the labels again on every observation, even through a child made once per series: about
 * 5 µs a request in the service, where this one costs a map lookup and a few comparisons. On the embedded self-read
 * that was 7 % of the service's CPU per request (bench:profile, 2026-11-25: 72–75 µs with prom-client's histogram,
 * 66–67 µs with the metrics off); the figure after is in BENCHMARKS.md ("Home-grown parts").
 */
export class DurationHistogram {
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  private readonly series = new Map<string, Series>()

  constructor(readonly name: string, readonly help: string, private readonly bounds: readonly number[]) {}

  observe(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${status} ${route}`
    let series = this.series.get(key)
    if (!series) {
      series = { labels: { method, route, status_code: String(status) }, buckets: new Array<number>(this.bounds.length + 1).fill(0), sum: 0, count: 0 }
      this.series.set(key, series)
    }
    const bounds = this.bounds
    let bucket = 0
    while (bucket < bounds.length && seconds > bounds[bucket]!) bucket++
    series.buckets[bucket]!++
    series.sum += seconds
    series.count++
  }

  /** What the registry reads at a scrape: for each series its cumulative buckets, then `+Inf`, its sum and count. */
  async get() {
    const values: Sample[] = []
    for (const { labels, buckets, sum, count } of this.series.values()) {
      let cumulative = 0
      this.bounds.forEach((le, i) => {
        cumulative += buckets[i]!
        values.push({ metricName: `${this.name}_bucket`, labels: { le, ...labels }, value: cumulative })
      })
      values.push({ metricName: `${this.name}_bucket`, labels: { le: '+Inf', ...labels }, value: count })
      values.push({ metricName: `${this.name}_sum`, labels, value: sum })
      values.push({ metricName: `${this.name}_count`, labels, value: count })
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }

  reset(): void {
    this.series.clear()
  }

  /**
   * As the registry takes it: its declared type is the union of prom-client's own classes, and it reads of a metric
   * only what this one has (name, help, type, aggregator, get, reset).
   */
  asMetric(): Metric {
    return this as unknown as Metric
  }
}
