import { z } from 'zod';
import { BOT_CHANNELS, type schedulerV1 } from '@rrs/proto';
import type { GatewayClients } from '../clients';
import { defineRoute, type Route } from '../http/route';
import { ChannelKey, SuppressionSource } from '../routes/enums';
import { EXAMPLE_IDS } from '../routes/shapes';

/*
 * The organization's people as the customer-respect rules see them (docs/customer-respect.md): the
 * opt-out ledger (list, add, remove suppressions) and the per-person evidence export. Transport only:
 * the scheduler owns the ledgers and reads every address (an email lower-case, a phone in E.164 with the
 * organization's region).
 */

const OrgParams = z.object({ organizationId: z.string().min(1).max(64).meta({ examples: [EXAMPLE_IDS.organization] }) });
const Address = z.string().min(1).max(254).meta({ description: "An email address or a phone number (any format; read in the organization's region)." });

const Suppression = z.object({
  address: z.string().meta({ description: 'Lower-case email or E.164 phone.' }),
  channel: z.union([ChannelKey, z.literal('')]).meta({ description: 'The channel the opt-out came through; empty when added by the operator.' }),
  source: SuppressionSource,
  recipientId: z.string().nullable().meta({ description: 'The cascade recipient whose link or message it came from.' }),
  note: z.string(),
  createdAt: z.string(),
});
const EXAMPLE_SUPPRESSION: z.infer<typeof Suppression> = { address: 'anna@example.com', channel: 'EMAIL', source: 'one_click', recipientId: EXAMPLE_IDS.recipient, note: '', createdAt: '2026-05-02T08:30:00.000Z' };

const iso = (d: Date | undefined) => (d ? d.toISOString() : null);
const suppressionJson = (s: schedulerV1.Suppression) => ({
  address: s.address, channel: s.channel, source: s.source as z.infer<typeof SuppressionSource>, recipientId: s.recipientId || null, note: s.note, createdAt: iso(s.createdAt) ?? '',
});

const PersonExport = z.object({
  addresses: z.array(z.string()).meta({ description: 'The addresses looked up, as the ledgers key them.' }),
  consents: z.array(z.object({
    cascadeId: z.string(), recipientId: z.string(),
    consentAt: z.string().nullable().meta({ description: 'The consent the request carried; null = none given.' }),
    recordedAt: z.string().meta({ description: 'When the request was accepted.' }),
  })),
  suppressions: z.array(Suppression),
  messages: z.array(z.object({
    cascadeId: z.string(), recipientId: z.string(), stepOrder: z.number().int(), channel: ChannelKey, address: z.string(), status: z.string(), reason: z.string().nullable(),
    sentAt: z.string(), deliveredAt: z.string().nullable(),
  })).meta({ description: 'Every message sent to the person, in the order sent.' }),
  ratings: z.array(z.object({
    reviewRequestId: z.string(), cascadeId: z.string().nullable(), rating: z.number().int(), feedback: z.string().nullable(), ratedAt: z.string(),
    publicLinksShown: z.array(z.object({ provider: z.string(), url: z.string() })).meta({ description: 'The public review links the page showed with the rating (every rater sees them).' }),
    publicLinksShownAt: z.string().nullable(),
  })),
  lastSentAt: z.string().nullable().meta({ description: 'The cooldown ledger: when a review request last went out to the person.' }),
  lastRatedAt: z.string().nullable().meta({ description: 'The cooldown ledger: when the person last rated.' }),
  botLinks: z.array(z.object({
    channel: z.enum(BOT_CHANNELS), reviewRequestId: z.string().meta({ description: "The review request whose thank-you page offered the link." }),
    linkedAt: z.string(), chatId: z.string().nullable().meta({ description: "The bot's chat with the person; null when not recorded." }),
  })).meta({ description: 'The official messenger bots the person linked to themselves (claimed link codes), in the order linked.' }),
});

const EXAMPLE_EXPORT: z.infer<typeof PersonExport> = {
  addresses: ['anna@example.com', '+79161234567'],
  consents: [{ cascadeId: EXAMPLE_IDS.cascade, recipientId: EXAMPLE_IDS.recipient, consentAt: '2026-04-30T07:00:00.000Z', recordedAt: '2026-05-01T12:00:00.000Z' }],
  suppressions: [EXAMPLE_SUPPRESSION],
  messages: [{ cascadeId: EXAMPLE_IDS.cascade, recipientId: EXAMPLE_IDS.recipient, stepOrder: 1, channel: 'EMAIL', address: 'anna@example.com', status: 'sent', reason: null, sentAt: '2026-05-01T12:00:01.200Z', deliveredAt: null }],
  ratings: [{
    reviewRequestId: EXAMPLE_IDS.reviewRequest, cascadeId: EXAMPLE_IDS.cascade, rating: 2, feedback: 'Cold coffee', ratedAt: '2026-05-01T18:00:00.000Z',
    publicLinksShown: [{ provider: 'yandex', url: 'https://yandex.ru/maps/org/1/reviews/' }], publicLinksShownAt: '2026-05-01T18:00:00.000Z',
  }],
  lastSentAt: '2026-05-01T12:00:01.200Z',
  lastRatedAt: '2026-05-01T18:00:00.000Z',
  botLinks: [{ channel: 'TELEGRAM', reviewRequestId: EXAMPLE_IDS.reviewRequest, linkedAt: '2026-05-01T18:01:00.000Z', chatId: '123456789' }],
};

