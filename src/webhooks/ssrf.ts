import { promises as dnsPromises, type LookupAddress } from 'node:dns'
import { isIP, type LookupFunction } from 'node:net'
import { validationFailed } from '../errors.js'
import { classifyAddress, type AddressClass } from './address-class.js'

export { classifyAddress } from './address-class.js'

export type RefusalReason = Exclude<AddressClass, 'public'> | 'invalid_url' | 'scheme_not_allowed' | 'credentials_in_url' | 'unresolvable'

/**
 * A webhook target rxtrace will not talk to (src/webhooks/README.md, SSRF). `message` is safe to show the
 * subscriber: it names the class of address but not the address itself, so registration
 * cannot be used to map internal DNS. `address` is for logs only.
 */
export class WebhookTargetRefusedError extends Error {
  readonly code = 'webhook_target_refused'
  override readonly name = 'WebhookTargetRefusedError'
  constructor(
    readonly reason: RefusalReason,
    message: string,
    readonly address?: string,
  ) {
    super(message)
  }
}

/** Resolves a host name to every address it has; swap in tests to simulate DNS rebinding. */
export type ResolveHost = (hostname: string) => Promise<LookupAddress[]>

// `verbatim`: keep the resolver's order, so the address we check is the address we dial.
const systemResolve: ResolveHost = (hostname) => dnsPromises.lookup(hostname, { all: true, verbatim: true })

/** Long enough for a slow recursive resolver, short enough for a registration request. */
const REGISTRATION_DNS_TIMEOUT_MS = 5_000

export interface PublicUrlOptions {
  /** `WEBHOOK_ALLOW_PRIVATE`: plain http and any address allowed (development, tests). */
  allowPrivate: boolean
  resolve?: ResolveHost
}

/** Throws `WebhookTargetRefusedError` unless `url` is fit to receive webhooks. Run at registration. */
export async function assertPublicUrl(url: string, { allowPrivate, resolve = systemResolve }: PublicUrlOptions): Promise<void> {
  const parsed = parseTargetUrl(url)
  if (parsed.protocol !== 'https:' && !(allowPrivate && parsed.protocol === 'http:')) {
    throw new WebhookTargetRefusedError(
      'scheme_not_allowed',
      allowPrivate ? 'webhook URL must use http or https' : 'webhook URL must use https',
    )
  }
  if (parsed.username || parsed.password) {
    throw new WebhookTargetRefusedError('credentials_in_url', 'webhook URL must not contain credentials; verify the signature instead')
  }
  if (allowPrivate) return
  const host = bareHostname(parsed)
  if (isIP(host)) return assertPublicAddress(host)
  const addresses = await resolveWithin(resolve, host, REGISTRATION_DNS_TIMEOUT_MS)
  for (const { address } of addresses) assertPublicAddress(address)
}

/**
 * The registration-time check as the API answers it: 422 `validation_failed` pointing at the
 * member that holds the URL. Every URL we will later POST to (a webhook endpoint's `url`, a
 * pharmacy's `writeback.url`) goes through here when it is registered or changed.
 */
export async function refuseNonPublicTarget(url: string, pointer: string, options: PublicUrlOptions): Promise<void> {
  try {
    await assertPublicUrl(url, options)
  } catch (error) {
    if (error instanceof WebhookTargetRefusedError) throw validationFailed([{ pointer, message: error.message }])
    throw error
  }
}

export function assertPublicAddress(address: string): void {
  const cls = classifyAddress(address)
  if (cls !== 'public')
    throw new WebhookTargetRefusedError(cls, `webhook host resolves to a non-public address (${cls.replace(/_/g, ' ')})`, address)
}

/**
 * A `lookup` for `http.request`/`net.connect` that re-checks every address at connect time,
 * so a name that resolved to a public address at registration and now resolves to 127.0.0.1
 * (DNS rebinding) is refused before a socket is opened. All addresses must be public — not
 * just the first — because happy-eyeballs (`autoSelectFamily`, on by default in Node 20) may
 * dial any of them. Note: Node skips `lookup` for IP literals; callers check those with
 * `assertPublicAddress`.
 */
export function createGuardedLookup(resolve: ResolveHost = systemResolve): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (resolved) => {
        const family = options.family === 4 || options.family === 6 ? options.family : 0
        const addresses = family === 0 ? resolved : resolved.filter((a) => a.family === family)
        const first = addresses[0]
        if (!first) return callback(unresolvable(hostname), options.all ? [] : '')
        try {
          for (const { address } of resolved) assertPublicAddress(address)
        } catch (err) {
          return callback(err as WebhookTargetRefusedError, options.all ? [] : '')
        }
        if (options.all) callback(null, addresses)
        else callback(null, first.address, first.family)
      },
      (err: NodeJS.ErrnoException) => callback(err, options.all ? [] : ''),
    )
  }
}

function parseTargetUrl(url: string): URL {
  try {
    return new URL(url)
  } catch {
    throw new WebhookTargetRefusedError('invalid_url', 'webhook URL is not a valid absolute URL')
  }
}

/** WHATWG URL keeps IPv6 hosts in brackets and has already normalised `2130706433`, `0x7f.1` to 127.0.0.1. */
export function bareHostname(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
}

async function resolveWithin(resolve: ResolveHost, host: string, timeoutMs: number): Promise<LookupAddress[]> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('DNS timeout')), timeoutMs)
  })
  try {
    const addresses = await Promise.race([resolve(host), timeout])
    if (addresses.length === 0) throw new Error('no addresses')
    return addresses
  } catch {
    throw unresolvable(host)
  } finally {
    clearTimeout(timer)
  }
}

function unresolvable(host: string): WebhookTargetRefusedError {
  return new WebhookTargetRefusedError('unresolvable', `webhook host ${host} does not resolve`)
}
