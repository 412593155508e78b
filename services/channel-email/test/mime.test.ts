import { foldLines } from 'nodemailer/lib/mime-funcs';
import MimeNode from 'nodemailer/lib/mime-node';
import { busV1 } from '@rrs/proto';
import { renderEmail } from '../src/message';
import { EmailComposer, headerLine } from '../src/mime';

// mailparser ships no types.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { simpleParser } = require('mailparser') as { simpleParser(src: Buffer): Promise<{ subject?: string; text?: string; html?: string | false; messageId?: string; date?: Date; headers: Map<string, unknown>; to?: { text: string }; from?: { text: string; value: Array<{ address: string; name: string }> } }> };

function step(overrides: Partial<busV1.StepDue> = {}): busV1.StepDue {
  return busV1.StepDue.fromPartial({
    stepId: '0190e0e0-0000-7000-8000-000000000001',
    channel: 'EMAIL',
    recipient: { name: 'Anna', email: 'anna@example.test' },
    location: { name: 'Coffee on Tverskaya' },
    template: { subject: 'How was {{location}}?', body: 'Hello {{name}},\n\nPlease rate your visit: {{link}}' },
    reviewUrl: 'https://reviews.test/r/tok',
    unsubscribeUrl: 'https://reviews.test/u/tok-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef',
    locale: 'en',
    ...overrides,
  });
}

/** The header block, unfolded: one header per line. */
const headBlock = (raw: Buffer) => raw.toString('utf8').split('\r\n\r\n')[0].replace(/\r\n[ \t]+/g, ' ');

