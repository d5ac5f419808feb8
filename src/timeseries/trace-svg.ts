import type { TemperatureTrace, TracePoint } from './trace.js'

/**
 * The trace as a chart a pharmacist reads at a glance (`temperature.svg`): the allowed
 * band shaded green, hard limits as dashed red lines, the min–max envelope and the average,
 * excursions shaded red with their start time, time and °C axes, a title and a legend. Times
 * are in the pharmacy's time zone, as the console shows them. Self-contained (no fonts, scripts
 * or images to fetch); every text is XML-escaped.
 */

export type ChartHeading = {
  /** IANA zone the chart's clock reads in: the pharmacy's. */
  timeZone: string
  status: string
  coldChainState: string
  /** The break, marked where it happened (never past the chart's as-of end) with its reason. */
  brokenAt?: string | null | undefined
  breakReason?: string | null | undefined
}

const WIDTH = 900
const HEIGHT = 360
const PLOT = { left: 64, right: WIDTH - 24, top: 70, bottom: HEIGHT - 48 }
const COLORS = {
  band: '#2e9e44',
  hard: '#c62828',
  envelope: '#90caf9',
  avg: '#0d47a1',
  excursion: '#e53935',
  unknown: '#616161',
  grid: '#e0e0e0',
  axis: '#616161',
  text: '#212121',
  muted: '#757575',
}
const STATE_COLORS: Record<string, string> = { OK: '#2e7d32', EXCURSION: '#e65100', BROKEN: '#c62828', UNMONITORED: '#616161' }
const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
// Tick spacings a person counts in; the first giving at most ~8 labels is used.
const TEMP_STEPS = [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50]
const TIME_STEPS_S = [5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800]
const MAX_TICKS = 8
/** The title's room: from the plot's left edge to the image's right one, less a margin. */
const TITLE_WIDTH = WIDTH - PLOT.left - 16
/** A generous width of a 16 px system-ui character (bold capitals and digits run ~10 px). */
const TITLE_CHAR_PX = 10

