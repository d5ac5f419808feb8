/** The few API calls a benchmark needs to set itself up, over real HTTP. */

export async function clientCredentialsToken(baseUrl: string, clientId: string, secret: string): Promise<string> {
  const res = await fetch(`${baseUrl}/oauth/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}`, // RFC 6749 §2.3.1
    },
    body: 'grant_type=client_credentials',
  })
  const body = (await res.json()) as { access_token?: string }
  if (!res.ok || !body.access_token) throw new Error(`token request failed: ${res.status} ${JSON.stringify(body)}`)
  return body.access_token
}

export async function postJson<T>(
  baseUrl: string,
  path: string,
  token: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  const res = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...headers },
    body: JSON.stringify(body),
  })
  const text = await res.text()
  if (!res.ok) throw new Error(`POST ${path}: ${res.status} ${text}`)
  return JSON.parse(text) as T
}
