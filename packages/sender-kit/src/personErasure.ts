import { consumePersonErasures, type ErasedPerson } from '@rrs/proto';
import { sqlArray, type Bus, type Logger, type Pool, type Subscription } from '@rrs/runtime';
import type { SinkOutbox } from './sink';

/**
 * A person's erasure in a sender's schema (docs/customer-respect.md, "Erasure in every service"): the
 * send log keeps its rows (they stop a redelivered step from being sent twice; step id, outcome and
 * provider name nobody) without the address they went to, and the dead letters of those steps (the
 * whole message, with name and address) are deleted; the dev inbox forgets their messages. Idempotent.
 */
export async function eraseSends(pool: Pool, erased: ErasedPerson, outbox?: SinkOutbox): Promise<{ sendLog: number; deadLetters: number }> {
  outbox?.forget(erased);
  if (erased.stepIds.length === 0) return { sendLog: 0, deadLetters: 0 };
  const ids = sqlArray(erased.stepIds);
  const sendLog = await pool.query(`UPDATE send_log SET address = NULL WHERE step_id = ANY($1::text[]) AND address IS NOT NULL`, [ids]);
  const deadLetters = await pool.query(`DELETE FROM dead_letters WHERE step_id = ANY($1::text[])`, [ids]);
  return { sendLog: sendLog.rowCount ?? 0, deadLetters: deadLetters.rowCount ?? 0 };
}

/**
 * The sender's consumer of erasures (durable `<service>-erasures`): its send log, then whatever else the
 * sender holds about the person (`eraseMore`, e.g. channel-messenger's bot chats).
 */
export function consumeSenderErasures(options: {
  bus: Bus;
  pool: Pool;
  service: string;
  logger: Logger;
  outbox?: SinkOutbox;
  eraseMore?: (erased: ErasedPerson, pool: Pool) => Promise<void>;
}): Promise<Subscription> {
  return consumePersonErasures(options.bus, { service: options.service, logger: options.logger }, async (erased) => {
    const counts = await eraseSends(options.pool, erased, options.outbox);
    await options.eraseMore?.(erased, options.pool);
    options.logger.info({ erasureId: erased.erasureId, organizationId: erased.organizationId, ...counts }, 'person erased from the send log');
  });
}
