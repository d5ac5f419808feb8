/**
 * JSON from outside (API request bodies, tote payloads) is refused, never repaired: bytes that
 * are not UTF-8 are not replaced by U+FFFD, a document nested deeper than we ever need is not
 * parsed, a member name that means something to JavaScript objects is not silently dropped, and
 * a string holding half of a surrogate pair or U+0000 (only a `\u` escape can make either) is
 * neither stored as U+FFFD nor handed to PostgreSQL, which refuses NUL.
 * One pass over the text bounds the depth before `JSON.parse` sees it; one walk of the parsed
 * value (at most MAX_JSON_DEPTH deep, so the recursion is bounded) looks for reserved names, and
 * another for lone surrogates and NUL when the text escapes one at all.
 */

/**
 * Deepest nesting of arrays and objects accepted. Our deepest documents are 3 levels (a
 * prescription's items, a pharmacy's address, a SenML pack of records); 32 leaves room for any
 * sane client and refuses depth bombs before they are parsed (a 256 KiB document of `[` takes
 * JSON.parse about 150 ms, against well under 1 ms for a flat one of the same size).
 */
export const MAX_JSON_DEPTH = 32

/**
 * Member names refused anywhere in a document: `__proto__` sets an object's prototype when
 * assigned, and `constructor` / `prototype` are the other two steps of a prototype-pollution
 * path. No field of ours has these names, so a document carrying one is hostile or broken.
 */
export const RESERVED_MEMBER_NAMES: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype'])

export type JsonRefusal =
  | { ok: false; problem: 'invalid_utf8'; message: string }
  | { ok: false; problem: 'invalid_json'; message: string }
  | { ok: false; problem: 'too_deep'; message: string }
  /** `pointer` is an RFC 6901 JSON pointer to the member. */
  | { ok: false; problem: 'reserved_member'; message: string; pointer: string }
  /** A lone surrogate or U+0000 in a string or member name. */
  | { ok: false; problem: 'unstorable_text'; message: string; pointer: string }

export type StrictJson = { ok: true; value: unknown; text: string } | JsonRefusal

// WHATWG Encoding: `fatal` throws on malformed input instead of substituting U+FFFD; the
// decoder drops a leading byte-order mark, as `Request.text()` does.
const utf8 = new TextDecoder('utf-8', { fatal: true })

/** The text of UTF-8 bytes, or null when they are not well-formed UTF-8. */
function decodeUtf8(bytes: Uint8Array): string | null {
  try {
    return utf8.decode(bytes)
  } catch {
    return null
  }
}

/** A refusal as a reason's text (a tote's or a driver's errors topic): where, if anywhere, then what. */
export function refusalText(refusal: JsonRefusal): string {
  if (refusal.problem === 'reserved_member') return `member ${refusal.pointer} has a reserved name`
  if (refusal.problem === 'unstorable_text' && refusal.pointer) return `${refusal.pointer}: ${refusal.message}`
  return refusal.message
}

/** Decodes, bounds, parses and checks a JSON document; the first problem found is the answer. */
export function parseStrictJson(bytes: Uint8Array): StrictJson {
  const text = decodeUtf8(bytes)
  if (text === null) return { ok: false, problem: 'invalid_utf8', message: 'is not valid UTF-8' }
  return parseStrictJsonText(text)
}

/** As `parseStrictJson`, for text already decoded. */
function parseStrictJsonText(text: string): StrictJson {
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
    return { ok: false, problem: 'too_deep', message: `nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels` }
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    // V8's message quotes the input; the caller's own bytes are not echoed into answers and logs.
    return { ok: false, problem: 'invalid_json', message: 'is not valid JSON' }
  }
  const reserved = firstRefused(value, (name) => RESERVED_MEMBER_NAMES.has(name))
  if (reserved !== null) {
    return {
      ok: false,
      problem: 'reserved_member',
      message: `"${reserved.text}" is a reserved member name`,
      pointer: toPointer(reserved.path),
    }
  }
  // JSON text holds a lone surrogate (valid UTF-8 has none) or a NUL (a control character must be
  // escaped) only as a `\uD800`–`\uDFFF` or `\u0000` escape: without one, there is nothing to walk.
  const unstorable = UNSTORABLE_ESCAPE.test(text) ? firstRefused(value, isUnstorable, isUnstorable) : null
  if (unstorable !== null) {
    const what = unstorable.name ? 'holds a member name that' : 'string'
    const why = unstorable.text.includes('\u0000')
      ? 'holds U+0000 (NUL), which no text of ours holds'
      : 'escapes half of a surrogate pair, which is not Unicode text'
    // A member name is pointed at through its object: the answer does not echo it.
    const path = unstorable.name ? unstorable.path.slice(0, -1) : unstorable.path
    return { ok: false, problem: 'unstorable_text', message: `${what} ${why}`, pointer: toPointer(path) }
  }
  return { ok: true, value, text }
}

const UNSTORABLE_ESCAPE = /\\u(?:[dD][89a-fA-F]|0000)/
// NUL; a high surrogate not followed by a low one, or a low one not after a high one.
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * Whether a string or member name is one no store keeps as sent: a lone surrogate (UTF-8 cannot
 * encode one, so it would come back as U+FFFD, and RFC 8785 refuses to canonicalize it for a
 * hash) or U+0000 (PostgreSQL refuses it in text).
 */
const isUnstorable = (text: string) => UNSTORABLE.test(text)

/**
 * Whether brackets and braces nest deeper than `max`, counted outside strings. Linear, no
 * allocation; it does not validate (a malformed document is left to `JSON.parse`).
 */
function nestsDeeperThan(text: string, max: number): boolean {
  // A document nested max + 1 deep has at least 2 * (max + 1) characters.
  if (text.length <= 2 * max) return false
  let depth = 0
  const n = text.length
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      // '"': skip the string, and the character after each backslash in it
      for (i++; i < n; i++) {
        const s = text.charCodeAt(i)
        if (s === 0x5c) i++
        else if (s === 0x22) break
      }
    } else if (c === 0x5b || c === 0x7b) {
      // '[' '{'
      if (++depth > max) return true
    } else if (c === 0x5d || c === 0x7d) {
      // ']' '}'
      depth--
    }
  }
  return false
}

/**
 * The first member name (or, with `refusedString`, string) of `value` in document order that is
 * refused, with its path (a member name's path ends with the name), or null. `value` must be at
 * most MAX_JSON_DEPTH deep, which bounds the recursion.
 */
function firstRefused(
  value: unknown,
  refusedName: (name: string) => boolean,
  refusedString?: (text: string) => boolean,
): { path: (string | number)[]; text: string; name: boolean } | null {
  if (typeof value === 'string') return refusedString?.(value) ? { path: [], text: value, name: false } : null
  if (value === null || typeof value !== 'object') return null
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const inner = firstRefused(value[i], refusedName, refusedString)
      if (inner !== null) return { ...inner, path: [i, ...inner.path] }
    }
    return null
  }
  // JSON.parse makes every member an own, enumerable property, `__proto__` included.
  for (const key of Object.keys(value)) {
    if (refusedName(key)) return { path: [key], text: key, name: true }
    const inner = firstRefused((value as Record<string, unknown>)[key], refusedName, refusedString)
    if (inner !== null) return { ...inner, path: [key, ...inner.path] }
  }
  return null
}

/** RFC 6901: `~` and `/` inside a member name are escaped. */
export function toPointer(path: readonly (string | number)[]): string {
  return path.map((p) => `/${String(p).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('')
}
