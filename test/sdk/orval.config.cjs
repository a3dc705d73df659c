// orval reads its input and output from a configuration file: the suite writes the served document to out/.
module.exports = {
  roster: {
    input: 'out/openapi.json',
    output: { target: 'out/orval/roster.ts', client: 'fetch', mode: 'single' }
  }
}