function exportJson(person: schedulerV1.ExportPersonResponse): z.infer<typeof PersonExport> {
  return {
    addresses: person.addresses,
    consents: person.consents.map((c) => ({ cascadeId: c.cascadeId, recipientId: c.recipientId, consentAt: iso(c.consentAt), recordedAt: iso(c.recordedAt) ?? '' })),
    suppressions: person.suppressions.map(suppressionJson),
    messages: person.messages.map((m) => ({
      cascadeId: m.cascadeId, recipientId: m.recipientId, stepOrder: m.stepOrder, channel: m.channel, address: m.address, status: m.status, reason: m.reason || null,
      sentAt: iso(m.sentAt) ?? '', deliveredAt: iso(m.deliveredAt),
    })),
    ratings: person.ratings.map((r) => ({
      reviewRequestId: r.reviewRequestId, cascadeId: r.cascadeId || null, rating: r.rating, feedback: r.feedback || null, ratedAt: iso(r.ratedAt) ?? '',
      publicLinksShown: r.publicLinksShown.map((link) => ({ provider: link.provider, url: link.url })), publicLinksShownAt: iso(r.publicLinksShownAt),
    })),
    lastSentAt: iso(person.lastSentAt),
    lastRatedAt: iso(person.lastRatedAt),
    botLinks: person.botLinks.map((link) => ({ channel: link.channel as (typeof BOT_CHANNELS)[number], reviewRequestId: link.reviewRequestId, linkedAt: iso(link.linkedAt) ?? '', chatId: link.chatId || null })),
  };
}

export function peopleRoutes(clients: Pick<GatewayClients, 'scheduler'>): Route[] {
  const { scheduler } = clients;
  return [
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/suppressions', operationId: 'listSuppressions', summary: 'List the opt-out ledger', tags: ['people'], auth: 'adminToken',
      description: 'Addresses that receive nothing more from the organization, on any channel, in address order; pass `nextAfter` as `after` for the next page.',
      request: {
        params: OrgParams,
        query: z.object({
          address: Address.optional().meta({ description: 'Only this address.', examples: ['anna@example.com'] }),
          limit: z.coerce.number().int().min(1).max(500).optional().meta({ description: 'Page size, 1 to 500 (default 100).', examples: [100] }),
          after: z.string().max(254).optional().meta({ description: '`nextAfter` of the previous page.', examples: ['+79161234567'] }),
        }),
      },
      responses: { 200: { description: 'One page of the ledger.', body: z.object({ suppressions: z.array(Suppression), nextAfter: z.string().nullable() }), example: { suppressions: [EXAMPLE_SUPPRESSION], nextAfter: null } } },
      handler: async ({ params, query, metadata }) => {
        const r = await scheduler.listSuppressions({ organizationId: params.organizationId, address: query.address ?? '', limit: query.limit ?? 0, after: query.after ?? '' }, { metadata });
        return { body: { suppressions: r.suppressions.map(suppressionJson), nextAfter: r.nextAfter || null } };
      },
    }),
    defineRoute({
      method: 'POST', path: '/organizations/{organizationId}/suppressions', operationId: 'addSuppression', summary: 'Add an address to the opt-out ledger', tags: ['people'], auth: 'adminToken',
      description: 'For an opt-out received elsewhere (by phone, at the counter). When the address was already suppressed the earlier record is kept and returned with `created: false`.',
      request: { params: OrgParams, body: z.strictObject({ address: Address, note: z.string().max(500).optional().meta({ description: 'Why, for the record.' }) }) },
      responses: {
        201: {
          description: 'The address is suppressed.',
          body: z.object({ suppression: Suppression, created: z.boolean().meta({ description: 'False when it already was: `suppression` is the earlier record.' }) }),
          example: { suppression: { ...EXAMPLE_SUPPRESSION, channel: '', source: 'admin', recipientId: null, note: 'asked by phone' }, created: true },
        },
      },
      example: { body: { address: '+7 916 123-45-67', note: 'asked by phone' } },
      handler: async ({ params, body, metadata }) => {
        const r = await scheduler.addSuppression({ organizationId: params.organizationId, address: body.address, note: body.note ?? '' }, { metadata });
        return { body: { suppression: suppressionJson(r.suppression!), created: r.created } };
      },
    }),
    defineRoute({
      method: 'DELETE', path: '/organizations/{organizationId}/suppressions/{address}', operationId: 'removeSuppression', summary: 'Remove an address from the opt-out ledger', tags: ['people'], auth: 'adminToken',
      description: 'Only when the person asked to hear from the organization again. 404 when the address is not suppressed.',
      request: { params: OrgParams.extend({ address: Address.meta({ examples: ['anna@example.com'] }) }) },
      responses: { 204: { description: 'Removed.' } },
      handler: async ({ params, metadata }) => {
        await scheduler.removeSuppression({ organizationId: params.organizationId, address: params.address }, { metadata });
        return {};
      },
    }),
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/people/export', operationId: 'exportPerson', summary: "Export a person's consent and opt-out evidence", tags: ['people'], auth: 'adminToken',
      description: 'Everything the organization holds about one person, matched by email and/or phone across locations and cascades: the consent each request carried, the opt-outs with their source, every message sent and when, every rating with the public links shown beside it, and the cooldown ledger.',
      request: {
        params: OrgParams,
        query: z.object({
          email: Address.optional().meta({ description: "The person's email.", examples: ['anna@example.com'] }),
          phone: Address.optional().meta({ description: "The person's phone.", examples: ['+7 916 123-45-67'] }),
        }),
      },
      responses: { 200: { description: 'The evidence.', body: PersonExport, example: EXAMPLE_EXPORT } },
      example: { query: { email: 'anna@example.com' } },
      handler: async ({ params, query, metadata }) => {
        const r = await scheduler.exportPerson({ organizationId: params.organizationId, email: query.email ?? '', phone: query.phone ?? '' }, { metadata });
        return { body: exportJson(r) };
      },
    }),
  ];
}
