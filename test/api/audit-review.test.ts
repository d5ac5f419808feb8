import { decodeJwt } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TestApi } from '../helpers/service.js'
import { postgresStore, reachablePostgres, sqliteStore } from '../helpers/stores.js'
import { signedInToken } from '../helpers/users.js'

// GET /v1/audit-events for an audit review: filters by person, delivery, operation and time,
// pages, exports CSV; a pharmacist sees their own pharmacy's records only. The filters are SQL
// of each dialect: both stores.
const { url } = await reachablePostgres()
const stores = [sqliteStore, ...(url ? [postgresStore(url)] : [])]
afterAll(async () => {
  for (const store of stores) await store.cleanup()
})

type Record = {
  at: string
  sub: string
  action?: string
  delivery_id?: string
  method: string
  path: string
  status: number
  request_id: string
  pharmacy_id?: string
  pos?: number
}
type Page = { data: Record[]; next_cursor: string | null }

/** Parses RFC 4180 CSV (quoted cells, doubled quotes, CRLF). */
function parseCsv(text: string): string[][] {
  const rows: string[][] = []
  let row: string[] = []
  let cell = ''
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') ((cell += '"'), i++)
      else if (ch === '"') quoted = false
      else cell += ch
    } else if (ch === '"') quoted = true
    else if (ch === ',') (row.push(cell), (cell = ''))
    else if (ch === '\r' && text[i + 1] === '\n') (row.push(cell), rows.push(row), (row = []), (cell = ''), i++)
    else cell += ch
  }
  return rows
}

