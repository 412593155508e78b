import type { Logger } from '@rrs/runtime';
import { unaryService } from '@rrs/runtime';
import { contactsV1 } from '@rrs/proto';
import { idempotencyFromMetadata } from '@rrs/idempotency';
import type { ApiKeyRecord, Directory, Location, Organization } from './directory';
import type { Contact, ContactBook } from './contactBook';
import type { Templates } from './templates';
import type { ChannelSettings } from './channels';
import type { SmsBalance } from './smsBalance';
import { sendingProfile } from './sendingProfile';

export interface ContactsParts {
  directory: Directory;
  contacts: ContactBook;
  templates: Templates;
  channels: ChannelSettings;
  smsBalance: SmsBalance;
}

const toOrganization = (o: Organization): contactsV1.Organization => ({ ...o });
const toLocation = (l: Location): contactsV1.Location => ({ ...l, createdAt: l.createdAt, updatedAt: l.updatedAt });
const toApiKey = (k: ApiKeyRecord): contactsV1.ApiKey => ({ ...k, revokedAt: k.revokedAt ?? undefined });
const toContact = (c: Contact): contactsV1.Contact => ({
  id: c.id,
  organizationId: c.organizationId,
  externalId: c.externalId ?? undefined,
  name: c.name ?? undefined,
  email: c.email ?? undefined,
  phone: c.phone ?? undefined,
  locationId: c.locationId ?? undefined,
  consentAt: c.consentAt ?? undefined,
  attributesJson: JSON.stringify(c.attributes),
  createdAt: c.createdAt,
  updatedAt: c.updatedAt,
});

/** gRPC transport of the directory: maps messages to domain calls and back, nothing else. */
export function contactsGrpcService(parts: ContactsParts, logger: Logger) {
  const { directory, contacts, templates, channels, smsBalance } = parts;
  return {
    name: 'rrs.contacts.v1.ContactsService',
    definition: contactsV1.ContactsServiceService,
    implementation: unaryService<contactsV1.ContactsServiceServer>('rrs.contacts.v1.ContactsService', contactsV1.ContactsServiceService, {
      async authenticate(req) {
        const r = await directory.authenticate(req.apiKey);
        return { organization: toOrganization(r.organization), keyId: r.keyId, scopes: r.scopes };
      },
      async createOrganization(req) {
        return { organization: toOrganization(await directory.createOrganization(req)) };
      },
      async getOrganization(req) {
        return { organization: toOrganization(await directory.getOrganization(req.id)) };
      },
      async listOrganizations(req) {
        const r = await directory.listOrganizations({ limit: req.limit, after: req.after });
        return { organizations: r.organizations.map(toOrganization), nextAfter: r.nextAfter };
      },
      async updateOrganization(req) {
        const { id, ...patch } = req;
        return { organization: toOrganization(await directory.updateOrganization(id, patch)) };
      },
      async issueApiKey(req) {
        const r = await directory.issueApiKey(req);
        return { apiKey: toApiKey(r.apiKey), secret: r.secret };
      },
      async listApiKeys(req) {
        return { apiKeys: (await directory.listApiKeys(req.organizationId)).map(toApiKey) };
      },
      async revokeApiKey(req) {
        return { apiKey: toApiKey(await directory.revokeApiKey(req.organizationId, req.id)) };
      },
      async createLocation(req) {
        return { location: toLocation(await directory.createLocation(req)) };
      },
      async listLocations(req) {
        return { locations: (await directory.listLocations(req.organizationId)).map(toLocation) };
      },
      async getLocation(req) {
        return { location: toLocation(await directory.getLocation(req.organizationId, req.id)) };
      },
      async updateLocation(req) {
        const patch = { name: req.name, address: req.address, city: req.city, timeZone: req.timeZone, reviewLinks: req.replaceReviewLinks ? req.reviewLinks : undefined };
        return { location: toLocation(await directory.updateLocation(req.organizationId, req.id, patch)) };
      },
      async deleteLocation(req) {
        await directory.deleteLocation(req.organizationId, req.id);
        return {};
      },
      async upsertContact(req, metadata) {
        const r = await contacts.upsert(req, idempotencyFromMetadata(metadata, req.organizationId));
        return { contact: toContact(r.contact), created: r.created, idempotentReplayed: r.replayed };
      },
      async getContact(req) {
        return { contact: toContact(await contacts.get(req.organizationId, req.id)) };
      },
      async listTemplates(req) {
        return { templates: await templates.list(req.organizationId) };
      },
      async setTemplate(req) {
        return { template: await templates.set(req) };
      },
      async resetTemplate(req) {
        return { template: await templates.reset(req.organizationId, req.channel) };
      },
      async listChannelConfigurations(req) {
        return { channels: await channels.list(req.organizationId) };
      },
      async setChannelConfiguration(req) {
        return { channel: await channels.set(req) };
      },
      async getSendingProfile(req) {
        const p = await sendingProfile(parts, req.organizationId);
        return { organization: toOrganization(p.organization), templates: p.templates, channels: p.channels };
      },
      async debitSmsBalance(req) {
        return smsBalance.debit(req);
      },
      async creditSmsBalance(req) {
        return smsBalance.credit(req);
      },
    }, logger),
  };
}
