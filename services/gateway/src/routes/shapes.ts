/** JSON shapes more than one public resource answers with, and the conversions from gRPC values they share. */
import { z } from 'zod';
import type { schedulerV1 } from '@rrs/proto';

export const FlowStepJson = z.object({
  order: z.number().int().meta({ description: '1-based position in the flow.' }),
  channel: z.string().meta({ description: 'Channel key: `EMAIL`, `SMS`, `MAX`, `TELEGRAM`.' }),
  delayMinutes: z.number().int().meta({ description: 'Minutes after the last step actually sent to the recipient (step 1 goes at once).' }),
});

export const flowStepJson = (s: schedulerV1.FlowStep) => ({ order: s.order, channel: s.channel, delayMinutes: s.delayMinutes });

/** A time as ISO 8601, null when unset. */
export const isoOrNull = (d: Date | undefined): string | null => (d ? d.toISOString() : null);

/** proto3 has no null for strings: '' means unset. */
export const orNull = (s: string): string | null => (s === '' ? null : s);
