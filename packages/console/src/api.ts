/** The account API (/account/v1), as the console calls it: same origin, the session cookie, the CSRF token on changes. */

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly fields: Array<{ pointer?: string; parameter?: string; detail: string }> = [],
  ) {
    super(message);
  }
}

export interface Member {
  id: string;
  email: string;
  name: string;
  role: 'owner' | 'admin' | 'viewer';
}

export interface SessionInfo {
  member: Member;
  organization: { id: string; name: string; plan: string; locale: string; timeZone: string };
  csrfToken: string;
}

let csrfToken = '';

export function useCsrfToken(token: string): void {
  csrfToken = token;
}

const BASE = '/account/v1';

export async function call<T>(method: string, path: string, options: { body?: unknown; query?: Record<string, string | undefined>; idempotencyKey?: string } = {}): Promise<T> {
  return (await request<T>(method, path, options)).body;
}

/** A call whose answer may replay an earlier one (an Idempotency-Key seen before): the body, and whether it did. */
export async function callReplayable<T>(method: string, path: string, options: { body?: unknown; idempotencyKey?: string } = {}): Promise<{ body: T; replayed: boolean }> {
  const { body, headers } = await request<T>(method, path, options);
  return { body, replayed: headers.get('idempotent-replayed') === 'true' };
}

async function request<T>(method: string, path: string, options: { body?: unknown; query?: Record<string, string | undefined>; idempotencyKey?: string }): Promise<{ body: T; headers: Headers }> {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(options.query ?? {})) if (value) query.set(name, value);
  const headers: Record<string, string> = { accept: 'application/json' };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['x-csrf-token'] = csrfToken;
  if (options.idempotencyKey) headers['idempotency-key'] = options.idempotencyKey;
  const res = await fetch(`${BASE}${path}${query.size ? `?${query}` : ''}`, {
    method,
    headers,
    credentials: 'same-origin',
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  if (res.status === 204) return { body: undefined as T, headers: res.headers };
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(res.status, body.code ?? 'unknown', body.detail ?? body.title ?? res.statusText, body.errors ?? []);
  return { body: body as T, headers: res.headers };
}

/** A fresh key per submitted form: a double submit (or a retry of the same one) starts one cascade. */
export const newIdempotencyKey = () => crypto.randomUUID();
