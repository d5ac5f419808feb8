/**
 * One RFC 4180 CSV cell that a spreadsheet opens as text: a value beginning with `=`, `+`, `-`,
 * `@`, a tab or a carriage return would be read as a formula (OWASP, CSV injection), so it gets
 * a leading `'`; a cell holding a comma, a quote or a line break is quoted, quotes doubled.
 */
function csvCell(value: string | number | null | undefined): string {
  if (value === null || value === undefined) return ''
  let text = String(value)
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text
}

/** A CSV line of `cells`, CRLF-terminated. */
export const csvLine = (cells: readonly (string | number | null | undefined)[]): string => cells.map(csvCell).join(',') + '\r\n'
