import { isIP } from 'node:net'
import ipaddr from 'ipaddr.js'

/**
 * What kind of network an IP address belongs to, from the point of view of "may rxtrace POST
 * a webhook to it". Only `public` is allowed; everything else names why it is refused.
 */
export type AddressClass =
  | 'public'
  | 'unspecified' // 0.0.0.0/8, ::
  | 'loopback' // 127.0.0.0/8, ::1
  | 'private' // RFC 1918
  | 'carrier_grade_nat' // RFC 6598 100.64.0.0/10
  | 'link_local' // 169.254.0.0/16, fe80::/10
  | 'metadata' // cloud instance metadata services (a special case of the above)
  | 'unique_local' // RFC 4193 fc00::/7
  | 'site_local' // RFC 3879 fec0::/10 (deprecated, still routable inside some networks)
  | 'multicast' // 224.0.0.0/4, ff00::/8
  | 'broadcast' // 255.255.255.255
  | 'reserved' // documentation, benchmarking, IETF special purpose, 240/4, non-2000::/3 IPv6
  | 'tunnel' // Teredo: the client address is obfuscated, we cannot tell where it leads
  | 'invalid'

/**
 * Instance metadata endpoints: AWS/GCP/Azure (169.254.169.254), AWS IPv6 (fd00:ec2::254),
 * Alibaba (100.100.100.200), Oracle (192.0.0.192). All are already refused by their range;
 * naming them makes the refusal reason obvious in logs.
 */
const METADATA_ADDRESSES = new Set(['169.254.169.254', 'fd00:ec2::254', '100.100.100.200', '192.0.0.192'])

const IPV4_CLASSES: Record<string, AddressClass> = {
  unicast: 'public',
  as112: 'public', // RFC 7534 anycast DNS sinks: globally routed
  amt: 'public', // RFC 7450 multicast relays: globally routed
  unspecified: 'unspecified',
  broadcast: 'broadcast',
  multicast: 'multicast',
  linkLocal: 'link_local',
  loopback: 'loopback',
  carrierGradeNat: 'carrier_grade_nat',
  private: 'private',
  reserved: 'reserved',
}

const IPV6_CLASSES: Record<string, AddressClass> = {
  unicast: 'public',
  as112v6: 'public',
  amt: 'public',
  unspecified: 'unspecified',
  linkLocal: 'link_local',
  multicast: 'multicast',
  loopback: 'loopback',
  uniqueLocal: 'unique_local',
  deprecatedSiteLocal: 'site_local',
  teredo: 'tunnel',
}

// RFC 6052 §2.1: the well-known NAT64 prefix 64:ff9b::/96 carries a public IPv4 address in
// its last 32 bits (DNS64 synthesises these on IPv6-only networks). 64:ff9b:1::/48 (RFC 8215)
// is for local use and is refused.
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96')
// RFC 4291 §2.4: global unicast is 2000::/3. Anything else ipaddr leaves as "unicast" is
// unassigned, or the deprecated "IPv4-compatible" ::a.b.c.d (RFC 4291 §2.5.5.1): refused.
const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3')

/**
 * Classifies an address in the textual forms Node dials: what `dns.lookup` returns and what
 * the WHATWG URL parser leaves in `hostname`. Anything `net.isIP` rejects is `invalid`.
 */
export function classifyAddress(ip: string): AddressClass {
  const version = isIP(ip)
  if (version === 4) return classifyIPv4(ipaddr.IPv4.parse(ip))
  if (version === 6) return classifyIPv6(ipaddr.IPv6.parse(canonicalIPv6(ip)))
  return 'invalid'
}

/**
 * ipaddr.js reads `::127.0.0.1` as `::ffff:127.0.0.1`, while the socket layer (inet_pton)
 * reads `::7f00:1`. Classifying a different address from the one dialled is how SSRF filters
 * get bypassed, so let the WHATWG parser — same semantics as Node's — write it out first.
 * A zone id (`%eth0`) only scopes a link-local address and does not change its class.
 */
function canonicalIPv6(ip: string): string {
  const withoutZone = ip.split('%')[0]!
  return new URL(`http://[${withoutZone}]/`).hostname.slice(1, -1)
}

function classifyIPv4(address: ipaddr.IPv4): AddressClass {
  if (METADATA_ADDRESSES.has(address.toString())) return 'metadata'
  return IPV4_CLASSES[address.range()] ?? 'reserved'
}

function classifyIPv6(address: ipaddr.IPv6): AddressClass {
  const embedded = embeddedIPv4(address)
  if (embedded) return classifyIPv4(embedded)
  if (METADATA_ADDRESSES.has(address.toRFC5952String())) return 'metadata'
  const cls = IPV6_CLASSES[address.range()] ?? 'reserved'
  if (cls === 'public' && !address.match(GLOBAL_UNICAST)) return 'reserved'
  return cls
}

/**
 * IPv6 forms that lead to an IPv4 host are judged by that host: IPv4-mapped ::ffff:a.b.c.d
 * (the classic `[::ffff:127.0.0.1]` trick), RFC 6145 ::ffff:0:a.b.c.d, RFC 6052 NAT64, and
 * RFC 3056 6to4 2002:AABB:CCDD::/48.
 */
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | null {
  const range = address.range()
  const p = address.parts
  const fromParts = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff])
  if (range === 'ipv4Mapped' || range === 'rfc6145' || address.match(NAT64_WELL_KNOWN)) return fromParts(p[6]!, p[7]!)
  if (range === '6to4') return fromParts(p[1]!, p[2]!)
  return null
}
