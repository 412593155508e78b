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
    if (input.steps.length === 0) throw new AppError(400, 'invalid_request', 'a flow needs at least one step');
    const steps = input.steps.map((s, i) => ({ order: i + 1, channel: s.channel.toUpperCase(), delayMinutes: s.delayMinutes }));
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

  async list(organizationId: string): Promise<Flow[]> {
    const { rows } = await this.pool.query<Omit<Flow, 'steps'> & { steps: FlowStep[] }>(
      `SELECT f.id, f.organization_id AS "organizationId", f.name, f.is_default AS "isDefault",
              coalesce(json_agg(json_build_object('order', s.step_order, 'channel', s.channel, 'delayMinutes', s.delay_minutes)
                       ORDER BY s.step_order) FILTER (WHERE s.flow_id IS NOT NULL), '[]') AS steps
         FROM flows f LEFT JOIN flow_steps s ON s.flow_id = f.id
        WHERE f.organization_id = $1
        GROUP BY f.id ORDER BY f.is_default DESC, f.created_at, f.id`,
      [organizationId],
    );
    return rows;
  }
}
