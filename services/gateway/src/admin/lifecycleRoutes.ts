import { z } from 'zod';
import type { schedulerV1 } from '@rrs/proto';
import type { GatewayClients } from '../clients';
import { defineRoute, type Route } from '../http/route';
import { EXAMPLE_IDS } from '../routes/shapes';

/*
 * The organization's data lifecycle (docs/customer-respect.md, "Data lifecycle"): how long the personal
 * data of finished recipients is kept, and the evidence of what erasures and retention rounds did.
 * Transport only: the scheduler validates and keeps both.
 */

const OrgParams = z.object({ organizationId: z.string().min(1).max(64).meta({ examples: [EXAMPLE_IDS.organization] }) });
const RetentionDays = z.number().int().min(30).max(3650).meta({ description: 'Days the personal data of a finished recipient is kept before it is anonymized, 30 to 3650 (default 365).', examples: [365] });
const DataRetention = z.object({ personalDataRetentionDays: RetentionDays });

const LifecycleAction = z.object({
  id: z.number().int().meta({ description: 'Increasing; pass the last one as `after` for the next page.' }),
  kind: z.enum(['erasure', 'retention']),
  requestId: z.string().nullable().meta({ description: "The erasure request's id; null for retention." }),
  subjectHashes: z.array(z.string()).meta({ description: "Keyed hashes (`hmac1:…`) of the erased person's addresses and external id: the person, without their data. Empty for retention." }),
  actor: z.string().meta({ description: 'Who asked: `api:<key id>`, `member:<id>`, `admin`, or `retention`.' }),
  counts: z.record(z.string(), z.number().int()).meta({ description: 'Rows anonymized or deleted, by table.' }),
  at: z.string(),
});
const EXAMPLE_ACTION: z.infer<typeof LifecycleAction> = {
  id: 1, kind: 'retention', requestId: null, subjectHashes: [], actor: 'retention', counts: { recipients: 500, review_requests: 500, feedback: 31 }, at: '2026-05-02T03:00:00.000Z',
};

const actionJson = (a: schedulerV1.LifecycleAction): z.infer<typeof LifecycleAction> => ({
  id: a.id, kind: a.kind as 'erasure' | 'retention', requestId: a.requestId || null, subjectHashes: a.subjectHashes, actor: a.actor, counts: a.counts, at: a.at ? a.at.toISOString() : '',
});

/** The console's privacy settings (account API, the session's organization): read by every member, changed by an owner or admin (the session gate refuses a viewer). */
export function accountLifecycleRoutes(clients: Pick<GatewayClients, 'scheduler'>): Route[] {
  const { scheduler } = clients;
  return [
    defineRoute({
      method: 'GET', path: '/data-retention', operationId: 'getDataRetention', summary: 'How long personal data is kept', tags: ['settings'], auth: 'session',
      responses: { 200: { description: 'The retention.', body: DataRetention, example: { personalDataRetentionDays: 365 } } },
      handler: async ({ principal, metadata }) => {
        const r = await scheduler.getDataRetention({ organizationId: principal.organization.id }, { metadata });
        return { body: { personalDataRetentionDays: r.retention!.personalDataRetentionDays } };
      },
    }),
    defineRoute({
      method: 'PUT', path: '/data-retention', operationId: 'setDataRetention', summary: 'Set how long personal data is kept', tags: ['settings'], auth: 'session',
      description: 'Recipients finished longer ago than this are anonymized by the next retention rounds (their ratings and the statistics stay). Owners and admins only.',
      request: { body: z.strictObject({ personalDataRetentionDays: RetentionDays }) },
      responses: { 200: { description: 'The retention now in effect.', body: DataRetention, example: { personalDataRetentionDays: 180 } } },
      example: { body: { personalDataRetentionDays: 180 } },
      handler: async ({ principal, body, metadata }) => {
        const r = await scheduler.setDataRetention({ organizationId: principal.organization.id, personalDataRetentionDays: body.personalDataRetentionDays }, { metadata });
        return { body: { personalDataRetentionDays: r.retention!.personalDataRetentionDays } };
      },
    }),
  ];
}

export function lifecycleRoutes(clients: Pick<GatewayClients, 'scheduler'>): Route[] {
  const { scheduler } = clients;
  return [
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/data-retention', operationId: 'getDataRetention', summary: 'How long personal data is kept', tags: ['people'], auth: 'adminToken',
      request: { params: OrgParams },
      responses: { 200: { description: 'The retention.', body: DataRetention, example: { personalDataRetentionDays: 365 } } },
      handler: async ({ params, metadata }) => {
        const r = await scheduler.getDataRetention({ organizationId: params.organizationId }, { metadata });
        return { body: { personalDataRetentionDays: r.retention!.personalDataRetentionDays } };
      },
    }),
    defineRoute({
      method: 'PUT', path: '/organizations/{organizationId}/data-retention', operationId: 'setDataRetention', summary: 'Set how long personal data is kept', tags: ['people'], auth: 'adminToken',
      description: 'Recipients finished longer ago than this are anonymized by the next retention rounds (their ratings and the statistics stay).',
      request: { params: OrgParams, body: z.strictObject({ personalDataRetentionDays: RetentionDays }) },
      responses: { 200: { description: 'The retention now in effect.', body: DataRetention, example: { personalDataRetentionDays: 180 } } },
      example: { body: { personalDataRetentionDays: 180 } },
      handler: async ({ params, body, metadata }) => {
        const r = await scheduler.setDataRetention({ organizationId: params.organizationId, personalDataRetentionDays: body.personalDataRetentionDays }, { metadata });
        return { body: { personalDataRetentionDays: r.retention!.personalDataRetentionDays } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/lifecycle-actions', operationId: 'listLifecycleActions', summary: 'Evidence of erasures and retention', tags: ['people'], auth: 'adminToken',
      description: 'What each erasure and each retention round did in the organization (the person by keyed hash, when, by whom, rows by table), oldest first.',
      request: {
        params: OrgParams,
        query: z.object({
          limit: z.coerce.number().int().min(1).max(500).optional().meta({ description: 'Page size, 1 to 500 (default 100).', examples: [100] }),
          after: z.coerce.number().int().min(0).optional().meta({ description: '`nextAfter` of the previous page.', examples: [100] }),
        }),
      },
      responses: { 200: { description: 'One page of the evidence.', body: z.object({ actions: z.array(LifecycleAction), nextAfter: z.number().int().nullable() }), example: { actions: [EXAMPLE_ACTION], nextAfter: null } } },
      handler: async ({ params, query, metadata }) => {
        const r = await scheduler.listLifecycleActions({ organizationId: params.organizationId, limit: query.limit ?? 0, after: query.after ?? 0 }, { metadata });
        return { body: { actions: r.actions.map(actionJson), nextAfter: r.nextAfter || null } };
      },
    }),
  ];
}