for (const store of stores)
  describe(`the audit review on ${store.name}`, () => {
    let api: TestApi
    let admin: string
    let pat: string // pharmacist of Oak Street
    let bo: string // pharmacist of Elm Street
    let patSub: string
    const deliveries: string[] = []
    let elmDelivery: string

    beforeAll(async () => {
      api = await store.start({ PASSWORD_SCRYPT_LOG2_N: '10' })
      admin = await api.adminToken()
      const oak = await api.pharmacy(admin, { name: 'Oak Street Pharmacy' })
      const elm = await api.pharmacy(admin, { name: 'Elm Street Pharmacy' })
      pat = await signedInToken(api, admin, { role: 'pharmacist', pharmacy_id: oak.id })
      bo = await signedInToken(api, admin, { role: 'pharmacist', pharmacy_id: elm.id })
      patSub = decodeJwt(pat).sub!
      for (const n of [1, 2]) deliveries.push((await api.prescription(pat, { pharmacy_id: oak.id, patient_id: `pt_oak_${n}` })).delivery_id)
      elmDelivery = (await api.prescription(bo, { pharmacy_id: elm.id, patient_id: 'pt_elm' })).delivery_id
      expect((await api.get(`/v1/deliveries/${deliveries[0]}`, pat)).status).toBe(200)
      // A request id a spreadsheet would read as a formula.
      const cancelled = await api.request('POST', `/v1/deliveries/${deliveries[1]}/cancel`, {
        token: pat,
        body: { reason: 'patient moved' },
        headers: { 'x-request-id': '-1-1:audit' },
      })
      expect(cancelled.status, cancelled.text).toBe(200)
    })
    afterAll(() => api.stop())

    const list = async (token: string, query: string) => {
      const res = await api.get<Page>(`/v1/audit-events?${query}`, token)
      expect(res.status, res.text).toBe(200)
      return res.body
    }

    it("filters a pharmacist's trail by delivery: the prescription that created it, the reads and actions on it", async () => {
      const page = await list(pat, `delivery_id=${deliveries[0]}`)
      expect(page.data.map((r) => [r.method, r.action, r.status])).toEqual([
        ['POST', 'createPrescription', 201],
        ['GET', 'getDelivery', 200],
      ])
      expect(page.data.every((r) => r.delivery_id === deliveries[0] && r.sub === patSub && r.pharmacy_id !== undefined)).toBe(true)
      expect(page.data[0]!.pos).toBeUndefined() // positions count other tenants' requests
    })

    it("never shows another pharmacy's records, whichever filter asks for them", async () => {
      expect((await list(pat, `delivery_id=${elmDelivery}`)).data).toEqual([])
      expect((await list(bo, `delivery_id=${deliveries[0]}`)).data).toEqual([])
      const bosCreates = await list(bo, 'action=createPrescription')
      expect(bosCreates.data.map((r) => r.delivery_id)).toEqual([elmDelivery])
    })

    it('filters by person and operation, and pages with a cursor', async () => {
      const first = await list(pat, `user=${patSub}&action=createPrescription&limit=1`)
      expect(first.data.map((r) => r.delivery_id)).toEqual([deliveries[0]])
      expect(first.next_cursor).not.toBeNull()
      const second = await list(pat, `user=${patSub}&action=createPrescription&limit=1&cursor=${first.next_cursor}`)
      expect(second.data.map((r) => r.delivery_id)).toEqual([deliveries[1]])
      const third = second.next_cursor
        ? await list(pat, `user=${patSub}&action=createPrescription&limit=1&cursor=${second.next_cursor}`)
        : null
      expect(third?.data ?? []).toEqual([])
      expect((await list(pat, 'user=us_somebody_else')).data).toEqual([])
    })

    it('filters by time: from is inclusive, to exclusive', async () => {
      const all = (await list(pat, `user=${patSub}&limit=100`)).data
      const cancel = all.find((r) => r.action === 'cancelDelivery')!
      const from = await list(pat, `user=${patSub}&limit=100&from=${encodeURIComponent(cancel.at)}`)
      expect(from.data.map((r) => r.request_id)).toContain('-1-1:audit')
      expect(from.data.every((r) => r.at >= cancel.at)).toBe(true)
      const before = await list(pat, `user=${patSub}&limit=100&to=${encodeURIComponent(cancel.at)}`)
      expect(before.data.map((r) => r.request_id)).not.toContain('-1-1:audit')
      expect(before.data.every((r) => r.at < cancel.at)).toBe(true)
      expect(before.data.filter((r) => r.action === 'createPrescription')).toHaveLength(2)
      const refused = await api.get('/v1/audit-events?from=yesterday', pat)
      expect(refused.status).toBe(422)
      expect(refused.body.errors[0].pointer).toBe('/query/from')
    })

    it('exports the filtered trail as CSV that a spreadsheet opens as text', async () => {
      // Writes only: the export's own request and the JSON list below are reads, recorded as they happen.
      const writes = `user=${patSub}&action=cancelDelivery`
      for (const ask of [{ query: writes, accept: 'text/csv' }, { query: `${writes}&format=csv` }]) {
        const res = await api.request('GET', `/v1/audit-events?${ask.query}`, {
          token: pat,
          headers: ask.accept ? { accept: ask.accept } : {},
        })
        expect(res.status).toBe(200)
        expect(res.headers.get('content-type')).toMatch(/^text\/csv/)
        const [header, ...rows] = parseCsv(res.text)
        expect(header).toContain('action')
        expect(header).not.toContain('pos')
        const cell = (row: string[], name: string) => row[header!.indexOf(name)]
        const json = (await list(pat, writes)).data
        expect(rows).toHaveLength(1)
        expect(rows.map((r) => cell(r, 'hash'))).toEqual(json.map((r) => (r as unknown as { hash: string }).hash))
        expect(rows.some((r) => cell(r, 'request_id') === "'-1-1:audit")).toBe(true)
        expect(rows.every((r) => !/^[=+\-@]/.test(r.join('')) && r.every((c) => !/^[=+\-@]/.test(c)))).toBe(true)
        expect(rows.every((r) => cell(r, 'pharmacy_id') !== '' && cell(r, 'sub') === patSub)).toBe(true)
      }
    })

    it("an unrestricted token's CSV has the chain's positions and links", async () => {
      const res = await api.request('GET', '/v1/audit-events?format=csv&action=createPrescription', { token: admin })
      const [header, ...rows] = parseCsv(res.text)
      expect(header!.slice(0, 2)).toEqual(['pos', 'at'])
      expect(header).toContain('prev_hash')
      expect(rows.length).toBeGreaterThanOrEqual(3)
    })
  })
