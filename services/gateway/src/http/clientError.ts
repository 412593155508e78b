import type { Socket } from 'node:net';
import { randomUUID } from 'node:crypto';
import { STATUS_TITLES } from './errorCodes';
import { problemBody } from './problem';

/**
 * Requests node's HTTP parser refuses (bad header bytes, oversized headers) never reach express; by
 * default node answers them with an empty 400. This answers them as problem+json too, so a client sees
 * the same error shape for every refusal.
 */
export function clientErrorHandler(publicBaseUrl: string): (err: NodeJS.ErrnoException, socket: Socket) => void {
  return (err, socket) => answerClientError(err, socket, publicBaseUrl);
}

function answerClientError(err: NodeJS.ErrnoException, socket: Socket, publicBaseUrl: string): void {
  if (!socket.writable || (err.code === 'ECONNRESET')) {
    socket.destroy();
    return;
  }
  const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
  // Headers or body slower than the server's limits (HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS).
  const tooSlow = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
  const status = tooLarge ? 431 : tooSlow ? 408 : 400;
  const code = tooLarge ? 'headers_too_large' : tooSlow ? 'request_timeout' : 'malformed_http';
  const requestId = randomUUID();
  const detail = tooLarge ? 'the request headers are too large' : tooSlow ? 'the request did not arrive in time' : 'the request is not valid HTTP/1.1 (check header names and values)';
  const body = JSON.stringify(problemBody(status, code, detail, { publicBaseUrl, instance: '', requestId }));
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TITLES[status] ?? 'Bad Request'}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
  );
}
