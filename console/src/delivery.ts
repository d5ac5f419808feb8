import { loadBundle } from './delivery-bundle'
import { dateTime, h } from './format'
import { onEvent } from './live'
import { reportSections } from './report'

// One delivery as a pharmacist reviews it (#/deliveries/…), kept current by live events, and the
// printable report of one or more deliveries (#/print/…); both show the sections of report.ts.

export function deliveryPage(main: HTMLElement, id: string, announce: (text: string) => void): () => void {
  let stopped = false
  const started = performance.now()
  async function load(): Promise<void> {
    try {
      const b = await loadBundle(id)
      if (stopped) return
      // The chart takes the page's width (main is full width here, less its padding), and follows it (chart.ts).
      main.classList.add('wide')
      const width = Math.max(main.clientWidth - 32, 320)
      main.replaceChildren(
        h('p', { class: 'crumbs' }, h('a', { href: '#/' }, '← Attention queue')),
        h('h1', {}, `Prescription ${b.rx.rx_id}`, h('span', { class: 'muted small' }, ` delivery ${b.delivery.id}`)),
        h('p', {}, h('a', { href: `#/print/${b.delivery.id}` }, 'Printable excursion report')),
        ...reportSections(b, { width, fill: true }, () => {
          announce('Decision recorded')
          void load()
        }),
      )
      main.dataset.drawnMs = String(Math.round(performance.now() - started))
      main.dataset.ready = 'true'
    } catch (err) {
      main.replaceChildren(h('h1', {}, 'Delivery'), h('p', { role: 'alert' }, `Could not load ${id}: ${(err as Error).message}`))
    }
  }
  void load()
  let timer: ReturnType<typeof setTimeout> | null = null
  const off = onEvent((e) => {
    if (e.delivery_id !== id || timer) return
    // A decision being written is never wiped by a live update: say so, and let the reader reload.
    const form = main.querySelector<HTMLFormElement>('.disp-form')
    if (form && (form.querySelector<HTMLTextAreaElement>('textarea')!.value || form.querySelector('input:checked'))) {
      if (!main.querySelector('.changed')) {
        const reload = h('button', { type: 'button' }, 'Reload')
        reload.addEventListener('click', () => void load())
        form.before(h('p', { class: 'changed', role: 'status' }, 'This delivery changed since you opened it. ', reload))
      }
      return
    }
    timer = setTimeout(() => {
      timer = null
      void load().then(() => announce('Delivery updated'))
    }, 250)
  })
  return () => {
    stopped = true
    off()
    if (timer) clearTimeout(timer)
    main.classList.remove('wide')
  }
}

/** One page per delivery, for the browser's print-to-PDF (the quality record). */
export function printPage(main: HTMLElement, ids: string[]): () => void {
  let stopped = false
  main.classList.remove('wide')
  void (async () => {
    const bundles = await Promise.all(ids.map(loadBundle))
    if (stopped) return
    const printButton = h('button', { type: 'button', class: 'no-print' }, 'Print')
    printButton.addEventListener('click', () => window.print())
    main.replaceChildren(
      h('p', { class: 'no-print crumbs' }, h('a', { href: '#/' }, '← Attention queue'), ' ', printButton),
      ...bundles.map((b) =>
        h(
          'article',
          { class: 'report' },
          h('h1', {}, `Excursion report — prescription ${b.rx.rx_id}`),
          h(
            'p',
            { class: 'small' },
            `Delivery ${b.delivery.id} · ${b.pharmacy.name} · printed ${dateTime(new Date().toISOString(), b.pharmacy.timezone)}`,
          ),
          ...reportSections(b, { width: 680 }, () => {}).filter((s) => !s.querySelector('form')),
        ),
      ),
    )
    main.dataset.ready = 'true'
  })().catch((err: unknown) => main.replaceChildren(h('p', { role: 'alert' }, `Could not load the report: ${(err as Error).message}`)))
  return () => {
    stopped = true
  }
}
