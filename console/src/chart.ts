import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'
import type { Excursion, Trace } from './api'
import { BREAK_REASONS, celsius, dateTime, duration, h } from './format'

// The interactive temperature chart (uPlot): min–max envelope and average per step; the allowed
// band; hard limits dashed; excursions shaded red; sensor gaps shaded grey as unknown (a gap is
// never drawn as a line across it); the break marked with its reason; nothing drawn past the
// "as of" time the summary is computed at. Drag to zoom, double-click or "Reset zoom" to undo.

const COLORS = {
  band: 'rgba(46,158,68,0.14)',
  bandLine: 'rgba(46,158,68,0.7)',
  hard: '#c62828',
  excursion: 'rgba(229,57,53,0.18)',
  unknown: 'rgba(97,97,97,0.22)',
  avg: '#0d47a1',
  envelope: 'rgba(144,202,249,0.55)',
}

/** Without a profile's max_gap_s, a silence this long still breaks the line (the built-in profiles' value). */
const DEFAULT_GAP_S = 900

export type Span = { from: number; to: number; kind: 'high' | 'low' | 'unknown'; label: string }

/**
 * Excursions and sensor gaps to shade, in seconds; open ones end at the as-of time. The trace
 * lists each silence once (merged, none shorter than a second), so the chart and its list show
 * exactly what the API says.
 */
function shadedSpans(trace: Trace, asOfS: number): Span[] {
  const spans: Span[] = trace.excursions.map((e: Excursion) => ({
    from: Date.parse(e.started_at) / 1000,
    to: Math.min(e.ended_at ? Date.parse(e.ended_at) / 1000 : asOfS, asOfS),
    kind: e.kind,
    label: e.kind === 'unknown' ? 'no signal' : e.kind === 'low' ? 'too cold' : 'too warm',
  }))
  return spans.filter((s) => s.to > s.from)
}

export type ChartInput = {
  trace: Trace
  timeZone: string
  brokenAt: string | null
  breakReason: string | null
  width: number
  height?: number
  /** Follow the width of the page (the delivery view); the printed report keeps its fixed width. */
  fill?: boolean
}

function renderChart(target: HTMLElement, input: ChartInput): { plot: uPlot; spans: Span[] } {
  const { trace, timeZone } = input
  const asOfS = Date.parse(trace.summary.as_of ?? trace.to) / 1000
  const step = trace.step_s
  // x, min, max, avg. Sensors report less often than the step may be: the lines join readings,
  // and break (a null, uPlot spanGaps: false) only across a silence longer than max_gap_s, which
  // is shaded as unknown instead.
  const breakAfterS = trace.profile?.max_gap_s ?? DEFAULT_GAP_S
  const xs: number[] = []
  const mins: (number | null)[] = []
  const maxs: (number | null)[] = []
  const avgs: (number | null)[] = []
  let previous = -Infinity
  for (const p of trace.points) {
    const t = Date.parse(p.t) / 1000 + step / 2
    if (t > asOfS + step) break
    if (t - previous > breakAfterS && xs.length) {
      xs.push(previous + step / 2)
      mins.push(null)
      maxs.push(null)
      avgs.push(null)
    }
    xs.push(t)
    mins.push(p.min)
    maxs.push(p.max)
    avgs.push(p.avg)
    previous = t
  }
  const spans = shadedSpans(trace, asOfS)
  const profile = trace.profile
  const brokenS = input.brokenAt ? Math.min(Date.parse(input.brokenAt) / 1000, asOfS) : null
  const values = [...mins, ...maxs].filter((v): v is number => v !== null)
  const limits = profile
    ? [profile.min_c, profile.max_c, profile.hard_min_c, profile.hard_max_c].filter((v): v is number => v !== null)
    : []
  const all = [...values, ...limits]
  const lo = all.length ? Math.min(...all) - 1 : 0
  const hi = all.length ? Math.max(...all) + 1 : 10

  const fmtTime = (s: number) => dateTime(new Date(s * 1000).toISOString(), timeZone)
  const opts: uPlot.Options = {
    width: input.width,
    height: input.height ?? 320,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), timeZone),
    scales: {
      x: { time: true, range: [Date.parse(trace.from) / 1000, Math.max(asOfS, Date.parse(trace.from) / 1000 + step)] },
      y: { range: [lo, hi] },
    },
    cursor: { drag: { x: true, y: false, setScale: true } },
    legend: { live: true },
    series: [
      { label: 'Time', value: (_u, v) => (v === null ? '—' : fmtTime(v)) },
      { label: 'Min', stroke: 'rgba(144,202,249,1)', width: 1, value: (_u, v) => celsius(v) },
      { label: 'Max', stroke: 'rgba(144,202,249,1)', width: 1, value: (_u, v) => celsius(v) },
      { label: 'Average', stroke: COLORS.avg, width: 2, value: (_u, v) => celsius(v) },
    ],
    bands: [{ series: [2, 1], fill: COLORS.envelope }],
    axes: [{}, { label: '°C', values: (_u, ticks) => ticks.map((t) => `${t}`) }],
    hooks: {
      drawClear: [
        (u) => {
          const ctx = u.ctx
          const { left, top, width, height } = u.bbox
          ctx.save()
          ctx.beginPath()
          ctx.rect(left, top, width, height)
          ctx.clip()
          if (profile) {
            const y1 = u.valToPos(profile.max_c, 'y', true)
            const y2 = u.valToPos(profile.min_c, 'y', true)
            ctx.fillStyle = COLORS.band
            ctx.fillRect(left, y1, width, y2 - y1)
          }
          for (const s of spans) {
            const x1 = u.valToPos(s.from, 'x', true)
            const x2 = u.valToPos(s.to, 'x', true)
            ctx.fillStyle = s.kind === 'unknown' ? COLORS.unknown : COLORS.excursion
            ctx.fillRect(x1, top, Math.max(x2 - x1, 2), height)
          }
          ctx.restore()
        },
      ],
      draw: [
        (u) => {
          const ctx = u.ctx
          const { left, top, width, height } = u.bbox
          const px = devicePixelRatio || 1
          ctx.save()
          ctx.beginPath()
          ctx.rect(left, top, width, height)
          ctx.clip()
          ctx.font = `${12 * px}px system-ui, sans-serif`
          for (const [label, c] of [
            ['hard min', profile?.hard_min_c],
            ['hard max', profile?.hard_max_c],
          ] as const) {
            if (c === null || c === undefined) continue
            const y = u.valToPos(c, 'y', true)
            ctx.strokeStyle = COLORS.hard
            ctx.lineWidth = 1.5 * px
            ctx.setLineDash([6 * px, 4 * px])
            ctx.beginPath()
            ctx.moveTo(left, y)
            ctx.lineTo(left + width, y)
            ctx.stroke()
            ctx.fillStyle = COLORS.hard
            ctx.textAlign = 'right'
            ctx.fillText(`${label} ${c} °C`, left + width - 4 * px, y - 4 * px)
          }
          if (brokenS !== null) {
            const x = u.valToPos(brokenS, 'x', true)
            ctx.setLineDash([])
            ctx.strokeStyle = COLORS.hard
            ctx.lineWidth = 2 * px
            ctx.beginPath()
            ctx.moveTo(x, top)
            ctx.lineTo(x, top + height)
            ctx.stroke()
            ctx.fillStyle = COLORS.hard
            ctx.textAlign = x > left + width / 2 ? 'right' : 'left'
            ctx.fillText(
              `BREAK: ${BREAK_REASONS[input.breakReason ?? ''] ?? input.breakReason ?? ''}`,
              x + (ctx.textAlign === 'right' ? -4 : 4) * px,
              top + 14 * px,
            )
          }
          ctx.restore()
        },
      ],
    },
  }
  target.replaceChildren()
  const plot = new uPlot(opts, [xs, mins, maxs, avgs], target)
  return { plot, spans }
}

