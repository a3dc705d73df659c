// What the bench needs to start, wait for and measure the servers it runs.
import type { ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'

/** The node flags and script of `npm start`, so the benchmark measures exactly what production runs. */
export function startCommand(): string[] {
  const start: string = JSON.parse(readFileSync('package.json', 'utf8')).scripts.start
  const [node, ...rest] = start.trim().split(/\s+/)
  if (node !== 'node') throw new Error(`unexpected start script: ${start}`)
  return rest
}

/** CPU time (user + system) a process has used so far, in microseconds, from /proc. */
export const cpuMicros = (pid: number) => threadCpuMicros(`/proc/${pid}/stat`)

/** The same of its main thread alone: its JavaScript, socket writes and GC pauses, without libuv's workers (password hashes). */
export const mainThreadCpuMicros = (pid: number) => threadCpuMicros(`/proc/${pid}/task/${pid}/stat`)

/** utime + stime (fields 14 and 15 of the whole line) of a /proc stat file, in microseconds. */
function threadCpuMicros(statFile: string): number {
  const fields = readFileSync(statFile, 'utf8').replace(/^.*\) /, '').split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100
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
