import { CHANNEL_KEY_PATTERN, isResponseWindowMinutes, MAX_FLOW_STEPS, MAX_RESPONSE_WINDOW_MINUTES, type schedulerV1 } from '@rrs/proto';
import { InvalidError, inTransaction, NotFoundError, uuidv7, type FieldProblem, type Pool, type PoolClient } from '@rrs/runtime';
import { isUuid } from './ids';

export type Flow = schedulerV1.Flow;
export type FlowStep = schedulerV1.FlowStep;

/** Steps as a request gives them: the order is their place in the list. */
type StepInput = Omit<FlowStep, 'order'> & { order?: number };

const MAX_DELAY_MINUTES = 525_600;

/** Flows: an organization's ordered channel steps with delays; at most one is its default. */
export class Flows {
  constructor(private readonly pool: Pool) {}

  /** Creates a flow; making it the default takes the default mark from the previous one atomically. */
  async create(input: { organizationId: string; name: string; steps: StepInput[]; isDefault: boolean; responseWindowMinutes?: number }): Promise<Flow> {
    const steps = validateSteps(input.name, input.steps, input.responseWindowMinutes);
    return inTransaction(this.pool, async (client) => {
      const id = uuidv7();
      if (input.isDefault) await client.query('UPDATE flows SET is_default = false, updated_at = now() WHERE organization_id = $1 AND is_default', [input.organizationId]);
      await client.query('INSERT INTO flows (id, organization_id, name, is_default, response_window_minutes) VALUES ($1, $2, $3, $4, $5)', [id, input.organizationId, input.name, input.isDefault, input.responseWindowMinutes ?? null]);
      await insertSteps(client, id, steps);
      return { id, organizationId: input.organizationId, name: input.name, isDefault: input.isDefault, steps, responseWindowMinutes: input.responseWindowMinutes };
    });
  }

  /** Replaces the name and steps. Running cascades keep the steps they started with (snapshotted per recipient). */
  async update(input: { organizationId: string; id: string; name: string; steps: StepInput[]; responseWindowMinutes?: number }): Promise<Flow> {
    const steps = validateSteps(input.name, input.steps, input.responseWindowMinutes);
    await inTransaction(this.pool, async (client) => {
      const { rowCount } = await client.query('UPDATE flows SET name = $3, response_window_minutes = $4, updated_at = now() WHERE organization_id = $1 AND id = $2', [input.organizationId, input.id, input.name, input.responseWindowMinutes ?? null]);
      if (!rowCount) throw new NotFoundError('flow');
      await client.query('DELETE FROM flow_steps WHERE flow_id = $1', [input.id]);
      await insertSteps(client, input.id, steps);
    });
    return this.get(input.organizationId, input.id);
  }

  async setDefault(organizationId: string, id: string): Promise<Flow> {
    await inTransaction(this.pool, async (client) => {
      const { rowCount } = await client.query('SELECT 1 FROM flows WHERE organization_id = $1 AND id = $2 FOR UPDATE', [organizationId, id]);
      if (!rowCount) throw new NotFoundError('flow');
      await client.query('UPDATE flows SET is_default = false, updated_at = now() WHERE organization_id = $1 AND is_default AND id <> $2', [organizationId, id]);
      await client.query('UPDATE flows SET is_default = true, updated_at = now() WHERE id = $1', [id]);
    });
    return this.get(organizationId, id);
  }

  /** The flow; `not_found` when it does not exist or belongs to another organization. */
  async get(organizationId: string, id: string): Promise<Flow> {
    const flow = isUuid(id) ? (await this.list(organizationId, id))[0] : undefined;
    if (!flow) throw new NotFoundError('flow', { details: { errors: [{ pointer: '/flowId', detail: 'no such flow in this organization' }] } });
    return flow;
  }

  /** The organization's default flow; `not_found` when it has none. */
  async getDefault(organizationId: string): Promise<Flow> {
    const flow = (await this.list(organizationId)).find((candidate) => candidate.isDefault);
    if (!flow) throw new NotFoundError('default flow', { message: 'the organization has no default flow; pass flowId or channel', details: { errors: [{ pointer: '/flowId', detail: 'no default flow; pass flowId' }] } });
    return flow;
  }

  async list(organizationId: string, onlyId?: string): Promise<Flow[]> {
    const { rows } = await this.pool.query<Flow & { responseWindowMinutes: number | null }>(
      `SELECT f.id, f.organization_id AS "organizationId", f.name, f.is_default AS "isDefault", f.response_window_minutes AS "responseWindowMinutes",
              coalesce(json_agg(json_build_object('order', s.step_order, 'channel', s.channel, 'delayMinutes', s.delay_minutes)
                       ORDER BY s.step_order) FILTER (WHERE s.flow_id IS NOT NULL), '[]') AS steps
         FROM flows f LEFT JOIN flow_steps s ON s.flow_id = f.id
        WHERE f.organization_id = $1 AND ($2::uuid IS NULL OR f.id = $2)
        GROUP BY f.id ORDER BY f.is_default DESC, f.created_at, f.id`,
      [organizationId, onlyId ?? null],
    );
    return rows.map((row) => ({ ...row, responseWindowMinutes: row.responseWindowMinutes ?? undefined }));
  }
}

async function insertSteps(client: PoolClient, flowId: string, steps: FlowStep[]): Promise<void> {
  await client.query(
    `INSERT INTO flow_steps (flow_id, step_order, channel, delay_minutes)
     SELECT $1, * FROM unnest($2::int[], $3::text[], $4::int[])`,
    [flowId, steps.map((step) => step.order), steps.map((step) => step.channel), steps.map((step) => step.delayMinutes)],
  );
}

/** A flow's name and steps, checked once here; channel keys are upper-cased, orders renumbered 1…n. */
function validateSteps(name: string, steps: StepInput[], responseWindowMinutes?: number): FlowStep[] {
  const problems: FieldProblem[] = [];
  if (responseWindowMinutes !== undefined && !isResponseWindowMinutes(responseWindowMinutes)) {
    problems.push({ pointer: '/responseWindowMinutes', detail: `an integer from 0 (finish when the last step goes out) to ${MAX_RESPONSE_WINDOW_MINUTES}` });
  }
  if (!name.trim()) problems.push({ pointer: '/name', detail: 'a flow needs a name' });
  if (steps.length === 0 || steps.length > MAX_FLOW_STEPS) problems.push({ pointer: '/steps', detail: `a flow has 1 to ${MAX_FLOW_STEPS} steps` });
  const checked = steps.map((step, i) => {
    const channel = step.channel.toUpperCase();
    if (!CHANNEL_KEY_PATTERN.test(channel)) problems.push({ pointer: `/steps/${i}/channel`, detail: 'not a channel key' });
    if (!Number.isInteger(step.delayMinutes) || step.delayMinutes < 0 || step.delayMinutes > MAX_DELAY_MINUTES) {
      problems.push({ pointer: `/steps/${i}/delayMinutes`, detail: `an integer from 0 to ${MAX_DELAY_MINUTES}` });
    }
    return { order: i + 1, channel, delayMinutes: step.delayMinutes };
  });
  if (problems.length) throw new InvalidError(problems, { message: 'invalid flow' });
  return checked;
}