/** The chart with its keyboard zoom controls, a text account of what is shaded, and the as-of time. */
export function chartPanel(input: ChartInput): HTMLElement {
  const canvasBox = h('div', { class: 'chart-canvas', role: 'img', 'aria-label': 'Temperature chart' })
  const { plot, spans } = renderChart(canvasBox, input)
  if (input.fill) {
    // The page's width, also after the window is resized or rotated (a tablet).
    new ResizeObserver(() => {
      const width = canvasBox.clientWidth // 0 while detached: left alone
      if (width > 0 && Math.abs(width - plot.width) >= 1) plot.setSize({ width, height: plot.height })
    }).observe(canvasBox)
  }
  const x0 = Date.parse(input.trace.from) / 1000
  const x1 = Date.parse(input.trace.summary.as_of ?? input.trace.to) / 1000
  const zoom = (factor: number) => {
    const min = plot.scales.x?.min ?? x0
    const max = plot.scales.x?.max ?? x1
    const mid = (min + max) / 2
    const half = ((max - min) / 2) * factor
    plot.setScale('x', { min: Math.max(x0, mid - half), max: Math.min(x1, mid + half) })
  }
  const excursions = spans.filter((s) => s.kind !== 'unknown').length
  const unknown = spans.filter((s) => s.kind === 'unknown').length
  canvasBox.setAttribute(
    'aria-label',
    `Temperature chart: ${excursions} excursion${excursions === 1 ? '' : 's'}, ${unknown} period${unknown === 1 ? '' : 's'} without signal`,
  )
  const panel = h(
    'figure',
    { class: 'chart', 'data-excursions': String(excursions), 'data-unknown': String(unknown) },
    h(
      'div',
      { class: 'chart-tools', role: 'group', 'aria-label': 'Chart zoom' },
      button('Zoom in', () => zoom(0.5)),
      button('Zoom out', () => zoom(2)),
      button('Reset zoom', () => plot.setScale('x', { min: x0, max: x1 })),
      h(
        'span',
        { class: 'legend-key' },
        swatch('band'),
        'allowed range ',
        swatch('excursion'),
        'excursion ',
        swatch('unknown'),
        'no signal (unknown) ',
        swatch('hard'),
        'hard limit',
      ),
    ),
    canvasBox,
    h(
      'figcaption',
      {},
      h('span', { class: 'as-of' }, `As of ${dateTime(input.trace.summary.as_of ?? input.trace.to, input.timeZone)}`),
      spans.length
        ? h(
            'ul',
            { class: 'spans' },
            ...spans.map((s) =>
              h(
                'li',
                { class: `span-${s.kind}` },
                `${s.label}: ${dateTime(new Date(s.from * 1000).toISOString(), input.timeZone)} for ${duration(s.to - s.from)}`,
              ),
            ),
          )
        : null,
    ),
  )
  return panel
}

function button(label: string, onClick: () => void) {
  const b = h('button', { type: 'button' }, label)
  b.addEventListener('click', onClick)
  return b
}

const swatch = (kind: string) => h('span', { class: `swatch swatch-${kind}`, 'aria-hidden': 'true' })