export function traceSvg(trace: TemperatureTrace, heading: ChartHeading): string {
  const fromMs = Date.parse(trace.from)
  const stepMs = trace.step_s * 1_000
  const toMs = Math.max(Date.parse(trace.to), fromMs + stepMs)
  const x = (ms: number) => PLOT.left + ((ms - fromMs) / (toMs - fromMs)) * (PLOT.right - PLOT.left)
  const clampX = (ms: number) => Math.min(Math.max(x(ms), PLOT.left), PLOT.right)
  const [lo, hi, tempStep] = temperatureRange(trace)
  const y = (c: number) => PLOT.bottom - ((c - lo) / (hi - lo)) * (PLOT.bottom - PLOT.top)
  const profile = trace.profile
  const zone = zonedClock(heading.timeZone)
  const clock = clockFormat(fromMs, toMs, zone)
  const parts: string[] = []

  parts.push(`<rect width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`)
  parts.push(title(trace, heading))
  parts.push(legend(trace, zone))
  for (let i = 0; lo + i * tempStep <= hi + 1e-9; i++) {
    const c = lo + i * tempStep
    parts.push(`<line x1="${PLOT.left}" x2="${PLOT.right}" y1="${n(y(c))}" y2="${n(y(c))}" stroke="${COLORS.grid}"/>`)
    parts.push(text(PLOT.left - 8, y(c) + 4, formatCelsius(c), { anchor: 'end', size: 11, fill: COLORS.axis }))
  }
  parts.push(text(PLOT.left - 8, PLOT.top - 10, '°C', { anchor: 'end', size: 11, fill: COLORS.axis }))
  if (profile) {
    parts.push(
      `<rect class="band" x="${PLOT.left}" y="${n(y(profile.max_c))}" width="${PLOT.right - PLOT.left}" height="${n(y(profile.min_c) - y(profile.max_c))}" fill="${COLORS.band}" fill-opacity="0.14"><title>${escapeXml(`allowed ${profile.min_c}–${profile.max_c} °C`)}</title></rect>`,
    )
    for (const c of [profile.min_c, profile.max_c])
      parts.push(
        `<line x1="${PLOT.left}" x2="${PLOT.right}" y1="${n(y(c))}" y2="${n(y(c))}" stroke="${COLORS.band}" stroke-opacity="0.6"/>`,
      )
    for (const [label, c] of [
      ['hard min', profile.hard_min_c],
      ['hard max', profile.hard_max_c],
    ] as const) {
      if (c === null) continue
      parts.push(
        `<line class="hard-limit" x1="${PLOT.left}" x2="${PLOT.right}" y1="${n(y(c))}" y2="${n(y(c))}" stroke="${COLORS.hard}" stroke-width="1.5" stroke-dasharray="6 4"/>`,
      )
      parts.push(
        text(PLOT.right - 4, y(c) + (label === 'hard min' ? 13 : -5), `${label} ${formatCelsius(c)} °C`, {
          anchor: 'end',
          size: 11,
          fill: COLORS.hard,
        }),
      )
    }
  }
  // Buckets are aligned to the step, so the first and last may reach past the window: clip them.
  parts.push(
    `<clipPath id="plot-area"><rect x="${PLOT.left}" y="${PLOT.top}" width="${PLOT.right - PLOT.left}" height="${PLOT.bottom - PLOT.top}"/></clipPath>`,
  )
  parts.push(
    `<g clip-path="url(#plot-area)">`,
    ...excursions(trace, stepMs, clampX, clock.label),
    ...runs(trace.points, stepMs).flatMap((run) => series(run, stepMs, x, y)),
    '</g>',
  )
  if (heading.brokenAt) parts.push(breakMarker(heading.brokenAt, heading.breakReason ?? null, toMs, clampX))
  parts.push(...timeAxis(fromMs, toMs, x, clock, zone))
  parts.push(text(WIDTH - 8, HEIGHT - 10, `delivery ${trace.delivery_id}`, { anchor: 'end', size: 10, fill: COLORS.muted }))
  parts.push(
    `<rect x="${PLOT.left}" y="${PLOT.top}" width="${PLOT.right - PLOT.left}" height="${PLOT.bottom - PLOT.top}" fill="none" stroke="${COLORS.axis}"/>`,
  )
  if (trace.points.length === 0) {
    parts.push(
      text((PLOT.left + PLOT.right) / 2, (PLOT.top + PLOT.bottom) / 2, 'no readings yet', {
        anchor: 'middle',
        size: 20,
        fill: COLORS.muted,
      }),
    )
  }

  const label = `Temperature trace of prescription ${trace.rx_id} (delivery ${trace.delivery_id}) as of ${trace.summary.as_of}`
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${escapeXml(label)}" font-family="${escapeXml(FONT)}">\n<title>${escapeXml(label)}</title>\n${parts.join('\n')}\n</svg>\n`
}

