import type { GatewayClients } from '../src/clients';
import { accountApi } from '../src/account/api';
import { createSignInThrottle } from '../src/account/signInThrottle';
import { busSystemEmails } from '../src/account/systemEmails';
import { createLogger } from '@rrs/runtime';
import { serveApi } from '../src/http/api';
import { createRateLimiter, DEFAULT_RATE_LIMITS } from '../src/rateLimit';
import { exampleProblems } from './documentExamples';
import { lint } from './redocly';

describe('the account API OpenAPI document', () => {
  const doc = serveApi(accountApi({ clients: {} as GatewayClients, publicBaseUrl: 'https://reviews.example.com', rateLimiter: createRateLimiter({ config: DEFAULT_RATE_LIMITS, keyPrefix: 't:' }), signInThrottle: createSignInThrottle({ keyPrefix: 't:' }), systemEmails: busSystemEmails(undefined, 'https://reviews.example.com', createLogger({ service: 'test', level: 'silent' })) })).document();

  it('passes redocly lint (recommended-strict) with no problem', async () => {
    const result = await lint(doc);
    expect(result.problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
    expect(result.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);

  it('has an example for every request body, parameter, response and response header, each valid against its schema', () => {
    expect(exampleProblems(doc)).toEqual([]);
  });

  it('documents the session refusals of a state-changing call and the sign-in refusals, by code', () => {
    type Op = { responses: Record<string, { content?: Record<string, { schema: { allOf: Array<{ properties?: { code?: { enum: string[] } } }> } }> }> };
    const paths = doc.paths as Record<string, Record<string, Op>>;
    const codes = (op: Op, status: string) => op.responses[status].content!['application/problem+json'].schema.allOf[1].properties!.code!.enum;
    expect(codes(paths['/api-keys'].post, '403')).toEqual(['invalid_csrf_token', 'cross_origin_request', 'read_only_role']);
    expect(codes(paths['/api-keys'].post, '401')).toEqual(['missing_session', 'invalid_session']);
    expect(codes(paths['/session'].post, '401')).toEqual(['invalid_credentials']);
    expect(codes(paths['/session'].post, '429')).toEqual(['too_many_sign_in_attempts']);
  });
});
