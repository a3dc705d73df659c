/** Roster's mark for the docs page: a list of three people, the product's name beside it (no framework's logo). */
export const DOCS_LOGO = `<svg xmlns="http://www.w3.org/2000/svg" width="150" height="40" viewBox="0 0 150 40" role="img" aria-label="Roster">
<rect x="2" y="4" width="32" height="32" rx="7" fill="#1f6feb"/>
<circle cx="11" cy="13" r="3" fill="#fff"/><rect x="16" y="11" width="13" height="4" rx="2" fill="#fff"/>
<circle cx="11" cy="20" r="3" fill="#fff"/><rect x="16" y="18" width="13" height="4" rx="2" fill="#fff"/>
<circle cx="11" cy="27" r="3" fill="#fff"/><rect x="16" y="25" width="9" height="4" rx="2" fill="#fff"/>
<text x="42" y="28" font-family="system-ui, -apple-system, Segoe UI, sans-serif" font-size="22" font-weight="600" fill="#fff">Roster</text>
</svg>`

/** The same mark, square, as the page's icon. */
export const DOCS_ICON = `<svg xmlns="http://www.w3.org/2000/svg" width="32" height="32" viewBox="0 0 32 32">
<rect width="32" height="32" rx="7" fill="#1f6feb"/>
<circle cx="9" cy="9" r="3" fill="#fff"/><rect x="14" y="7" width="13" height="4" rx="2" fill="#fff"/>
<circle cx="9" cy="16" r="3" fill="#fff"/><rect x="14" y="14" width="13" height="4" rx="2" fill="#fff"/>
<circle cx="9" cy="23" r="3" fill="#fff"/><rect x="14" y="21" width="9" height="4" rx="2" fill="#fff"/>
</svg>`
