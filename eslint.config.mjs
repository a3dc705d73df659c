// @ts-check
// The house rules as tooling: typescript-eslint's type-checked rules over everything tsc checks, and a few rules of
// style. `npm run lint` alone; `npm test` runs it beside the type check, and any warning fails it.
import eslint from '@eslint/js'
import stylistic from '@stylistic/eslint-plugin'
import { defineConfig } from 'eslint/config'
import tseslint from 'typescript-eslint'

// The floors of ARCHITECTURE.md, held: http/ knows no feature; accounts/, events/ and auth/ sit beneath the features; a
// feature never reaches into another's service or repository.
const FEATURES = ['users', 'emails', 'sessions', 'verification', 'health', 'idempotency', 'feed', 'webhooks', 'imports', 'exports', 'scim', 'console']
const restrict = (group, message) => ({ 'no-restricted-imports': ['error', { patterns: [{ group, message }] }] })
const layering = [
  {
    files: ['src/http/**/*.ts', 'src/filter/**/*.ts'],
    rules: restrict(['../auth/*', '../accounts/*', '../limits/*', ...FEATURES.map((f) => `../${f}/*`)],
      'src/http/ and src/filter/ know no feature: a step that needs one lives with it')
  },
  {
    files: ['src/accounts/**/*.ts', 'src/auth/**/*.ts', 'src/events/**/*.ts'],
    rules: restrict(FEATURES.map((f) => `../${f}/*`), 'accounts/, events/ and auth/ sit beneath the features')
  },
  ...FEATURES.map((feature) => ({
    files: [`src/${feature}/**/*.ts`],
    rules: restrict(FEATURES.filter((f) => f !== feature).flatMap((f) => [`../${f}/service*`, `../${f}/repository*`]),
      'features share through src/accounts/ and src/auth/, never through each other\'s services or repositories')
  }))
]

export default defineConfig(
  { ignores: ['dist/**', 'node_modules/**', 'test/sdk/**', 'test/client/**', 'data/**', '.tap/**', 'eslint.config.mjs'] },
  eslint.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { '@stylistic': stylistic },
    rules: {
      '@stylistic/max-len': ['error', { code: 160, ignoreUrls: true, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreRegExpLiterals: true }],
      '@stylistic/semi': ['error', 'never'],
      '@stylistic/quotes': ['error', 'single', { avoidEscape: true }],
      '@stylistic/indent': ['error', 2, { SwitchCase: 1, ignoredNodes: ['ConditionalExpression *', 'TemplateLiteral *'] }],
      '@stylistic/eol-last': 'error',
      '@stylistic/no-trailing-spaces': 'error',
      '@stylistic/no-multiple-empty-lines': ['error', { max: 1 }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      // Fastify's plugins and hooks are async by contract, whether or not they await.
      '@typescript-eslint/require-await': 'off'
    }
  },
  ...layering,
  {
    // Tests, the benchmark and the cluster test read answers as a client does, as JSON of no declared type; tap
    // awaits the subtests it is given.
    files: ['test/**/*.ts', 'bench/**/*.ts', 'scripts/cluster/**/*.ts'],
    rules: {
      '@typescript-eslint/no-floating-promises': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off'
    }
  },
  {
    // Scripts, tests and benchmarks are JavaScript as well as TypeScript.
    files: ['**/*.mjs', '**/*.cjs', '**/*.js'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: {
      globals: Object.fromEntries(['process', 'console', 'URL', 'Buffer', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate']
        .map((name) => [name, 'readonly']))
    }
  },
  {
    // The console's page runs in a browser.
    files: ['console/**/*.js'],
    languageOptions: {
      globals: Object.fromEntries(['document', 'location', 'fetch', 'confirm', 'sessionStorage', 'FormData', 'URLSearchParams', 'addEventListener', 'removeEventListener', 'setTimeout']
        .map((name) => [name, 'readonly']))
    }
  }
)
