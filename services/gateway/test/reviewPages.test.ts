import type { schedulerV1 } from '@rrs/proto';
import { messagePage, reviewPage, unsubscribePage } from '../src/form/pages';

const form = (over: Partial<schedulerV1.ReviewForm> = {}): schedulerV1.ReviewForm => ({
  token: 't'.repeat(22), locationName: 'Кофейня <Тверская>', locale: 'ru', rating: 0, feedbackGiven: false, lowRatingThreshold: 3,
  reviewLinks: [{ provider: 'yandex', url: 'https://yandex.example/r' }, { provider: 'evil', url: 'javascript:alert(1)' }],
  organizationName: 'Coffee Co', unsubscribed: false, email: 'a@example.com', botLinks: [], ...over,
});

/** The review form's HTML: language by organization locale, escaping, and what each state shows. */
describe('review form pages', () => {
  it('renders Russian for a ru organization, English otherwise, with the location name escaped', () => {
    const ru = reviewPage(form(), 'c', '/r/x');
    expect(ru).toContain('<html lang="ru">');
    expect(ru).toContain('Как вы оцените «Кофейня &lt;Тверская&gt;»?');
    expect(ru).not.toContain('<Тверская>');
    expect(ru.match(/type="radio"/g)).toHaveLength(5);
    const en = reviewPage(form({ locale: 'en', locationName: 'Cafe' }), 'c', '/r/x');
    expect(en).toContain('How would you rate Cafe?');
  });

  it('after a rating shows the public links to every rater, and the feedback form only for a low one', () => {
    const high = reviewPage(form({ rating: 5 }), 'c', '/r/x');
    // Public links go through the click redirect (/r/<token>/go/<index>); an unsafe URL gets no link at all.
    expect(high).toContain('href="/r/x/go/0"');
    expect(high).not.toContain('/r/x/go/1');
    expect(high).not.toContain('javascript:');
    expect(high).not.toContain('<textarea');
    const low = reviewPage(form({ rating: 3 }), 'c', '/r/x');
    expect(low).toContain('href="/r/x/go/0"');
    expect(low).toContain('<textarea');
    expect(low).toContain('action="/r/x/feedback"');
    expect(reviewPage(form({ rating: 2, feedbackGiven: true }), 'c', '/r/x')).not.toContain('<textarea');
  });

  it('offers the official bots the catalog has and the form has codes for, in the page language, with opaque http(s) deep links; nothing before a rating or without a bot', () => {
    const bots = new Map([['MAX', 'https://max.ru/reviews_max_bot'], ['TELEGRAM', 'https://t.me/reviews_bot'], ['VIBER', 'javascript:alert(1)//']]);
    const expiresAt = new Date(Date.now() + 3_600_000);
    const botLinks = [{ channel: 'TELEGRAM', code: 'Tg_code-0123456789abcd', expiresAt }, { channel: 'MAX', code: 'Mx_code-0123456789abcd', expiresAt }, { channel: 'VIBER', code: 'Vb_code-0123456789abcd', expiresAt }];
    const ru = reviewPage(form({ rating: 5, botLinks }), 'c', '/r/x', undefined, bots);
    expect(ru).toContain('data-testid="bot-links" aria-labelledby="bot-prompt"');
    expect(ru).toContain('Удобнее получать следующие запросы в мессенджере?');
    expect([...ru.matchAll(/<a href="([^"]+)"[^>]*data-channel="(\w+)">([^<]+)</g)].map((m) => [m[2], m[1], m[3]])).toEqual([
      ['MAX', 'https://max.ru/reviews_max_bot?start=Mx_code-0123456789abcd', 'Получать запросы в MAX'],
      ['TELEGRAM', 'https://t.me/reviews_bot?start=Tg_code-0123456789abcd', 'Получать запросы в Telegram'],
    ]);
    expect(ru).toContain('/stop');
    const en = reviewPage(form({ locale: 'en', rating: 2, botLinks: botLinks.slice(0, 1) }), 'c', '/r/x', undefined, bots);
    expect(en).toContain('>Get future requests in Telegram<');
    expect(en).not.toContain('data-channel="MAX"');
    expect(reviewPage(form({ rating: 5, botLinks }), 'c', '/r/x')).not.toContain('bot-links');
    expect(reviewPage(form({ rating: 0, botLinks }), 'c', '/r/x', undefined, bots)).not.toContain('bot-links');
  });

  it('unsubscribe and message pages', () => {
    // The address is masked: whoever holds the link (a forwarded email) does not learn it.
    const unsubscribe = unsubscribePage(form({ email: 'anna.petrova@example.com' }), 'c', '/u/x');
    expect(unsubscribe).not.toContain('anna.petrova');
    expect(unsubscribe).not.toContain('example.com');
    expect(unsubscribe).toContain('a•••@e•••.com');
    expect(unsubscribePage(form({ unsubscribed: true }), '', '/u/x')).toContain('data-testid="unsubscribed"');
    const nf = messagePage('notFound');
    expect(nf).toContain('Ссылка не найдена');
    expect(nf).toContain('This review link is not valid');
  });
});
