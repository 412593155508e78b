import { notFound, HttpError } from './errors';
import type { Route } from './route';

export interface Match {
  route: Route;
  params: Record<string, string>;
}

/** Splits a request path into decoded segments; undefined when it cannot be decoded (treated as unknown). */
function segmentsOf(path: string): string[] | undefined {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  const segments = trimmed.split('/').slice(1);
  // Nothing to decode without a `%` (nearly every request): decoding is a call per segment.
  if (!trimmed.includes('%')) return segments;
  try {
    return segments.map(decodeURIComponent);
  } catch {
    return undefined;
  }
}

function matchPath(route: Route, segments: readonly string[]): Record<string, string> | undefined {
  if (route.segments.length !== segments.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const pattern = route.segments[i];
    if (pattern.charCodeAt(0) === 123 /* { */) {
      if (segments[i] === '') return undefined;
      params[pattern.slice(1, -1)] = segments[i];
    } else if (pattern !== segments[i]) return undefined;
  }
  return params;
}

/**
 * The route for method + path (below the API's base path; HEAD is served by GET); 404 `not_found` or
 * 405 `method_not_allowed` (with `Allow`) otherwise. `shownPath` is the path as the caller sent it.
 */
export function resolveRoute(routes: readonly Route[], method: string, path: string, shownPath: string): Match {
  const segments = segmentsOf(path);
  const lookup = method === 'HEAD' ? 'GET' : method;
  const allowed = new Set<string>();
  if (segments) {
    for (const route of routes) {
      const params = matchPath(route, segments);
      if (!params) continue;
      if (route.method === lookup) return { route, params };
      allowed.add(route.method);
    }
  }
  if (allowed.size > 0) {
    if (allowed.has('GET')) allowed.add('HEAD');
    const allow = [...allowed].sort();
    throw new HttpError(405, 'method_not_allowed', `${method} is not allowed here; allowed: ${allow.join(', ')}`, { details: { allow } });
  }
  throw notFound(`no route for ${method} ${shownPath}`);
}
