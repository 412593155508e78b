import type { GatewayClients } from '../src/clients';
import { createLogger } from '@rrs/runtime';
import { adminApi } from '../src/admin/api';
import { createFailureLimiters } from '../src/addressLimits';
import { serveApi } from '../src/http/api';
import { exampleProblems } from './documentExamples';
import { lint } from './redocly';

describe('the admin API OpenAPI document', () => {
  const doc = serveApi(adminApi({} as GatewayClients, { tokens: ['adm_test_token_0123456789'], failures: createFailureLimiters({ keyPrefix: '' }).adminAuth, logger: createLogger({ service: 'test', level: 'silent' }), publicBaseUrl: 'https://reviews.example.com' })).document();

  it('passes redocly lint (recommended-strict) with no problem', async () => {
    const result = await lint(doc);
    expect(result.problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
    expect(result.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);

  it('has an example for every request body, parameter, response and response header, each valid against its schema', () => {
    expect(exampleProblems(doc)).toEqual([]);
  });

  it('lint does report a broken document (the check can fail)', async () => {
    const broken = JSON.parse(JSON.stringify(doc));
    delete broken.paths['/organizations'].post.operationId;
    expect((await lint(broken)).totals.errors).toBeGreaterThan(0);
  }, 60_000);

  it('lists the admin error codes per operation as enums', () => {
    const op = (doc.paths as Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: { allOf: Array<{ properties?: { code?: { enum: string[] } } }> } }> }> }>>)['/organizations'].post;
    expect(op.responses['401'].content!['application/problem+json'].schema.allOf[1].properties!.code!.enum).toEqual(['missing_admin_token', 'invalid_admin_token']);
    expect(op.responses['400'].content!['application/problem+json'].schema.allOf[1].properties!.code!.enum).toEqual(['invalid_request', 'malformed_json']);
  });
});
