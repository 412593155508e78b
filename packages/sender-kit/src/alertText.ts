/*
 * The words of rating alerts and daily digests (docs/console.md, "Rating alerts"), shared by the email
 * (channel-email) and the staff chats' bots (channel-messenger), so both say the same thing. They go to
 * the organization's people only, never to the customer. Russian for `ru…`, else English; times in the
 * organization's zone.
 */

export interface AlertedRatingText {
  rating: number;
  feedback: string;
  customerName: string;
  locationName: string;
  ratedAt?: Date;
  /** The rating in the console's inbox. */
  link: string;
}

export interface DigestTotalsText {
  day: string;
  ratings: number;
  average: number;
  actionable: number;
  open: number;
  overdue: number;
}

const WORDS = {
  en: {
    alertSubject: (rating: number, place: string) => `${rating}★ at ${place}: act on it`,
    feedbackSubject: (place: string) => `Private feedback at ${place}`,
    alertIntro: (org: string) => `A customer of ${org} left a rating that needs you:`,
    customer: 'Customer',
    anonymous: 'not named',
    location: 'Location',
    rated: 'Rated',
    feedback: 'Feedback',
    noFeedback: 'No private feedback (yet).',
    open: 'Open it in the inbox',
    digestSubject: (org: string, day: string) => `${org}: ratings of ${day}`,
    digestIntro: (org: string, day: string) => `The ratings ${org} got on ${day}:`,
    digestTotals: (t: DigestTotalsText) =>
      `${t.ratings} rating${t.ratings === 1 ? '' : 's'}${t.ratings > 0 ? `, average ${t.average.toFixed(1)}★` : ''}; ${t.actionable} low or with feedback. In the inbox now: ${t.open} open, ${t.overdue} overdue.`,
    digestNone: 'No low rating or feedback that day.',
    openInbox: 'Open the inbox',
    why: (org: string) => `You get this because you are a member of ${org} in the review console; choose which alerts you get on its Alerts page.`,
  },
  ru: {
    alertSubject: (rating: number, place: string) => `${rating}★ в «${place}»: нужна реакция`,
    feedbackSubject: (place: string) => `Отзыв для компании в «${place}»`,
    alertIntro: (org: string) => `Клиент ${org} оставил оценку, на которую нужно отреагировать:`,
    customer: 'Клиент',
    anonymous: 'без имени',
    location: 'Точка',
    rated: 'Оценка поставлена',
    feedback: 'Отзыв',
    noFeedback: 'Отзыва для компании нет (пока).',
    open: 'Открыть во входящих',
    digestSubject: (org: string, day: string) => `${org}: оценки за ${day}`,
    digestIntro: (org: string, day: string) => `Оценки ${org} за ${day}:`,
    digestTotals: (t: DigestTotalsText) =>
      `Оценок: ${t.ratings}${t.ratings > 0 ? `, средняя ${t.average.toFixed(1)}★` : ''}; низких или с отзывом: ${t.actionable}. Во входящих сейчас: открытых ${t.open}, просроченных ${t.overdue}.`,
    digestNone: 'Низких оценок и отзывов в тот день не было.',
    openInbox: 'Открыть входящие',
    why: (org: string) => `Вы получаете это письмо как участник ${org} в консоли отзывов; какие уведомления получать, выбирается на странице «Уведомления».`,
  },
} as const;

export const alertWordsOf = (locale: string) => (locale.toLowerCase().startsWith('ru') ? WORDS.ru : WORDS.en);

const stars = (rating: number) => '★'.repeat(Math.max(0, Math.min(5, rating))) + '☆'.repeat(Math.max(0, 5 - rating));

/** A time in the organization's zone: `12 May 2026, 14:05 (Europe/Moscow)`. */
export function alertTime(at: Date | undefined, locale: string, timeZone: string): string {
  if (!at) return '';
  const ru = locale.toLowerCase().startsWith('ru');
  const text = new Intl.DateTimeFormat(ru ? 'ru-RU' : 'en-GB', { timeZone: timeZone || 'UTC', day: 'numeric', month: 'long', year: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(at);
  return `${text} (${timeZone || 'UTC'})`;
}

export function ratingAlertSubject(rating: AlertedRatingText, locale: string, organizationName: string): string {
  const words = alertWordsOf(locale);
  const place = rating.locationName || organizationName;
  // A high rating alerts only for its private feedback: the subject says so.
  return (rating.feedback && rating.rating >= 4 ? words.feedbackSubject(place) : words.alertSubject(rating.rating, place)).replace(/[\r\n]+/g, ' ');
}

/** The lines of one rating: stars and score, customer, location, time, feedback. */
export function ratingLines(rating: AlertedRatingText, locale: string, timeZone: string): string[] {
  const words = alertWordsOf(locale);
  return [
    `${stars(rating.rating)} ${rating.rating}/5`,
    `${words.customer}: ${rating.customerName || words.anonymous}`,
    ...(rating.locationName ? [`${words.location}: ${rating.locationName}`] : []),
    `${words.rated}: ${alertTime(rating.ratedAt, locale, timeZone)}`,
    rating.feedback ? `${words.feedback}: “${rating.feedback}”` : words.noFeedback,
  ];
}

/** A rating alert as plain text: a staff chat's message and the email's text part. */
export function ratingAlertText(rating: AlertedRatingText, options: { locale: string; timeZone: string; organizationName: string }): string {
  const words = alertWordsOf(options.locale);
  return [words.alertIntro(options.organizationName), '', ...ratingLines(rating, options.locale, options.timeZone), '', `${words.open}: ${rating.link}`].join('\n');
}

/** A daily digest as plain text. */
export function digestText(totals: DigestTotalsText, ratings: AlertedRatingText[], options: { locale: string; timeZone: string; organizationName: string; link: string }): string {
  const words = alertWordsOf(options.locale);
  const items = ratings.length === 0 ? [words.digestNone] : ratings.flatMap((rating) => ['', ...ratingLines(rating, options.locale, options.timeZone), rating.link]);
  return [words.digestIntro(options.organizationName, totals.day), words.digestTotals(totals), ...items, '', `${words.openInbox}: ${options.link}`].join('\n');
}
