import { notFound, HttpError } from './errors';
import type { Route } from './route';

export interface Match {
  route: Route;
  params: Record<string, string>;
}

/** Splits a request path into decoded segments; undefined when it cannot be decoded (treated as unknown). */
function segmentsOf(path: string): string[] | undefined {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  // The segments after the leading `/`: splitting after it is the same list as dropping the first, one array fewer.
  const segments = trimmed.charCodeAt(0) === 47 /* / */ ? trimmed.slice(1).split('/') : trimmed.split('/').slice(1);
  // Nothing to decode without a `%` (nearly every request): decoding is a call per segment.
  if (!trimmed.includes('%')) return segments;
  try {
    return segments.map(decodeURIComponent);
  } catch {
    return undefined;
  }
}

/** Whether the route's path has these segments: checked without building anything, for every route tried. */
function matchesPath(route: Route, segments: readonly string[]): boolean {
  if (route.segments.length !== segments.length) return false;
  for (let i = 0; i < segments.length; i++) {
    const pattern = route.segments[i];
    if (pattern.charCodeAt(0) === 123 /* { */) {
      if (segments[i] === '') return false;
    } else if (pattern !== segments[i]) return false;
  }
  return true;
}

/** The path parameters of a route whose path matches the segments. */
function paramsOf(route: Route, segments: readonly string[]): Record<string, string> {
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const pattern = route.segments[i];
    if (pattern.charCodeAt(0) === 123 /* { */) params[pattern.slice(1, -1)] = segments[i];
  }
  return params;
}

/**
 * The route for method + path (below the API's base path `basePath`; HEAD is served by GET); 404
 * `not_found` or 405 `method_not_allowed` (with `Allow`) otherwise, naming the path as the caller sent it.
 */
export function resolveRoute(routes: readonly Route[], method: string, path: string, basePath: string): Match {
  const segments = segmentsOf(path);
  const lookup = method === 'HEAD' ? 'GET' : method;
  let allowed: Set<string> | undefined;
  if (segments) {
    for (const route of routes) {
      if (!matchesPath(route, segments)) continue;
      if (route.method === lookup) return { route, params: paramsOf(route, segments) };
      (allowed ??= new Set()).add(route.method);
    }
  }
  if (allowed) {
    if (allowed.has('GET')) allowed.add('HEAD');
    const allow = [...allowed].sort();
    throw new HttpError(405, 'method_not_allowed', `${method} is not allowed here; allowed: ${allow.join(', ')}`, { details: { allow } });
  }
  throw notFound(`no route for ${method} ${basePath}${path}`);
}
