/**
 * The docs page's own Swagger UI plugin, served as a script of the page's theme and named in its configuration. It
 * changes how an operation is shown, never what the document says (/openapi.json is untouched):
 * - an error response (4xx, 5xx) is one line, its code and description (which names its error codes), with a
 *   button that opens it in full: media type, example, schema and headers;
 * - a response's headers table is folded under "Headers (n)", a click away.
 * Every operation documents its shared error responses and rate-limit headers in full; shown open, they made each
 * operation three to five screens long.
 *
 * Browser code, kept as text: it runs in the page, with the page's React (`system.React`), and is never compiled.
 */
export const DOCS_SCRIPT = `(function () {
  'use strict'
  function rosterDocs(system) {
    var React = system.React
    var h = React.createElement
    return {
      wrapComponents: {
        response: function (Original) {
          return function RosterResponse(props) {
            var open = React.useState(false)
            var code = String(props.code)
            if (open[0] || !/^[45]/.test(code)) return h(Original, props)
            var Markdown = props.getComponent('Markdown', true)
            var description = (props.response && props.response.get('description')) || ''
            return h('tr', { className: 'response roster-folded', 'data-code': code },
              h('td', { className: 'response-col_status' }, code),
              h('td', { className: 'response-col_description' },
                h('div', { className: 'response-col_description__inner' }, h(Markdown, { source: description })),
                h('button', { type: 'button', className: 'btn roster-unfold', onClick: function () { open[1](true) } }, 'Example, schema and headers')),
              props.specSelectors.isOAS3() ? h('td', { className: 'response-col_links' }) : null)
          }
        },
        headers: function (Original) {
          return function RosterHeaders(props) {
            var count = props.headers && props.headers.size
            if (!count) return h(Original, props)
            return h('details', { className: 'roster-headers' },
              h('summary', null, 'Headers (' + count + ')'),
              h(Original, props))
          }
        }
      }
    }
  }
  window.rosterDocs = rosterDocs
})()
`

/**
 * How the folded parts look (a line each, in the page's own type); a long example scrolls within 240 px; the
 * responses' Links column goes, as the document declares no links.
 */
export const DOCS_CSS = `
.swagger-ui .responses-table .response-col_links { display: none; }
.swagger-ui .responses-table .model-example .highlight-code > pre { max-height: 240px; overflow-y: auto; }
.swagger-ui tr.roster-folded td { padding-top: 4px; padding-bottom: 4px; }
.swagger-ui tr.roster-folded td.response-col_description { display: flex; align-items: center; justify-content: space-between; gap: 12px; }
.swagger-ui tr.roster-folded .response-col_description__inner p { margin: 0; }
.swagger-ui .btn.roster-unfold { flex: none; padding: 2px 10px; font-size: 12px; box-shadow: none; }
.swagger-ui details.roster-headers > summary { cursor: pointer; font-size: 12px; font-weight: 600; margin: 6px 0; }
`
