import type { schedulerV1 } from '@rrs/proto';
import { InvalidError, type Pool } from '@rrs/runtime';
import { addSuppression, listSuppressions, removeSuppression } from './optOutLedger';
import type { OrganizationProfiles } from './organizationProfiles';
import { exportPerson } from './personExport';
import { normalizeAddress } from './recipientInput';

/**
 * The organization's people as the customer-respect rules see them: the opt-out ledger and the
 * per-person export. Addresses are read here, once, as the ledgers key them (phones in the
 * organization's region); an unknown organization is `not_found`.
 */
export class People {
  constructor(private readonly deps: { pool: Pool; profiles: OrganizationProfiles }) {}

  async listSuppressions(request: schedulerV1.ListSuppressionsRequest): Promise<schedulerV1.ListSuppressionsResponse> {
    const read = await this.addressReader(request.organizationId);
    return listSuppressions(this.deps.pool, { ...request, address: request.address ? read(request.address, 'address') : '' });
  }

  async addSuppression(request: schedulerV1.AddSuppressionRequest): Promise<schedulerV1.AddSuppressionResponse> {
    const read = await this.addressReader(request.organizationId);
    return addSuppression(this.deps.pool, { ...request, address: read(request.address, '/address') });
  }

  async removeSuppression(request: schedulerV1.RemoveSuppressionRequest): Promise<schedulerV1.RemoveSuppressionResponse> {
    const read = await this.addressReader(request.organizationId);
    return removeSuppression(this.deps.pool, { ...request, address: read(request.address, 'address') });
  }

  async exportPerson(request: schedulerV1.ExportPersonRequest): Promise<schedulerV1.ExportPersonResponse> {
    if (!request.email && !request.phone) throw new InvalidError([{ parameter: 'email', detail: 'an email address or a phone number (or both)' }]);
    const read = await this.addressReader(request.organizationId);
    const email = request.email ? read(request.email, 'email') : '';
    const phone = request.phone ? read(request.phone, 'phone') : '';
    return exportPerson(this.deps.pool, { organizationId: request.organizationId, email, phone });
  }

  /**
   * Reads addresses in the organization's region (`not_found` for an unknown organization); one that is
   * neither an email nor a valid phone is `invalid` at `where`, a JSON pointer (a body field) or a parameter name.
   */
  private async addressReader(organizationId: string): Promise<(raw: string, where: string) => string> {
    const { organization } = await this.deps.profiles.getSendingProfile(organizationId);
    return (raw, where) => {
      const address = normalizeAddress(raw, organization.defaultRegion);
      if (address) return address;
      const detail = 'an email address or a valid phone number';
      throw new InvalidError([where.startsWith('/') ? { pointer: where, detail } : { parameter: where, detail }]);
    };
  }
}
