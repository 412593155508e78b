import type { Logger } from '@rrs/runtime';
import { isDomainError, unaryService } from '@rrs/runtime';
import { contactsV1, type SendWindow } from '@rrs/proto';
import { idempotencyFromMetadata } from '@rrs/idempotency';
import type { ApiKeyRecord, Directory, Location, Organization } from './directory';
import type { Contact, ContactBook } from './contactBook';
import type { Templates } from './templates';
import type { ChannelSettings } from './channels';
import type { SmsBalance } from './smsBalance';
import type { SendingProfiles } from './sendingProfile';
import type { Member, Members, Session } from './members';

export interface ContactsParts {
  directory: Directory;
  contacts: ContactBook;
  templates: Templates;
  channels: ChannelSettings;
  smsBalance: SmsBalance;
  members: Members;
  profiles: SendingProfiles;
}

/** proto3 leaves an unset field absent (undefined), where the domain says null. */
type AbsentForNull<T> = { [K in keyof T]: null extends T[K] ? Exclude<T[K], null> | undefined : T[K] };

function absentForNull<T extends object>(record: T): AbsentForNull<T> {
  return Object.fromEntries(Object.entries(record).map(([field, value]) => [field, value ?? undefined])) as AbsentForNull<T>;
}

const toSendWindow = (window: SendWindow | null): contactsV1.SendWindow | undefined => (window ? { start: window.start, end: window.end, days: window.days ?? [], channels: window.channels ?? [] } : undefined);
/** A setting in a request: absent = unchanged (or the default), present without a window = none. */
const fromSendWindowSetting = (setting: contactsV1.SendWindowSetting | undefined): SendWindow | null | undefined => (setting === undefined ? undefined : (setting.window ?? null));
const toOrganization = (organization: Organization): contactsV1.Organization => ({ ...organization, sendWindow: toSendWindow(organization.sendWindow) });
const toLocation = (location: Location): contactsV1.Location => ({ ...location, sendWindow: toSendWindow(location.sendWindow), createdAt: location.createdAt, updatedAt: location.updatedAt });
const toApiKey = (apiKey: ApiKeyRecord): contactsV1.ApiKey => absentForNull(apiKey);
const toContact = ({ attributes, ...contact }: Contact): contactsV1.Contact => ({ ...absentForNull(contact), attributesJson: JSON.stringify(attributes) });

const toMember = (member: Member): contactsV1.Member => ({ id: member.id, organizationId: member.organizationId, email: member.email, name: member.name, role: member.role, createdAt: member.createdAt });
const toSession = (session: Session): contactsV1.Session => ({ ...session });

const SERVICE_NAME = 'rrs.contacts.v1.ContactsService';

