import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { sharedSchemas } from '../../schemas/index.js'
import { DOCS_ICON, DOCS_LOGO } from './docs-brand.js'
import { DOCS_CSS, DOCS_SCRIPT } from './docs-script.js'
import { asOpenApi30 } from './openapi-30.js'
import { completeDocument, isOpenApi31, withWebhooks } from './openapi-document.js'
import { GUIDE, serviceVersion } from './openapi-guide.js'

export const DOCS_PREFIX = '/docs'

/** What the docs page's plugins find on its `window`: Swagger UI's bundle and the theme script's plugin. */
type UiPlugin = (system: unknown) => object
interface BrowserGlobals { SwaggerUIBundle: { plugins: { DownloadUrl: UiPlugin } }; rosterDocs: UiPlugin }

/**
 * The OpenAPI 3.1 document, built from the route schemas: shared schemas become named components (by `$id`),
 * bearer tokens the security scheme. Served at /openapi.json, browsable at /docs.
 */
async function openapi(app: FastifyInstance): Promise<void> {
  const version = serviceVersion()
  for (const schema of sharedSchemas) app.addSchema(schema)

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Roster',
        version,
        description: GUIDE,
        // The service's own documentation page is where its users find it; the licence is package.json's.
        ...(app.config.PUBLIC_URL ? { contact: { name: 'Roster API documentation', url: `${app.config.PUBLIC_URL}${DOCS_PREFIX}` } } : {}),
        license: { name: 'UNLICENSED: proprietary, all rights reserved' }
      },
      // PUBLIC_URL names the service as its clients reach it; without it, the server is the one the document was read
      // from (a relative URL), so that /docs "try it" works on localhost and on 127.0.0.1 alike.
      servers: [app.config.PUBLIC_URL
        ? { url: app.config.PUBLIC_URL }
        : { url: '/', description: 'The server this document was read from (set PUBLIC_URL to name the public address)' }],
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'Token from POST /auth/tokens' } }
      },
      security: [{ bearer: [] }],
      tags: [
        { name: 'auth', description: 'Sessions and tokens, address verification, password recovery' },
        { name: 'users', description: 'Users, their filters and key paths' },
        { name: 'emails', description: 'E-mail addresses of a user' },
        { name: 'sessions', description: 'The sessions of a user: list them, end one, end all' },
        { name: 'events', description: 'What changed: the feed, and a user\'s own activity' },
        { name: 'webhooks', description: 'Events pushed to your endpoints, signed (Standard Webhooks), retried' },
        { name: 'health', description: 'Liveness and readiness' }
      ]
    },
    transform: ({ schema, url, route }) => {
      const rule = route.config?.auth
      if (!schema || schema.hide) return { schema, url }
      const described = { ...schema } as Record<string, unknown>
      if (rule === 'public') described.security = []
      if (rule) described.description = [schema.description, `Authorization: \`${rule}\`.`].filter(Boolean).join('\n\n')
      return { schema: described, url }
    },
    transformObject: (documentObject) => {
      if (!('openapiObject' in documentObject) || !isOpenApi31(documentObject.openapiObject)) throw new Error('openapi: the document is not OpenAPI 3.1')
      return withWebhooks(completeDocument(documentObject.openapiObject, { forbiddenStatus: app.config.FORBIDDEN_STATUS }))
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`)
    }
  })
  await app.register(swaggerUi, {
    routePrefix: DOCS_PREFIX,
    // The product's name and mark, not the framework's.
    logo: { type: 'image/svg+xml', content: DOCS_LOGO, href: DOCS_PREFIX, target: '_self' },
    theme: {
      title: `Roster ${version}: API documentation`,
      favicon: [{ filename: 'roster.svg', rel: 'icon', type: 'image/svg+xml', sizes: 'any', content: DOCS_ICON }],
      js: [{ filename: 'roster-docs.js', content: DOCS_SCRIPT }],
      css: [{ filename: 'roster-docs.css', content: DOCS_CSS }]
    },
    // The page's configuration is written out as script: each plugin is a function read by its text, so each reaches
    // what it needs through the page's globals (the bundle's own download plugin, then the theme script's).
    uiConfig: {
      plugins: [
        (system) => (globalThis as unknown as BrowserGlobals).SwaggerUIBundle.plugins.DownloadUrl(system),
        (system) => (globalThis as unknown as BrowserGlobals).rosterDocs(system)
      ]
    }
  })

  app.get('/openapi.json', { config: { auth: 'public' }, schema: { hide: true } }, async () => app.swagger())
  // The same document as OpenAPI 3.0.3, made once, for generators that do not read 3.1 yet.
  let document30: ReturnType<typeof asOpenApi30> | undefined
  app.get('/openapi-3.0.json', { config: { auth: 'public' }, schema: { hide: true } }, async () => {
    if (!document30) {
      const document = app.swagger()
      if (!('openapi' in document) || !isOpenApi31(document)) throw new Error('openapi: the document is not OpenAPI 3.1')
      document30 = asOpenApi30(document)
    }
    return document30
  })
}

/** After the route steps: its own routes (the document, the docs page) are routes like any other. */
export default fp(openapi, { name: 'openapi', dependencies: ['steps'] })
