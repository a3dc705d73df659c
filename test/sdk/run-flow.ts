// Runs one generator's flow against a running service and prints its result as JSON: the suite runs each in a
// process of its own (node --import tsx), where generated code resolves its imports as a bundler-minded SDK user's
// tooling would, and a flow's own set-up (orval's fetch) touches nothing else.
import type { FlowResult } from './flows/result.js'

const [name, baseUrl] = process.argv.slice(2)
if (!name || !baseUrl) throw new Error('usage: run-flow.ts <generator> <base URL>')
const { flow } = await import(`./flows/${name}.ts`) as { flow: (baseUrl: string, tag: string) => Promise<FlowResult> }
process.stdout.write(JSON.stringify(await flow(baseUrl, name)))
