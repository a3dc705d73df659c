// What both bench scripts need to start and wait for the servers they measure.
import type { ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'

/** The node flags and script of `npm start`, so the benchmark measures exactly what production runs. */
export function startCommand(): string[] {
  const start: string = JSON.parse(readFileSync('package.json', 'utf8')).scripts.start
  const [node, ...rest] = start.trim().split(/\s+/)
  if (node !== 'node') throw new Error(`unexpected start script: ${start}`)
  return rest
}

/** Waits until `url` answers below 500; fails at once if `child`, the server behind it, has exited. */
export async function waitFor(url: string, child?: ChildProcess): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (child && child.exitCode !== null) throw new Error(`the server for ${url} exited with ${child.exitCode}`)
    try {
      if ((await fetch(url)).status < 500) return
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`${url} did not come up`)
}
