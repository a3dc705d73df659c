// npm run docs:config: writes docs/CONFIGURATION.md, the settings reference, from schemas/config.ts. A test fails
// when the committed file differs from what this writes, so edit the schema's descriptions and run it again.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Config } from '../schemas/config.js'
import { PROJECT_DIR } from '../src/common/project.js'

export const CONFIGURATION_FILE = join(PROJECT_DIR, 'docs', 'CONFIGURATION.md')

interface Setting {
  type?: string
  default?: unknown
  minimum?: number
  maximum?: number
  pattern?: string
  minLength?: number
  maxLength?: number
  anyOf?: Array<{ const: unknown }>
  description?: string
}

/** What a setting accepts, in a few words. */
function accepts(s: Setting): string {
  if (s.type === 'boolean') return 'true or false'
  if (s.type === 'integer') return `${s.minimum ?? '…'} to ${s.maximum ?? '…'}`
  if (s.anyOf) return s.anyOf.map((v) => `\`${String(v.const)}\``).join(', ')
  if (s.minLength !== undefined && s.maxLength !== undefined) return `${s.minLength} to ${s.maxLength} characters`
  return 'text'
}

const cell = (text: string) => text.replace(/\|/g, '\\|')

/** The whole of docs/CONFIGURATION.md. */
export function configurationMarkdown(): string {
  const rows = Object.entries(Config.properties as Record<string, Setting>).map(([name, s]) => {
    const fallback = s.default === undefined ? 'unset' : `\`${typeof s.default === 'string' ? s.default : JSON.stringify(s.default)}\``
    return `| \`${name}\` | ${fallback} | ${cell(accepts(s))} | ${cell(s.description ?? '')} |`
  })
  return [
    '# Configuration',
    '',
    'Roster reads its settings from the environment; an empty variable counts as unset. A value that is not valid stops',
    'the start with one line naming the variable and what it expects. This page is written by `npm run docs:config`',
    'from `schemas/config.ts`: edit the descriptions there. How to choose them for production is in',
    '[OPERATIONS.md](OPERATIONS.md) and [DEPLOYING.md](DEPLOYING.md).',
    '',
    '| Setting | Default | Accepts | What it does |',
    '|---|---|---|---|',
    ...rows,
    ''
  ].join('\n')
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(CONFIGURATION_FILE, configurationMarkdown())
  console.log(`wrote ${CONFIGURATION_FILE}`)
}
