import type { Pool } from '@rrs/runtime';
import type { CrmClients } from './crm';
import { wonKeyOf, type CrmContact, type CrmDeal, type CrmKind } from './crm/types';
import { invalidPointers, type CascadeInput, type ContactInput, type ReviewServices } from './reviewServices';
import { locationOfDeal, type Connector } from './model';

/** What became of a deal's events. */
export interface DealOutcome {
  status: 'done' | 'ignored' | 'failed';
  /** started | duplicate | stopped | not_won | won_before_connector | deal_not_found | deal_without_contact | no_location */
  outcome: string;
  cascadeId?: string;
  /** For the connector's status, when the outcome is a problem the business should see. */
  problem?: { code: string; message: string };
}

/** The stage an event says the deal is in (amoCRM webhooks and reconciliation carry it), to skip API calls. */
export interface StageHint {
  pipelineId: string;
  stageId: string;
}

/**
 * Whether a deal reached its stage before the connector existed: history, not a new sale, even when it is
 * edited now. CRM times are whole seconds on the CRM's clock, so a minute of slack keeps a deal won right
 * after the connector was made from being taken for history.
 */
export function wonBeforeConnector(deal: Pick<CrmDeal, 'stageChangedAt'>, connector: Pick<Connector, 'activeSince'>): boolean {
  return deal.stageChangedAt !== null && deal.stageChangedAt.getTime() < connector.activeSince.getTime() - 60_000;
}

export const DEAL_NOUN: Record<CrmKind, string> = { amocrm: 'lead', bitrix24: 'deal' };
const CRM_NAME: Record<CrmKind, string> = { amocrm: 'amoCRM', bitrix24: 'Bitrix24' };

/**
 * A CRM contact's `externalId` in the directory: the CRM's id, prefixed so that CRMs (and the API's own
 * ids) never collide; a company asked in place of a contact is `<crm>:company:<id>`.
 */
export const contactExternalId = (kind: CrmKind, crmContactId: string, person: CrmContact['kind'] = 'contact') => `${kind}:${person}:${crmContactId}`;
export const cascadeExternalId = (kind: CrmKind, dealId: string) => `${kind}:${DEAL_NOUN[kind]}:${dealId}`;
/** The Idempotency-Key of a deal's cascade: a CRM retry, a duplicate event or a reconciliation all land on it. */
export const dealCascadeKey = (connectorId: string, dealId: string, wonKey: string) => `crm:${connectorId}:${dealId}:${wonKey}`;

async function existingCascade(pool: Pool, connectorId: string, dealId: string, wonKey: string): Promise<string | null> {
  const { rows } = await pool.query<{ cascade_id: string }>('SELECT cascade_id FROM deal_cascades WHERE connector_id = $1 AND deal_id = $2 AND won_key = $3', [connectorId, dealId, wonKey]);
  return rows[0]?.cascade_id ?? null;
}

export interface WonDealDeps {
  pool: Pool;
  crm: CrmClients;
  reviewServices: ReviewServices;
}

/**
 * The path of every deal event: a deal in a won stage of the connector, won after the connector was
 * made, gets one cascade per won stage; the CRM contact is upserted first (by its CRM id) and is the
 * recipient. Throws what is worth retrying (CRM and directory or scheduler outages, rate limits, refused tokens) and
 * what the directory or scheduler refused; DealOutcome for everything decided.
 */
export async function startCascadeForDeal(deps: WonDealDeps, connector: Connector, dealId: string, hint: StageHint | null): Promise<DealOutcome> {
  const { wonStages } = connector.settings;
  if (hint && connector.kind === 'amocrm') {
    // amoCRM's event names the stage: a stage that is not won, or a won deal already started, needs no API call.
    const hinted = wonKeyOf(connector.kind, { ...hint, stageSemantic: '' }, wonStages);
    if (!hinted) return { status: 'ignored', outcome: 'not_won' };
    const started = await existingCascade(deps.pool, connector.id, dealId, hinted);
    if (started) return { status: 'done', outcome: 'duplicate', cascadeId: started };
  }
  const crm = deps.crm.for(connector);
  const deal = await crm.getDeal(dealId);
  if (!deal) return { status: 'ignored', outcome: 'deal_not_found' };
  const wonKey = wonKeyOf(connector.kind, deal, wonStages);
  if (!wonKey) return { status: 'ignored', outcome: 'not_won' };
  if (wonBeforeConnector(deal, connector)) return { status: 'ignored', outcome: 'won_before_connector' };
  const started = await existingCascade(deps.pool, connector.id, deal.id, wonKey);
  if (started) return { status: 'done', outcome: 'duplicate', cascadeId: started };

  const noun = `${CRM_NAME[connector.kind]} ${DEAL_NOUN[connector.kind]} ${deal.id}`;
  const locationId = locationOfDeal(connector.settings, deal.fields);
  if (!locationId) {
    return { status: 'failed', outcome: 'no_location', problem: { code: 'no_location', message: `${noun}: its ${connector.settings.locationMapping?.field} value maps to no location, and the connector has no default location` } };
  }
  const crmContact = await crm.customerOf(deal);
  if (!crmContact) return { status: 'failed', outcome: 'deal_without_contact', problem: { code: 'deal_without_contact', message: `${noun} has no contact (nor a company) to ask` } };

  const key = dealCascadeKey(connector.id, deal.id, wonKey);
  const { contact, cascadeId, replayed } = await saveContactAndStart(
    deps.reviewServices,
    {
      organizationId: connector.organizationId,
      externalId: contactExternalId(connector.kind, crmContact.id, crmContact.kind),
      name: crmContact.name,
      email: crmContact.email,
      phone: crmContact.phone,
      locationId,
    },
    { flowId: connector.settings.flowId, externalId: cascadeExternalId(connector.kind, deal.id), name: noun },
    key,
  );
  await deps.pool.query(
    `INSERT INTO deal_cascades (connector_id, deal_id, won_key, organization_id, cascade_id, contact_id, crm_contact_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
    [connector.id, deal.id, wonKey, connector.organizationId, cascadeId, contact.id, crmContact.kind === 'contact' ? crmContact.id : `company:${crmContact.id}`],
  );
  return { status: 'done', outcome: replayed ? 'duplicate' : 'started', cascadeId };
}

/**
 * The contact saved and its cascade started. A phone or email the directory refuses (a CRM field holding
 * "call the office") is left out rather than losing the deal: the other one may still reach the customer.
 */
async function saveContactAndStart(reviewServices: ReviewServices, contact: ContactInput, cascade: CascadeInput, key: string): ReturnType<ReviewServices['saveContactAndStart']> {
  try {
    return await reviewServices.saveContactAndStart(contact, cascade, { contact: `${key}:contact`, cascade: key });
  } catch (err) {
    const pointers = invalidPointers(err);
    if (pointers.length === 0 || !pointers.every((p) => p === '/phone' || p === '/email')) throw err;
    const usable = { ...contact, phone: pointers.includes('/phone') ? '' : contact.phone, email: pointers.includes('/email') ? '' : contact.email };
    return reviewServices.saveContactAndStart(usable, cascade, { contact: `${key}:contact:retry`, cascade: key });
  }
}