/** gRPC transport of the directory: maps messages to domain calls and back, nothing else. */
export function contactsGrpcService(parts: ContactsParts, logger: Logger) {
  const { directory, contacts, templates, channels, smsBalance, members, profiles } = parts;
  return {
    name: SERVICE_NAME,
    definition: contactsV1.ContactsServiceService,
    implementation: unaryService<contactsV1.ContactsServiceServer>(SERVICE_NAME, contactsV1.ContactsServiceService, {
      async authenticate(req) {
        const principal = await directory.authenticate(req.apiKey);
        return { organization: toOrganization(principal.organization), keyId: principal.keyId, scopes: principal.scopes };
      },
      async createOrganization(req) {
        return { organization: toOrganization(await directory.createOrganization({ ...req, sendWindow: fromSendWindowSetting(req.sendWindow), allowedCountries: req.allowedCountries?.countries })) };
      },
      async getOrganization(req) {
        return { organization: toOrganization(await directory.getOrganization(req.id)) };
      },
      async listOrganizations(req) {
        const page = await directory.listOrganizations({ limit: req.limit, after: req.after });
        return { organizations: page.organizations.map(toOrganization), nextAfter: page.nextAfter };
      },
      async updateOrganization(req) {
        const { id, sendWindow, allowedCountries, ...patch } = req;
        return { organization: toOrganization(await directory.updateOrganization(id, { ...patch, sendWindow: fromSendWindowSetting(sendWindow), allowedCountries: allowedCountries?.countries })) };
      },
      async issueApiKey(req, metadata) {
        const issued = await directory.issueApiKey(req, idempotencyFromMetadata(metadata, req.organizationId));
        return { apiKey: toApiKey(issued.apiKey), secret: issued.secret, idempotentReplayed: issued.replayed };
      },
      async listApiKeys(req) {
        return { apiKeys: (await directory.listApiKeys(req.organizationId)).map(toApiKey) };
      },
      async revokeApiKey(req) {
        return { apiKey: toApiKey(await directory.revokeApiKey(req.organizationId, req.id)) };
      },
      async createLocation(req) {
        return { location: toLocation(await directory.createLocation({ ...req, sendWindow: fromSendWindowSetting(req.sendWindow) })) };
      },
      async listLocations(req) {
        return { locations: (await directory.listLocations(req.organizationId)).map(toLocation) };
      },
      async getLocation(req) {
        return { location: toLocation(await directory.getLocation(req.organizationId, req.id)) };
      },
      async updateLocation(req) {
        const patch = { name: req.name, address: req.address, city: req.city, timeZone: req.timeZone, reviewLinks: req.replaceReviewLinks ? req.reviewLinks : undefined, sendWindow: fromSendWindowSetting(req.sendWindow) };
        return { location: toLocation(await directory.updateLocation(req.organizationId, req.id, patch)) };
      },
      async deleteLocation(req) {
        await directory.deleteLocation(req.organizationId, req.id);
        return {};
      },
      async upsertContact(req, metadata) {
        const upserted = await contacts.upsert(req, idempotencyFromMetadata(metadata, req.organizationId));
        // The cascade's location, read now (a replay too): the scheduler starting it asks nothing more.
        const location = req.startCascade && upserted.contact.locationId ? toLocation(await directory.getLocation(req.organizationId, upserted.contact.locationId)) : undefined;
        return { contact: toContact(upserted.contact), created: upserted.created, idempotentReplayed: upserted.replayed, location };
      },
      async getContact(req) {
        return { contact: toContact(await contacts.get(req.organizationId, req.id)) };
      },
      async erasePersonContacts(req) {
        return contacts.erasePerson(req);
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
        const { profile, location } = await profiles.read(req.organizationId, req.locationId);
        return { organization: toOrganization(profile.organization), templates: profile.templates, channels: profile.channels, location: location && toLocation(location) };
      },
      async debitSmsBalance(req) {
        return smsBalance.debit(req);
      },
      async debitSmsBalances(req) {
        const answers = await smsBalance.debitEach(req.debits);
        return {
          outcomes: answers.map((answer): contactsV1.DebitSmsBalanceOutcome =>
            isDomainError(answer) ? { outcome: { $case: 'error', error: { kind: answer.kind, code: answer.code, message: answer.message } } } : { outcome: { $case: 'debit', debit: answer } },
          ),
        };
      },
      async creditSmsBalance(req) {
        return smsBalance.credit(req);
      },
      async inviteMember(req, metadata) {
        const { invitation, token, replayed } = await members.invite(req, idempotencyFromMetadata(metadata, req.organizationId));
        return { invitation, token, idempotentReplayed: replayed };
      },
      async acceptInvitation(req) {
        const opened = await members.acceptInvitation(req);
        return { member: toMember(opened.member), session: toSession(opened.session), sessionToken: opened.sessionToken };
      },
      async signIn(req) {
        const opened = await members.signIn(req);
        return { member: toMember(opened.member), session: toSession(opened.session), sessionToken: opened.sessionToken };
      },
      async resolveSession(req) {
        const resolved = await members.resolveSession(req.sessionToken);
        return { member: toMember(resolved.member), session: toSession(resolved.session), organization: toOrganization(resolved.organization) };
      },
      async endSession(req) {
        await members.endSession(req.sessionToken);
        return {};
      },
      async startPasswordReset(req) {
        const started = await members.startPasswordReset(req);
        return { ...started, member: toMember(started.member) };
      },
      async requestPasswordReset(req) {
        const requested = await members.requestPasswordReset(req.email);
        return requested.found ? { ...requested, member: toMember(requested.member) } : { found: false, token: '', expiresAt: undefined, member: undefined };
      },
      async updateMemberRole(req) {
        return { member: toMember(await members.updateRole(req)) };
      },
      async removeMember(req) {
        return { member: toMember(await members.remove(req)) };
      },
      async listInvitations(req) {
        return { invitations: await members.listInvitations(req.organizationId) };
      },
      async revokeInvitation(req) {
        return { invitation: await members.revokeInvitation(req) };
      },
      async completePasswordReset(req) {
        const opened = await members.completePasswordReset(req);
        return { member: toMember(opened.member), session: toSession(opened.session), sessionToken: opened.sessionToken };
      },
      async listMembers(req) {
        return { members: (await members.listMembers(req.organizationId)).map(toMember) };
      },
    }, logger),
  };
}
