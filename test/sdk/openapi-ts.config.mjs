// @hey-api/openapi-ts: the served document in, a fetch client out, imports with .js extensions (ES modules).
export default {
  input: './out/openapi.json',
  output: { path: './out/hey-api', importFileExtension: '.js' }
}
