import { templateChannelOf, type busV1 } from '@rrs/proto';
import type { Dispatch } from './engine';
import { tokenUrl } from './links';
import type { LoadedRecipient } from './recipientStore';

/**
 * The step id a sender sees: the step's own id on its flow channel, `<id>.<CHANNEL>` on a reroute hop.
 * A sender's send log is keyed by step id ("never send a step twice"); a hop to another channel is
 * another send, which must not find the previous channel's recorded outcome.
 */
export function senderStepId(dispatch: Dispatch): string {
  return dispatch.step.reroutes.length === 0 ? dispatch.step.id : `${dispatch.step.id}.${dispatch.channel}`;
}

/** The `steps.<channel>` message of a dispatch: everything the sender needs, rendered from the snapshots. */
export function stepDueMessage(state: LoadedRecipient, dispatch: Dispatch, publicBaseUrl: string, now: Date): busV1.StepDue {
  const { recipient, meta } = state;
  // Claimed recipients are loaded with their token (loadRecipients with `token`).
  if (!meta.token) throw new Error(`recipient ${recipient.id} was loaded without its review link token`);
  // The channel the message goes out on (after any reroute) picks the template: MAX and TELEGRAM write with SMS's.
  const template = meta.templates[templateChannelOf(dispatch.channel)] ?? (dispatch.channel !== 'EMAIL' ? meta.templates.SMS : undefined) ?? { subject: '', body: '' };
  return {
    stepId: senderStepId(dispatch),
    attemptId: dispatch.attemptId,
    attempt: dispatch.step.attempt,
    organizationId: recipient.organizationId,
    cascadeId: recipient.cascadeId,
    recipientId: recipient.id,
    channel: dispatch.channel,
    recipient: { name: recipient.name, email: recipient.email, phone: recipient.phone },
    location: meta.location,
    template: { subject: template.subject, body: template.body },
    reviewUrl: tokenUrl(publicBaseUrl, 'r', meta.token),
    unsubscribeUrl: tokenUrl(publicBaseUrl, 'u', meta.token),
    locale: meta.locale,
    dueAt: dispatch.step.dueAt ?? now,
    dispatchedAt: now,
  };
}
