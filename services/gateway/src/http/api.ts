import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { openApiCache, type DocumentInfo } from './openapi';
import { pipeline, type PipelineOptions } from './pipeline';
import { currentRoutes } from './route';

type Json = Record<string, unknown>;

/** An API the gateway serves: its routes, the gates of their auth kinds, and how its document describes it. */
export interface HttpApi extends PipelineOptions {
  document: Omit<DocumentInfo, 'idempotencyKeys'>;
}

export interface ServedApi {
  /** Mount at `basePath`: serves `GET <basePath>/openapi.json` (no credentials) and the routes. */
  handler: RequestHandler;
  /** The API's OpenAPI document as of now (rebuilt only when the route set changes). */
  document(): Json;
}

export function serveApi(api: HttpApi): ServedApi {
  const build = openApiCache({ ...api.document, idempotencyKeys: api.idempotencyKeys });
  const document = () => build(currentRoutes(api.routes));
  const routes = pipeline(api);
  const documentRoute = `${api.basePath}/openapi.json`;
  return {
    document,
    // The description is public: integrators generate clients from it before they have credentials.
    handler: (req: Request, res: Response, next: NextFunction) => {
      if ((req.method === 'GET' || req.method === 'HEAD') && req.path === '/openapi.json') {
        res.locals.route = documentRoute;
        res.type('application/json').send(JSON.stringify(document()));
        return;
      }
      routes(req, res, next);
    },
  };
}
