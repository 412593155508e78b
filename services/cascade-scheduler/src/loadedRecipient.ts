import type { RecipientState } from './engine';

/** A recipient as the recipient store loads it (recipientStore.ts): its state for the engine and what its messages and events need. */
export interface RecipientMeta {
  cascadeExternalId: string | null;
  locationId: string;
  contactExternalId: string;
  reviewRequestId: string;
  locale: string;
  templates: Record<string, { subject: string; body: string }>;
  /** The personal link's token: loaded for dispatching (the message carries the link), not otherwise. */
  token?: string;
  location: { id: string; name: string; address: string; city: string };
  /** The trace context the cascade was started in (empty when untraced): headers of its messages. */
  traceContext: Record<string, string>;
}

export type LoadedRecipient = RecipientState & {
  meta: RecipientMeta;
  /** Holds the finish event back until then (the low-rating feedback window). */
  eventNotBefore?: Date;
};
