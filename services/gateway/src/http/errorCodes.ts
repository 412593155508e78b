/**
 * The catalog of error codes the public API can answer. A code always comes with the same HTTP status,
 * so an integrator may switch on `code` alone. The OpenAPI document lists, per operation and status,
 * the codes that operation can give (as an enum), taken from this catalog. Codes of an auth kind other
 * than the API key live with that kind (auth/adminToken.ts).
 */
export interface ErrorCodeInfo {
  status: number;
  description: string;
}

export const ERROR_CODES = {
  invalid_request: { status: 400, description: 'The request does not match the schema; `errors` lists each offending field as a JSON pointer.' },
  malformed_json: { status: 400, description: 'The body is not valid JSON, or nests deeper than 32 levels.' },
  invalid_idempotency_key: { status: 400, description: 'The Idempotency-Key header is not 1 to 255 printable ASCII characters.' },
  missing_api_key: { status: 401, description: 'No `Authorization: Bearer <key>` header was sent.' },
  invalid_api_key: { status: 401, description: 'The key is malformed, unknown or revoked, or the request carries more than one Authorization header; one answer for all of them.' },
  plan_required: { status: 402, description: "The organization's plan does not allow the operation (a trial plan cannot send messages)." },
  insufficient_scope: { status: 403, description: 'The key lacks the scope the operation needs; `requiredScope` names it.' },
  not_found: { status: 404, description: 'The object (or route) does not exist, or belongs to another organization.' },
  method_not_allowed: { status: 405, description: 'The route exists but not with this method; `Allow` lists the methods it has.' },
  idempotency_key_reused: { status: 409, description: 'This Idempotency-Key was already used with a different request.' },
  idempotency_key_in_use: { status: 409, description: 'A request with this Idempotency-Key is still running; retry after `Retry-After` seconds.' },
  email_not_confirmed: { status: 409, description: "The account's email address is not confirmed yet, so nothing can be sent." },
  channel_not_configured: { status: 409, description: 'The channel is not configured for the organization.' },
  payload_too_large: { status: 413, description: 'The body is larger than the limit (1 MB).' },
  unsupported_media_type: { status: 415, description: 'A body was sent with a Content-Type other than `application/json` (UTF-8).' },
  malformed_http: { status: 400, description: 'The request is not valid HTTP (e.g. a control character in a header); answered before routing.' },
  headers_too_large: { status: 431, description: 'The request headers are too large; answered before routing.' },
  misdirected_request: {
    status: 421,
    description: 'The `Host` is neither the host of PUBLIC_BASE_URL nor a loopback name (DNS rebinding protection); answered before routing.',
  },
  request_timeout: { status: 408, description: 'The request headers or body came slower than the server accepts (HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS); answered before routing, and the connection is closed.' },
  too_many_auth_failures: {
    status: 429,
    description: 'Too many invalid API keys came from this client address; every request from it is refused, whatever its key, until `Retry-After` seconds have passed.',
  },
  rate_limited: { status: 429, description: "The key's request quota for the current window is used up; retry after `Retry-After` seconds." },
  recipient_quota_exceeded: {
    status: 429,
    description: "The organization's budget of recipients per minute or per day (by plan) has fewer left than the request would create; nothing was created. Retry after `Retry-After` seconds; `quota` names the window.",
  },
  internal: { status: 500, description: 'An unexpected error; the request id identifies it in the logs.' },
  service_unavailable: { status: 503, description: 'A service behind the gateway is unavailable; retry later.' },
} as const satisfies Record<string, ErrorCodeInfo>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** An error an operation may answer: a bare status (its default codes), a catalog code, or a code of its own. */
export type RouteError = number | ErrorCode | { status: number; code: string; description: string };

/** The codes the kernel itself answers on any API, whatever the auth kind: routing, body, validation, dependencies. */
export const KERNEL_CODES: readonly ErrorCode[] = ['invalid_request', 'malformed_json', 'not_found', 'method_not_allowed', 'payload_too_large', 'unsupported_media_type', 'service_unavailable', 'internal'];

/** Codes a bare status number in a route's `errors` stands for. */
export const DEFAULT_CODES_BY_STATUS: Record<number, ErrorCode[]> = {
  400: ['invalid_request'],
  401: ['missing_api_key', 'invalid_api_key'],
  402: ['plan_required'],
  403: ['insufficient_scope'],
  404: ['not_found'],
  409: [],
  429: ['rate_limited'],
  503: ['service_unavailable'],
};

export const STATUS_TITLES: Record<number, string> = {
  400: 'Bad Request', 401: 'Unauthorized', 402: 'Payment Required', 403: 'Forbidden', 404: 'Not Found',
  405: 'Method Not Allowed', 409: 'Conflict', 413: 'Content Too Large', 415: 'Unsupported Media Type',
  422: 'Unprocessable Content', 408: 'Request Timeout', 421: 'Misdirected Request', 429: 'Too Many Requests', 431: 'Request Header Fields Too Large', 500: 'Internal Server Error', 501: 'Not Implemented', 503: 'Service Unavailable',
};
