import { defaultTemplate } from '@rrs/contacts';
import { busV1 } from '@rrs/proto';
import { renderSms, shortLink } from '@rrs/sender-kit';

/*
 * docs/channels.md, "SMS text": how long PUBLIC_BASE_URL and a location's name may be for the default
 * SMS text of each locale to be sent whole, in one part. B is the base URL without its scheme
 * (`https://reviews.example.com` → `reviews.example.com`, 19), L the location name; a review link is
 * the base, `/r/` and a 22-character token.
 */
const TOKEN = 'AbCdEf0123456789GhIjKl';

function sms(locale: string, base: string, location: string) {
  return renderSms(busV1.StepDue.fromPartial({ stepId: 's', recipient: { name: 'Anna' }, location: { name: location }, template: { body: defaultTemplate(locale, 'SMS').body }, reviewUrl: `${base}/r/${TOKEN}` }));
}

const hosts = ['https://rv.ru', 'https://reviews.example.com', 'https://otzyvy.moya-kofeynya.ru'];

describe('the default SMS texts and the lengths they survive whole', () => {
  it.each([
    ['ru', 'Кофейня на Тверской', 27],
    ['en', 'Coffee House Downtown', 107],
    ['en', 'Кофейня', 17],
  ])('%s, location like "%s": whole while L + B <= %i, cut one character later, always one part', (locale, letters, limit) => {
    for (const base of hosts) {
      const b = shortLink(base).length;
      if (b >= limit) continue;
      const fits = letters.repeat(10).slice(0, limit - b);
      const whole = sms(locale, base, fits);
      expect({ base, cut: whole.cut, parts: whole.parts }).toEqual({ base, cut: false, parts: 1 });
      expect(whole.text).toContain(fits);
      const over = sms(locale, base, letters.repeat(10).slice(0, limit - b + 1));
      expect({ base, cut: over.cut, parts: over.parts }).toEqual({ base, cut: true, parts: 1 });
      expect(over.text.endsWith(shortLink(`${base}/r/${TOKEN}`))).toBe(true);
    }
  });

  it('keeps the full link (with https://) whenever the text fits one part with it', () => {
    const text = sms('en', 'https://reviews.example.com', 'Cafe');
    expect(text).toMatchObject({ link: `https://reviews.example.com/r/${TOKEN}`, cut: false, parts: 1 });
  });
});
