import { AppError, inTransaction, uuidv7, type Pool } from '@rrs/runtime';

export interface FlowStep {
  order: number;
  channel: string;
  delayMinutes: number;
}

export interface Flow {
  id: string;
  organizationId: string;
  name: string;
  isDefault: boolean;
  steps: FlowStep[];
}

export class Flows {
  constructor(private readonly pool: Pool) {}

  /** Creates a flow; making it the default takes the default mark from the previous one atomically. */
  async create(input: { organizationId: string; name: string; steps: Array<Omit<FlowStep, 'order'> & { order?: number }>; isDefault: boolean }): Promise<Flow> {
    const steps = validateSteps(input.name, input.steps);
    return inTransaction(this.pool, async (client) => {
      const id = uuidv7();
      if (input.isDefault) await client.query('UPDATE flows SET is_default = false, updated_at = now() WHERE organization_id = $1 AND is_default', [input.organizationId]);
      await client.query('INSERT INTO flows (id, organization_id, name, is_default) VALUES ($1, $2, $3, $4)', [id, input.organizationId, input.name, input.isDefault]);
      await client.query(
        `INSERT INTO flow_steps (flow_id, step_order, channel, delay_minutes)
         SELECT $1, * FROM unnest($2::int[], $3::text[], $4::int[])`,
        [id, steps.map((s) => s.order), steps.map((s) => s.channel), steps.map((s) => s.delayMinutes)],
      );
      return { id, organizationId: input.organizationId, name: input.name, isDefault: input.isDefault, steps };
    });
  }

  /** Replaces the name and steps. Running cascades keep the steps they started with (snapshotted per recipient). */
  async update(input: { organizationId: string; id: string; name: string; steps: Array<Omit<FlowStep, 'order'> & { order?: number }> }): Promise<Flow> {
    const steps = validateSteps(input.name, input.steps);
    await inTransaction(this.pool, async (client) => {
      const { rowCount } = await client.query('UPDATE flows SET name = $3, updated_at = now() WHERE organization_id = $1 AND id = $2', [input.organizationId, input.id, input.name]);
      if (!rowCount) throw new AppError(404, 'not_found', 'flow not found');
      await client.query('DELETE FROM flow_steps WHERE flow_id = $1', [input.id]);
      await client.query(
        `INSERT INTO flow_steps (flow_id, step_order, channel, delay_minutes)
         SELECT $1, * FROM unnest($2::int[], $3::text[], $4::int[])`,
        [input.id, steps.map((s) => s.order), steps.map((s) => s.channel), steps.map((s) => s.delayMinutes)],
      );
    });
    return this.get(input.organizationId, input.id);
  }

  async setDefault(organizationId: string, id: string): Promise<Flow> {
    await inTransaction(this.pool, async (client) => {
      const { rowCount } = await client.query('SELECT 1 FROM flows WHERE organization_id = $1 AND id = $2 FOR UPDATE', [organizationId, id]);
      if (!rowCount) throw new AppError(404, 'not_found', 'flow not found');
      await client.query('UPDATE flows SET is_default = false, updated_at = now() WHERE organization_id = $1 AND is_default AND id <> $2', [organizationId, id]);
      await client.query('UPDATE flows SET is_default = true, updated_at = now() WHERE id = $1', [id]);
    });
    return this.get(organizationId, id);
  }

  /** The flow, or 404 `not_found` when it does not exist or belongs to another organization. */
  async get(organizationId: string, id: string): Promise<Flow> {
    if (!UUID.test(id)) throw new AppError(404, 'not_found', 'flow not found');
    const flow = (await this.list(organizationId, id))[0];
    if (!flow) throw new AppError(404, 'not_found', 'flow not found');
    return flow;
  }

  /** The organization's default flow, or 404 `not_found` when it has none. */
  async getDefault(organizationId: string): Promise<Flow> {
    const flow = (await this.list(organizationId)).find((f) => f.isDefault);
    if (!flow) throw new AppError(404, 'not_found', 'the organization has no default flow; pass flowId or channel');
    return flow;
  }

  async list(organizationId: string, onlyId?: string): Promise<Flow[]> {
    const { rows } = await this.pool.query<Omit<Flow, 'steps'> & { steps: FlowStep[] }>(
      `SELECT f.id, f.organization_id AS "organizationId", f.name, f.is_default AS "isDefault",
              coalesce(json_agg(json_build_object('order', s.step_order, 'channel', s.channel, 'delayMinutes', s.delay_minutes)
                       ORDER BY s.step_order) FILTER (WHERE s.flow_id IS NOT NULL), '[]') AS steps
         FROM flows f LEFT JOIN flow_steps s ON s.flow_id = f.id
        WHERE f.organization_id = $1 AND ($2::uuid IS NULL OR f.id = $2)
        GROUP BY f.id ORDER BY f.is_default DESC, f.created_at, f.id`,
      [organizationId, onlyId ?? null],
    );
    return rows;
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const MAX_FLOW_STEPS = 10;
const CHANNEL_KEY = /^[A-Z][A-Z0-9_]*$/;

function validateSteps(name: string, steps: Array<Omit<FlowStep, 'order'> & { order?: number }>): FlowStep[] {
  const errors: Array<{ pointer: string; detail: string }> = [];
  if (!name.trim()) errors.push({ pointer: '/name', detail: 'a flow needs a name' });
  if (steps.length === 0 || steps.length > MAX_FLOW_STEPS) errors.push({ pointer: '/steps', detail: `a flow has 1 to ${MAX_FLOW_STEPS} steps` });
  const out = steps.map((s, i) => {
    const channel = s.channel.toUpperCase();
    if (!CHANNEL_KEY.test(channel)) errors.push({ pointer: `/steps/${i}/channel`, detail: 'not a channel key' });
    if (!Number.isInteger(s.delayMinutes) || s.delayMinutes < 0 || s.delayMinutes > 525_600) errors.push({ pointer: `/steps/${i}/delayMinutes`, detail: 'an integer from 0 to 525600' });
    return { order: i + 1, channel, delayMinutes: s.delayMinutes };
  });
  if (errors.length) throw new AppError(400, 'invalid_request', 'invalid flow', { details: { errors } });
  return out;
}
