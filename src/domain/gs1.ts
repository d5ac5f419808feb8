// GS1 identifiers as EPCIS 2.0 names them: GTINs (items), GLNs (pharmacies) and their EPC URIs
// (GS1 EPC Tag Data Standard 2.1 §6.3). Pure functions; test/domain/gs1.test.ts checks them against
// published codes and an independent implementation (epc-tds).

/**
 * The check digit of a GS1 key's other digits (GS1 General Specifications §7.9.1): digits weighted
 * 3, 1, 3, … from the right, the check digit brings the sum to a multiple of ten.
 */
export function gs1CheckDigit(body: string): number {
  let sum = 0
  for (let i = 0; i < body.length; i++) sum += Number(body[body.length - 1 - i]) * (i % 2 === 0 ? 3 : 1)
  return (10 - (sum % 10)) % 10
}

/** Whether the last digit of an all-digit GS1 key is the check digit of the others. */
export function gs1CheckDigitHolds(code: string): boolean {
  return /^\d{2,18}$/.test(code) && gs1CheckDigit(code.slice(0, -1)) === Number(code.at(-1))
}

/** A GTIN-8, -12, -13 or -14 with a good check digit, as GTIN-14 (left-padded with zeros); null otherwise. */
export function gtin14(text: string): string | null {
  if (!/^(\d{8}|\d{12,14})$/.test(text) || !gs1CheckDigitHolds(text)) return null
  return text.padStart(14, '0')
}

export const GTIN_HELP = 'must be a GTIN: 8, 12, 13 or 14 digits, the last the GS1 check digit'
export const GLN_HELP = 'must be a GLN: 13 digits, the last the GS1 check digit'

/** A GLN: 13 digits, the last the check digit. */
export const isGln = (text: string): boolean => /^\d{13}$/.test(text) && gs1CheckDigitHolds(text)

/**
 * The 10 digits of an NDC and the length of its labeler code, from the NDC as the prescription
 * gave it. With dashes in a 10-digit shape (4-4-2, 5-3-2, 5-4-1) it is exact. The 11-digit HIPAA
 * form pads one segment with a zero; which one is read from the segments: a labeler code of four
 * digits is the one padded (FDA's five-digit labeler codes start at 10000), else the product code
 * when it starts with 0 (5-3-2), else the package code (5-4-1). Ten digits without dashes have a
 * four-digit labeler when they start with 0. Null when none fits (eleven digits with no padding).
 */
export function ndc10(text: string): { digits: string; labelerLength: 4 | 5 } | null {
  const dashed = /^(\d{4,5})-(\d{3,4})-(\d{1,2})$/.exec(text)
  if (dashed && text.length === 12) return { digits: dashed.slice(1).join(''), labelerLength: dashed[1]!.length as 4 | 5 }
  const plain = text.replace(/-/g, '')
  if (/^\d{10}$/.test(plain) && !dashed) return { digits: plain, labelerLength: plain.startsWith('0') ? 4 : 5 }
  const eleven = /^(\d{5})(\d{4})(\d{2})$/.exec(plain)
  if (!eleven) return null
  const [labeler, product, pack] = [eleven[1]!, eleven[2]!, eleven[3]!]
  if (labeler.startsWith('0')) return { digits: labeler.slice(1) + product + pack, labelerLength: 4 }
  if (product.startsWith('0')) return { digits: labeler + product.slice(1) + pack, labelerLength: 5 }
  if (pack.startsWith('0')) return { digits: labeler + product + pack.slice(1), labelerLength: 5 }
  return null
}

/** GS1 US: a drug's GTIN is the NDC behind the `03` prefix (indicator digit 0); its company prefix is `03` + the labeler code. */
const NDC_GS1_PREFIX = '03'

/** A GTIN-14 and the length of its GS1 Company Prefix, which EPC URIs split it by. */
export type Gtin = { gtin: string; companyPrefixLength: number }

/** The GTIN-14 of an NDC (`0` + `03` + the 10 digits + check digit); null for text that is no NDC. */
export function gtinFromNdc(ndc: string): Gtin | null {
  const parsed = ndc10(ndc)
  if (!parsed) return null
  const body = `0${NDC_GS1_PREFIX}${parsed.digits}`
  return { gtin: body + gs1CheckDigit(body), companyPrefixLength: NDC_GS1_PREFIX.length + parsed.labelerLength }
}

/**
 * The company prefix length is not written in a GTIN or GLN; GS1 keeps a table of them. An NDC
 * GTIN's is known (`03` + labeler); for any other key we split at 7 digits, the commonest length.
 * Any split names the same key: converted back (TDS §7), the digits are identical.
 */
const DEFAULT_COMPANY_PREFIX_LENGTH = 7

export function gtinOf(text: string): Gtin | null {
  const gtin = gtin14(text)
  if (!gtin) return null
  // `0` + `03…`: a US drug GTIN, whose labeler code's first digit tells its length (see ndc10).
  if (gtin.startsWith(`0${NDC_GS1_PREFIX}`)) return { gtin, companyPrefixLength: gtin[3] === '0' ? 6 : 7 }
  return { gtin, companyPrefixLength: DEFAULT_COMPANY_PREFIX_LENGTH }
}

/** TDS §6.3.1: company prefix, then the indicator digit followed by the item reference; the check digit is dropped. */
function sgtinParts({ gtin, companyPrefixLength }: Gtin): string {
  return `${gtin.slice(1, 1 + companyPrefixLength)}.${gtin[0]}${gtin.slice(1 + companyPrefixLength, 13)}`
}

/** The class of every instance of a GTIN: `urn:epc:idpat:sgtin:CompanyPrefix.ItemRef.*` (TDS §13). */
export const sgtinClass = (gtin: Gtin): string => `urn:epc:idpat:sgtin:${sgtinParts(gtin)}.*`

/** One serialised instance: `urn:epc:id:sgtin:CompanyPrefix.ItemRef.Serial`, the serial escaped as TDS §5 asks. */
export const sgtin = (gtin: Gtin, serial: string): string => `urn:epc:id:sgtin:${sgtinParts(gtin)}.${escapeSerial(serial)}`

/** GS1 AI (21) serials: 1–20 characters of the GS1 AI encodable set 82 (General Specifications §7.11, Figure 7.11-1). */
export const SERIAL_PATTERN = /^[!"%&'()*+,\-./0-9:;<=>?A-Z_a-z]{1,20}$/

/** TDS §5, Table 5-1: characters of set 82 that an EPC URI percent-encodes. */
function escapeSerial(serial: string): string {
  return serial.replace(/["%&/<>?]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`)
}

/** A GLN as an SGLN with no extension: `urn:epc:id:sgln:CompanyPrefix.LocationRef.0` (TDS §6.3.3). */
export function sglnOf(gln: string, companyPrefixLength = DEFAULT_COMPANY_PREFIX_LENGTH): string {
  return `urn:epc:id:sgln:${gln.slice(0, companyPrefixLength)}.${gln.slice(companyPrefixLength, 12)}.0`
}
