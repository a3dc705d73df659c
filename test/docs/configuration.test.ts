import { readFileSync } from 'node:fs'
import t from 'tap'
import { Config } from '../../schemas/config.js'
import { CONFIGURATION_FILE, configurationMarkdown } from '../../scripts/config-docs.js'

t.test('docs/CONFIGURATION.md is what npm run docs:config writes from schemas/config.ts', async (t) => {
  const committed = readFileSync(CONFIGURATION_FILE, 'utf8')
  t.equal(committed, configurationMarkdown(), 'run npm run docs:config and commit docs/CONFIGURATION.md')
  for (const name of Object.keys(Config.properties)) t.match(committed, `| \`${name}\` |`, `${name} has its row`)
})
