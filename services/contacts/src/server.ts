import type { Logger } from '@rrs/runtime';
import { unaryService } from '@rrs/runtime';
import { contactsV1 } from '@rrs/proto';
import type { Directory, Location, Organization } from './directory';

const toOrganization = (o: Organization): contactsV1.Organization => ({ ...o });
const toLocation = (l: Location): contactsV1.Location => ({ ...l });

/** gRPC transport of the directory: maps messages to domain calls and back, nothing else. */
export function contactsGrpcService(directory: Directory, logger: Logger) {
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
      async issueApiKey(req) {
        const r = await directory.issueApiKey(req);
        return { apiKey: { ...r.apiKey, revokedAt: r.apiKey.revokedAt ?? undefined }, secret: r.secret };
      },
      async createLocation(req) {
        return { location: toLocation(await directory.createLocation(req)) };
      },
      async listLocations(req) {
        return { locations: (await directory.listLocations(req.organizationId)).map(toLocation) };
      },
    }, logger),
  };
}
