/** The note written to a deal, in the organization's language (ru, else en). */

export interface NoteFacts {
  /** 1..5, null when the customer did not rate. */
  rating: number | null;
  feedback: string;
  /** rated | exhausted | unreachable | unsubscribed | canceled */
  reason: string;
  /** Why the connector canceled it (lostDeals.ts): `lost`, `left_won`; null otherwise. */
  stopReason?: string | null;
  eventType: string;
  eventId: string;
}

const REASONS: Record<'ru' | 'en', Record<string, string>> = {
  en: {
    rated: 'the customer rated',
    exhausted: 'no answer after the last message',
    unreachable: 'no email or phone to reach the customer',
    unsubscribed: 'the customer unsubscribed',
    canceled: 'the review request was canceled',
    canceled_lost: 'the review request was canceled: the deal was lost',
    canceled_left_won: 'the review request was canceled: the deal left its won stage',
  },
  ru: {
    rated: 'клиент поставил оценку',
    exhausted: 'нет ответа после последнего сообщения',
    unreachable: 'нет email или телефона клиента',
    unsubscribed: 'клиент отписался',
    canceled: 'запрос отзыва отменён',
    canceled_lost: 'запрос отзыва отменён: сделка проиграна',
    canceled_left_won: 'запрос отзыва отменён: сделка ушла с успешного этапа',
  },
};

const TEXT = {
  en: { title: 'Review request', late: 'Review request: rated after it finished', rating: 'Rating', none: 'not rated', feedback: 'Private feedback', outcome: 'Outcome' },
  ru: { title: 'Запрос отзыва', late: 'Запрос отзыва: оценка после завершения', rating: 'Оценка', none: 'нет оценки', feedback: 'Отзыв (не публикуется)', outcome: 'Итог' },
};

/** The tag that identifies the note of an event, so a retry can tell the note is already there. */
export const eventMarker = (eventId: string) => `[rrs:${eventId}]`;

const stars = (rating: number) => '★'.repeat(rating) + '☆'.repeat(5 - rating);

export function noteText(locale: string, f: NoteFacts): string {
  const lang = locale.toLowerCase().startsWith('ru') ? 'ru' : 'en';
  const text = TEXT[lang];
  const lines = [f.eventType === 'cascade.recipient.rated' ? text.late : text.title];
  lines.push(`${text.rating}: ${f.rating ? `${f.rating}/5 ${stars(f.rating)}` : text.none}`);
  if (f.feedback) lines.push(`${text.feedback}: ${f.feedback}`);
  const reason = f.reason === 'canceled' && f.stopReason ? `canceled_${f.stopReason}` : f.reason;
  lines.push(`${text.outcome}: ${REASONS[lang][reason] ?? REASONS[lang][f.reason] ?? f.reason}`);
  lines.push(eventMarker(f.eventId));
  return lines.join('\n');
}