describe('EmailComposer', () => {
  const composer = new EmailComposer('Acme Reviews <reviews@acme.test>');

  it('builds a multipart/alternative message a mail parser reads back: both parts, the unsubscribe headers, the Message-ID', async () => {
    const message = renderEmail(step(), 'Acme Reviews <reviews@acme.test>');
    const date = new Date('2026-11-26T10:00:00Z');
    const { envelope, raw } = composer.compose(message, date);
    expect(envelope).toEqual({ from: 'reviews@acme.test', to: ['anna@example.test'] });
    const parsed = await simpleParser(raw);
    expect(parsed.subject).toBe('How was Coffee on Tverskaya?');
    expect(parsed.messageId).toBe(message.messageId);
    expect(parsed.from?.value).toEqual([{ address: 'reviews@acme.test', name: 'Acme Reviews' }]);
    expect(parsed.to?.text).toBe('anna@example.test');
    expect(parsed.date).toEqual(date);
    expect(parsed.text).toBe(message.text);
    expect(parsed.html).toBe(message.html);
    const head = headBlock(raw);
    expect(head).toContain(`\r\nList-Unsubscribe: <${step().unsubscribeUrl}>\r\n`);
    expect(head).toContain('\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n');
    expect(head).toContain('\r\nMIME-Version: 1.0\r\n');
    expect(head).toMatch(/\r\nContent-Type: multipart\/alternative; boundary="=_rrs_[0-9a-f]{12}_\w+"$/);
  });

  it('keeps to the line rules: CRLF only, no line over 76 characters but an unbreakable header, ASCII only, quoted-printable for English', () => {
    const { raw } = composer.compose(renderEmail(step(), 'Acme Reviews <reviews@acme.test>'));
    const text = raw.toString('latin1');
    expect(text).not.toMatch(/[^\r]\n|\r[^\n]/);
    const [head, ...body] = text.split('\r\n\r\n');
    for (const line of body.join('\r\n').split('\r\n')) expect(line.length).toBeLessThanOrEqual(76);
    // A header folds at whitespace only (RFC 5322 §2.2.3): the long unsubscribe URL stays whole.
    for (const line of head.split('\r\n')) expect(line.length <= 76 || /^ <https:\/\/\S+>$/.test(line)).toBe(true);
    expect(text).toMatch(/^[\x09\x0a\x0d\x20-\x7e]*$/);
    expect(text.match(/Content-Transfer-Encoding: quoted-printable/g)).toHaveLength(2);
  });

  it('encodes a Russian text part as base64 (the HTML, mostly markup, stays quoted-printable), an RFC 2047 subject, an IDN recipient domain as an A-label', async () => {
    const ru = step({ locale: 'ru', location: { name: 'Кофейня на Тверской' } as busV1.StepDue['location'], reviewUrl: 'https://r.test/r/1', unsubscribeUrl: 'https://r.test/u/1', recipient: { name: 'Анна', email: 'anna@пример.рф', phone: '' }, template: { subject: 'Как прошёл визит в {{location}}?', body: 'Здравствуйте, {{name}}!\n\nОцените визит: {{link}}' } });
    const message = renderEmail(ru, 'Отзывы <reviews@acme.test>');
    const { envelope, raw } = new EmailComposer('Отзывы <reviews@acme.test>').compose(message);
    expect(envelope.to).toEqual(['anna@xn--e1afmkfd.xn--p1ai']);
    const text = raw.toString('latin1');
    expect(text).toMatch(/^[\x09\x0a\x0d\x20-\x7e]*$/);
    expect(text).toMatch(/Content-Type: text\/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n/);
    expect(text).toMatch(/Content-Type: text\/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n/);
    const parsed = await simpleParser(raw);
    expect(parsed.subject).toBe('Как прошёл визит в Кофейня на Тверской?');
    expect(parsed.from?.value).toEqual([{ address: 'reviews@acme.test', name: 'Отзывы' }]);
    expect(parsed.text).toBe(message.text);
    expect(parsed.html).toBe(message.html);
  });

  it('gives every message its own boundary, which no part contains', () => {
    const message = renderEmail(step(), 'r@acme.test');
    const boundaries = new Set<string>();
    for (let i = 0; i < 50; i++) {
      const raw = composer.compose(message).raw.toString('latin1');
      const boundary = /boundary="([^"]+)"/.exec(raw)![1];
      boundaries.add(boundary);
      // The delimiter lines only: two openings and one close.
      expect(raw.split(`--${boundary}`)).toHaveLength(4);
    }
    expect(boundaries.size).toBe(50);
  });

  it("writes the message's own headers once, never one of those the composer writes itself", () => {
    const message = { ...renderEmail(step(), 'r@acme.test'), headers: { 'X-Campaign': 'spring', 'message-id': '<forged@x>', 'Bad\r\nKey: x': 'v', Subject: 'again' } };
    const head = headBlock(composer.compose(message).raw);
    expect(head).toContain('\r\nX-Campaign: spring\r\n');
    expect(head).toContain('\r\nBadKeyx: v\r\n');
    expect(head.match(/^message-id:/gim)).toHaveLength(1);
    expect(head.match(/^subject:/gim)).toHaveLength(1);
    expect(head).not.toContain('forged');
  });

  it.each([
    ['Subject', 'How was Coffee on Tverskaya?'],
    ['Subject', 'Rate Acme Dental, Anna <b>'],
    ['Subject', '  spaced  out  '],
    ['Subject', 'a =?utf-8?Q?x?= b'],
    ['Subject', 'Как прошёл визит?'],
    ['Subject', 'line\r\nbreak'],
    ['Subject', `long ${'word '.repeat(30)}`],
    ['To', 'anna@example.test'],
    ['To', "o'brien+x@mail.example.co.uk"],
    ['To', 'Anna@Example.COM'],
    ['To', 'a@пример.рф'],
    ['To', 'Anna <anna@example.test>'],
    ['Message-ID', '<0190e0e0-0000-7000-8000-000000000001@acme.test>'],
    ['Message-ID', 'bare@acme.test'],
    ['Message-ID', '<with space@acme.test>'],
    ['List-Unsubscribe', `<https://reviews.test/u/${'x'.repeat(120)}>`],
    ['List-Unsubscribe-Post', 'List-Unsubscribe=One-Click'],
  ])('writes %s %j as nodemailer would', (key, value) => {
    const encoder = new MimeNode(false, { baseBoundary: 'test' });
    expect(headerLine(key, value)).toBe(foldLines(`${key}: ${encoder.encodeHeaderValue(key, value)}`, 76));
  });
});