/** `&`, `<`, `>`, `"` and `'` escaped, so any text is safe in content and attributes. */
function escapeXml(value: string): string {
  return value.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`)
}

function title(trace: TemperatureTrace, heading: ChartHeading): string {
  const mkt = trace.summary.mkt_c === null ? 'MKT —' : `MKT ${trace.summary.mkt_c.toFixed(2)} °C`
  const stateColor = STATE_COLORS[heading.coldChainState] ?? COLORS.text
  // A tote silent past max_gap_s is not "OK": the chart says what it does not know.
  const silent = trace.excursions.find((e) => e.kind === 'unknown' && e.ended_at === null)
  const state = silent && heading.coldChainState === 'OK' ? 'NO SIGNAL' : heading.coldChainState
  // The delivery id is printed small at the foot, so the title keeps to what a pharmacist reads
  // first. Should it still run long, it is squeezed to the chart's width, never cut at the edge.
  const words = [`Rx ${trace.rx_id}`, heading.status, 'cold chain', state, mkt]
  const estimate = words.join('').length * TITLE_CHAR_PX + 35
  const fit = estimate > TITLE_WIDTH ? ` textLength="${TITLE_WIDTH}" lengthAdjust="spacingAndGlyphs"` : ''
  return (
    `<text class="title" x="${PLOT.left}" y="26" font-size="16" fill="${COLORS.text}"${fit}><tspan font-weight="bold">${escapeXml(words[0]!)}</tspan>` +
    `<tspan dx="10">${escapeXml(heading.status)}</tspan><tspan dx="10" fill="${COLORS.muted}">cold chain</tspan>` +
    `<tspan dx="5" font-weight="bold" fill="${silent ? COLORS.unknown : stateColor}">${escapeXml(state)}</tspan><tspan dx="10">${escapeXml(mkt)}</tspan></text>`
  )
}

function legend(trace: TemperatureTrace, zone: ZonedClock): string {
  const profile = trace.profile
  const items: [string, string][] = [
    ...(profile
      ? [
          [
            `allowed ${formatCelsius(profile.min_c)}–${formatCelsius(profile.max_c)} °C`,
            `<rect width="16" height="10" y="-9" fill="${COLORS.band}" fill-opacity="0.3" stroke="${COLORS.band}"/>`,
          ] as [string, string],
        ]
      : []),
    ['min–max', `<rect width="16" height="10" y="-9" fill="${COLORS.envelope}" fill-opacity="0.6"/>`],
    ['average', `<line x2="16" y1="-4" y2="-4" stroke="${COLORS.avg}" stroke-width="2"/>`],
    ['excursion', `<rect width="16" height="10" y="-9" fill="${COLORS.excursion}" fill-opacity="0.25"/>`],
    ...(profile && (profile.hard_min_c !== null || profile.hard_max_c !== null)
      ? [
          ['hard limit', `<line x2="16" y1="-4" y2="-4" stroke="${COLORS.hard}" stroke-width="1.5" stroke-dasharray="4 3"/>`] as [
            string,
            string,
          ],
        ]
      : []),
  ]
  let at = PLOT.left
  const out: string[] = []
  for (const [label, swatch] of items) {
    out.push(`<g transform="translate(${at} 52)">${swatch}${text(22, 0, label, { size: 12, fill: COLORS.text })}</g>`)
    at += 22 + label.length * 7 + 18 // ~7 px a character at 12 px
  }
  const { min_c: low, max_c: high, time_out_of_range_s: outOfRangeS } = trace.summary
  const unknown = trace.summary.unknown_s > 0 ? ` (unknown ${duration(trace.summary.unknown_s)})` : ''
  const range = low === null || high === null ? '' : `${formatCelsius(low)}–${formatCelsius(high)} °C · `
  const facts = `${range}out of range ${duration(outOfRangeS)}${unknown} · as of ${zone.time(Date.parse(trace.summary.as_of))} ${zone.abbreviation(Date.parse(trace.summary.as_of))}`
  out.push(text(PLOT.right, 52, facts, { anchor: 'end', size: 12, fill: COLORS.muted }))
  return `<g class="legend">${out.join('')}</g>`
}

function excursions(trace: TemperatureTrace, stepMs: number, clampX: (ms: number) => number, clockLabel: (ms: number) => string): string[] {
  const last = trace.points.at(-1)
  // An excursion still open ends, on the chart, with the last reading (or the window).
  // Unknown time runs to as of; a temperature excursion to its newest reading.
  const readingsEnd = Math.min(last ? Date.parse(last.t) + stepMs : Infinity, Date.parse(trace.to))
  const out: string[] = []
  let lastLabelX = -Infinity
  let row = 0
  for (const e of trace.excursions) {
    const x1 = clampX(Date.parse(e.started_at))
    const openEnd = e.kind === 'unknown' ? Date.parse(trace.to) : readingsEnd
    const x2 = Math.max(clampX(e.ended_at === null ? openEnd : Date.parse(e.ended_at)), x1 + 2)
    const what = e.kind === 'unknown' ? 'no signal' : e.kind === 'low' ? 'too cold' : 'too warm'
    const tip = `${what} from ${clockLabel(Date.parse(e.started_at))}, ${Math.round(e.duration_s / 60)} min${e.peak_c === null ? '' : `, peak ${e.peak_c} °C`}`
    // A light wash over the whole height, and a solid strip on top that stays red over the green band.
    const color = e.kind === 'unknown' ? COLORS.unknown : COLORS.excursion
    out.push(
      `<rect class="excursion${e.kind === 'unknown' ? ' unknown' : ''}" x="${n(x1)}" y="${PLOT.top}" width="${n(x2 - x1)}" height="${PLOT.bottom - PLOT.top}" fill="${color}" fill-opacity="${e.kind === 'unknown' ? 0.2 : 0.12}"><title>${escapeXml(tip)}</title></rect>`,
    )
    out.push(`<rect x="${n(x1)}" y="${PLOT.top}" width="${n(x2 - x1)}" height="5" fill="${color}" fill-opacity="0.85"/>`)
    // Labels of close excursions go on alternate rows so they do not overlap.
    row = x1 - lastLabelX < 70 ? (row + 1) % 2 : 0
    lastLabelX = x1
    const label = `${clockLabel(Date.parse(e.started_at))}${e.kind === 'unknown' ? ' no signal' : ''}`
    out.push(text(x1 + 3, PLOT.top + 17 + row * 13, label, { size: 11, fill: COLORS.hard, weight: 'bold' }))
  }
  return out
}

const BREAK_WORDS: Record<string, string> = {
  hard_limit: 'hard limit crossed',
  excursion_too_long: 'excursion too long',
  cumulative_budget: 'too long out of range in total',
  mkt_exceeded: 'MKT over its limit',
  sensor_gap: 'sensor silent too long',
}

/** A vertical line where the cold chain broke, with its reason; never drawn past the chart's as-of end. */
function breakMarker(brokenAt: string, reason: string | null, asOfMs: number, clampX: (ms: number) => number): string {
  const at = Math.min(Date.parse(brokenAt), asOfMs)
  const bx = clampX(at)
  const label = `BREAK: ${BREAK_WORDS[reason ?? ''] ?? reason ?? ''}`
  const anchor = bx > (PLOT.left + PLOT.right) / 2 ? 'end' : 'start'
  return (
    `<g class="break" data-at="${escapeXml(new Date(at).toISOString())}"><line x1="${n(bx)}" x2="${n(bx)}" y1="${PLOT.top}" y2="${PLOT.bottom}" stroke="${COLORS.hard}" stroke-width="2"/>` +
    text(bx + (anchor === 'end' ? -4 : 4), PLOT.bottom - 8, label, { anchor, size: 12, fill: COLORS.hard, weight: 'bold' }) +
    '</g>'
  )
}

/** Consecutive buckets; a missing bucket (no reading in that step) breaks the line. */
function runs(points: readonly TracePoint[], stepMs: number): TracePoint[][] {
  const out: TracePoint[][] = []
  let previous = -Infinity
  for (const p of points) {
    const t = Date.parse(p.t)
    if (t - previous > stepMs || out.length === 0) out.push([])
    out.at(-1)!.push(p)
    previous = t
  }
  return out
}

function series(run: readonly TracePoint[], stepMs: number, x: (ms: number) => number, y: (c: number) => number): string[] {
  const mid = (p: TracePoint) => x(Date.parse(p.t) + stepMs / 2)
  if (run.length === 1) {
    const p = run[0]!
    return [
      `<line class="envelope" x1="${n(mid(p))}" x2="${n(mid(p))}" y1="${n(y(p.min))}" y2="${n(y(p.max))}" stroke="${COLORS.envelope}" stroke-width="3"/>`,
      `<circle class="avg" cx="${n(mid(p))}" cy="${n(y(p.avg))}" r="2" fill="${COLORS.avg}"/>`,
    ]
  }
  const upper = run.map((p) => `${n(mid(p))},${n(y(p.max))}`)
  const lower = [...run].reverse().map((p) => `${n(mid(p))},${n(y(p.min))}`)
  return [
    `<polygon class="envelope" points="${[...upper, ...lower].join(' ')}" fill="${COLORS.envelope}" fill-opacity="0.6"/>`,
    `<polyline class="avg" points="${run.map((p) => `${n(mid(p))},${n(y(p.avg))}`).join(' ')}" fill="none" stroke="${COLORS.avg}" stroke-width="1.75" stroke-linejoin="round"/>`,
  ]
}

type ClockFormat = { stepMs: number; label: (ms: number) => string }

/** Wall-clock readings of an instant in one IANA zone. */
type ZonedClock = {
  zone: string
  /** `HH:MM` (or `HH:MM:SS`) on a 24-hour clock. */
  time: (ms: number, seconds?: boolean) => string
  /** `YYYY-MM-DD`. */
  date: (ms: number) => string
  /** `CST`, `GMT+5:30`: what a reader sees beside a time. */
  abbreviation: (ms: number) => string
  /** Local time minus UTC, in ms, at that instant. */
  offsetMs: (ms: number) => number
}

function zonedClock(timeZone: string): ZonedClock {
  const hm = new Intl.DateTimeFormat('en-GB', { timeZone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' })
  const hms = new Intl.DateTimeFormat('en-GB', { timeZone, hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' })
  const ymd = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' })
  const name = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'short' })
  return {
    zone: timeZone,
    time: (ms, seconds = false) => (seconds ? hms : hm).format(ms),
    date: (ms) => ymd.format(ms),
    abbreviation: (ms) => name.formatToParts(ms).find((p) => p.type === 'timeZoneName')?.value ?? timeZone,
    offsetMs: (ms) => {
      const [h, m, sec] = hms.format(ms).split(':').map(Number) as [number, number, number]
      const [y, mo, d] = ymd.format(ms).split('-').map(Number) as [number, number, number]
      return Date.UTC(y, mo - 1, d, h, m, sec) - Math.floor(ms / 1_000) * 1_000
    },
  }
}

/** The time tick spacing for the window, and labels: HH:MM, HH:MM:SS for seconds apart, MM-DD for days apart. */
function clockFormat(fromMs: number, toMs: number, zone: ZonedClock): ClockFormat {
  const spanS = (toMs - fromMs) / 1_000
  const stepS = TIME_STEPS_S.find((s) => spanS / s <= MAX_TICKS) ?? TIME_STEPS_S.at(-1)!
  const label =
    stepS < 60
      ? (ms: number) => zone.time(ms, true)
      : stepS < 86_400
        ? (ms: number) => zone.time(ms)
        : (ms: number) => zone.date(ms).slice(5)
  return { stepMs: stepS * 1_000, label }
}

/** `America/Chicago, CST`; `UTC` alone where the zone is its own abbreviation. */
function zoneName(zone: ZonedClock, ms: number): string {
  const abbreviation = zone.abbreviation(ms)
  return abbreviation === zone.zone ? zone.zone : `${zone.zone}, ${abbreviation}`
}

function timeAxis(fromMs: number, toMs: number, x: (ms: number) => number, clock: ClockFormat, zone: ZonedClock): string[] {
  const out: string[] = []
  // Ticks fall on whole steps of local time (09:00, not 09:30 in a zone half an hour off UTC).
  const offset = zone.offsetMs(fromMs)
  for (let t = Math.ceil((fromMs + offset) / clock.stepMs) * clock.stepMs - offset; t <= toMs; t += clock.stepMs) {
    out.push(`<line x1="${n(x(t))}" x2="${n(x(t))}" y1="${PLOT.bottom}" y2="${PLOT.bottom + 5}" stroke="${COLORS.axis}"/>`)
    out.push(text(x(t), PLOT.bottom + 18, clock.label(t), { anchor: 'middle', size: 11, fill: COLORS.axis }))
  }
  const days = [...new Set([fromMs, toMs].map((ms) => zone.date(ms)))].join(' – ')
  out.push(
    text((PLOT.left + PLOT.right) / 2, HEIGHT - 10, `time (${zoneName(zone, toMs)}), ${days}`, {
      anchor: 'middle',
      size: 11,
      fill: COLORS.muted,
    }),
  )
  return out
}

/** [low, high, tick step]: the band, the hard limits and every reading, padded to whole ticks. */
function temperatureRange(trace: TemperatureTrace): [number, number, number] {
  const p = trace.profile
  const values = [
    ...(p ? [p.min_c, p.max_c, p.hard_min_c, p.hard_max_c].filter((v): v is number => v !== null) : []),
    ...trace.points.flatMap((pt) => [pt.min, pt.max]),
  ]
  const low = values.length ? Math.min(...values) - 1 : 0
  const high = values.length ? Math.max(...values) + 1 : 10
  const step = TEMP_STEPS.find((s) => (high - low) / s <= MAX_TICKS) ?? TEMP_STEPS.at(-1)!
  return [Math.floor(low / step) * step, Math.ceil(high / step) * step, step]
}

type TextStyle = { anchor?: 'start' | 'middle' | 'end'; size: number; fill: string; weight?: 'bold' }
function text(x: number, y: number, content: string, style: TextStyle): string {
  const weight = style.weight ? ` font-weight="${style.weight}"` : ''
  return `<text x="${n(x)}" y="${n(y)}" font-size="${style.size}" fill="${style.fill}" text-anchor="${style.anchor ?? 'start'}"${weight}>${escapeXml(content)}</text>`
}

/** `45 s`, `12 min`, `1 h 05 min`. */
function duration(seconds: number): string {
  if (seconds < 60) return `${Math.round(seconds)} s`
  const minutes = Math.round(seconds / 60)
  return minutes < 60 ? `${minutes} min` : `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`
}

const n = (v: number) => String(Math.round(v * 10) / 10)
const formatCelsius = (c: number) => String(Math.round(c * 10) / 10)
