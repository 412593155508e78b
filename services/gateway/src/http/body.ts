import express, { type Request, type Response } from 'express';
import { DomainError } from '@rrs/runtime';
import { HttpError } from './errors';

/** The largest JSON body any API takes. */
export const BODY_LIMIT_BYTES = 1024 * 1024;
const JSON_TYPE = /^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i;

const jsonParser = express.json({ limit: BODY_LIMIT_BYTES, strict: true, type: () => true });

function hasBody(req: Request): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const length = req.headers['content-length'];
  return length !== undefined && length !== '0';
}

/**
 * The request's JSON body (an object or array), or undefined when none was sent. Refuses another media
 * type (415), more than 1 MB (413) and what is not JSON (400 `malformed_json`) before anything is parsed
 * further.
 */
export async function readJsonBody(req: Request, res: Response): Promise<unknown> {
  if (!hasBody(req)) return undefined;
  const type = req.headers['content-type'];
  if (!type || !JSON_TYPE.test(type)) {
    throw new HttpError(415, 'unsupported_media_type', 'send the body as `Content-Type: application/json`');
  }
  try {
    await new Promise<void>((resolve, reject) => jsonParser(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
  } catch (err) {
    throw bodyError(err) ?? err;
  }
  return req.body;
}

/** Turns body-parser failures (this reader's, or another parser's such as the review form's) into the API's problem codes. */
export function bodyError(err: unknown): DomainError | undefined {
  const type = (err as { type?: string } | null)?.type;
  switch (type) {
    case 'entity.too.large':
      return new HttpError(413, 'payload_too_large', 'the request body is larger than 1 MB', { cause: err });
    case 'entity.parse.failed':
      return new DomainError('invalid', 'malformed_json', 'the request body is not valid JSON (an object or array is expected)', { cause: err });
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new HttpError(415, 'unsupported_media_type', 'send the body as UTF-8 JSON', { cause: err });
    case 'request.aborted':
    case 'request.size.invalid':
      return new DomainError('invalid', 'malformed_json', 'the request body was incomplete', { cause: err });
    default:
      return undefined;
  }
}
