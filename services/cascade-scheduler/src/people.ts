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
    const address = request.address ? await this.address(request.organizationId, request.address, 'address') : '';
    if (!request.address) await this.deps.profiles.getSendingProfile(request.organizationId);
    return listSuppressions(this.deps.pool, { ...request, address });
  }

  async addSuppression(request: schedulerV1.AddSuppressionRequest): Promise<schedulerV1.AddSuppressionResponse> {
    return addSuppression(this.deps.pool, { ...request, address: await this.address(request.organizationId, request.address, '/address') });
  }

  async removeSuppression(request: schedulerV1.RemoveSuppressionRequest): Promise<schedulerV1.RemoveSuppressionResponse> {
    return removeSuppression(this.deps.pool, { ...request, address: await this.address(request.organizationId, request.address, 'address') });
  }

  async exportPerson(request: schedulerV1.ExportPersonRequest): Promise<schedulerV1.ExportPersonResponse> {
    if (!request.email && !request.phone) throw new InvalidError([{ parameter: 'email', detail: 'an email address or a phone number (or both)' }]);
    const email = request.email ? await this.address(request.organizationId, request.email, 'email') : '';
    const phone = request.phone ? await this.address(request.organizationId, request.phone, 'phone') : '';
    return exportPerson(this.deps.pool, { organizationId: request.organizationId, email, phone });
  }

  /** `where` is a JSON pointer (a body field) or a parameter name. */
  private async address(organizationId: string, raw: string, where: string): Promise<string> {
    const { organization } = await this.deps.profiles.getSendingProfile(organizationId);
    const address = normalizeAddress(raw, organization.defaultRegion);
    if (address) return address;
    const detail = 'an email address or a valid phone number';
    throw new InvalidError([where.startsWith('/') ? { pointer: where, detail } : { parameter: where, detail }]);
  }
}
