import type { IdempotencyRequest } from '@rrs/idempotency';
import type { schedulerV1 } from '@rrs/proto';
import { cancelCascade, cancelCascadesByExternalId } from './cancelCascade';
import { startContactCascade, type ContactCascadeInput } from './contactCascade';
import { listCascades, type ListCascadesInput } from './listCascades';
import { readCascade } from './readCascade';
import { startCascade, type IntakeDeps, type StartCascadeInput, type StartCascadeResult } from './startCascade';

/** The cascade side of the scheduler, one method per use case: start (intake, with or without a contact to save), read, list, cancel. */
export class Cascades {
  constructor(private readonly deps: IntakeDeps & { minuteMs: number }) {}

  start(input: StartCascadeInput, idempotency?: IdempotencyRequest): Promise<{ result: StartCascadeResult; replayed: boolean }> {
    return startCascade(this.deps, input, idempotency);
  }

  /** Saves the contact, then starts its cascade with it as the one recipient (contactCascade.ts). */
  startForContact(input: ContactCascadeInput, idempotency?: IdempotencyRequest) {
    return startContactCascade(this.deps, input, idempotency);
  }

  /** `not_found` for an unknown id or another organization's cascade. */
  get(organizationId: string, id: string): Promise<schedulerV1.Cascade> {
    return readCascade(this.deps.pool, organizationId, id);
  }

  /** Newest first, one page at a time, optionally one externalId or status only. */
  list(input: ListCascadesInput): Promise<schedulerV1.ListCascadesResponse> {
    return listCascades(this.deps.pool, input);
  }

  /** Finishes every recipient not finished yet with reason `canceled`; answers how many, and the cascade. */
  cancel(organizationId: string, id: string, idempotency?: IdempotencyRequest) {
    return cancelCascade(this.deps.pool, this.deps.minuteMs, organizationId, id, idempotency);
  }

  /** Cancels every running cascade of the organization with this externalId; answers their ids. */
  cancelByExternalId(organizationId: string, externalId: string, idempotency?: IdempotencyRequest) {
    return cancelCascadesByExternalId(this.deps.pool, this.deps.minuteMs, organizationId, externalId, idempotency);
  }
}
