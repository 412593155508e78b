import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import express, { type Router } from 'express';

/**
 * The console's static files (packages/console, built by `npm run build` into its dist/), served at
 * /app. Pages route by the URL's fragment (`/app/#/developer`), so only index.html and its assets are
 * served; nothing is fetched from elsewhere at run time, which the CSP states.
 */
// `style-src-attr 'unsafe-inline'`: the templates page previews the email as sent, in a sandboxed srcdoc
// frame that inherits this policy, and the email's layout is in style attributes (mail clients ignore
// style sheets). A style attribute runs no script, and what it could load is held by img-src/font-src.
export const CONSOLE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

export function consoleDistDir(): string {
  return join(dirname(require.resolve('@rrs/console/package.json')), 'dist');
}

export function consoleRouter(dir: string = consoleDistDir()): Router {
  const router = express.Router();
  router.use('/app', (req, res, next) => {
    res.locals.route = '/app';
    // The bare path would resolve the page's relative asset URLs against `/`.
    if (req.originalUrl === '/app' || req.originalUrl.startsWith('/app?')) return res.redirect(301, '/app/');
    res.setHeader('Content-Security-Policy', CONSOLE_CSP);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'same-origin');
    res.setHeader('Cache-Control', 'no-cache');
    next();
  });
  router.use('/app', express.static(dir, { index: 'index.html', redirect: false, fallthrough: true }));
  return router;
}

export const consoleBuilt = (dir: string = consoleDistDir()) => existsSync(join(dir, 'index.html'));
