import { busV1 } from '@rrs/proto';
import { renderEmail } from '../src/message';

function step(overrides: Partial<busV1.StepDue> = {}): busV1.StepDue {
  return busV1.StepDue.fromPartial({
    stepId: '0190e0e0-0000-7000-8000-000000000001',
    channel: 'EMAIL',
    recipient: { name: 'Anna', email: 'anna@example.test' },
    location: { name: 'Coffee on Tverskaya' },
    template: { subject: 'How was {{location}}?', body: 'Hello {{name}},\n\nPlease rate your visit: {{link}}' },
    reviewUrl: 'https://reviews.test/r/tok',
    unsubscribeUrl: 'https://reviews.test/u/tok',
    locale: 'en',
    ...overrides,
  });
}

describe('the review-request email', () => {
  it("speaks the organization's language around the template: a Russian organization gets a Russian footer and button", () => {
    const email = renderEmail(step({ locale: 'ru', template: { subject: 'Как прошёл визит в {{location}}?', body: 'Здравствуйте, {{name}}!\n\n{{link}}' } }), 'Reviews <r@acme.test>');
    expect(email.text).toContain('Вы получили это письмо после визита в Coffee on Tverskaya. Отписаться: https://reviews.test/u/tok');
    expect(email.html).toContain('>Отписаться</a>');
    expect(email.html).toContain('>Оценить визит</a>');
    expect(email.html).toContain('<html lang="ru">');
    for (const part of [email.text, email.html]) {
      expect(part).not.toMatch(/Unsubscribe|You got this email|Rate your visit/);
    }
  });

  it('keeps English for an English organization', () => {
    const email = renderEmail(step(), 'Reviews <r@acme.test>');
    expect(email.text).toContain('You got this email after a visit to Coffee on Tverskaya. Unsubscribe: https://reviews.test/u/tok');
    expect(email.html).toContain('>Rate your visit</a>');
  });

  it.each([
    ['en', 'Hello {{name}},\n\n{{link}}', 'Hello,'],
    ['en', 'Hello {{name}}! Rate us: {{link}}', 'Hello! Rate us:'],
    ['ru', 'Здравствуйте, {{name}}!\n\n{{link}}', 'Здравствуйте!'],
  ])('greets a recipient without a name without a gap (%s: %j)', (locale, body, greeting) => {
    const email = renderEmail(step({ locale, recipient: { name: '', email: 'x@example.test', phone: '' }, template: { subject: 'S', body } }), 'r@acme.test');
    expect(email.text.startsWith(greeting)).toBe(true);
    expect(email.text).not.toMatch(/ [!,]/);
  });

  it("puts a name with replacement-pattern characters in as typed ($', $`, $&)", () => {
    const name = "Jo$'$`$& Smith";
    const email = renderEmail(step({ recipient: { name, email: 'x@example.test', phone: '' } }), 'r@acme.test');
    expect(email.text.startsWith(`Hello ${name},`)).toBe(true);
  });
});
