import { busV1 } from '@rrs/proto';
import { cutToOnePart, encodingOf, fitsOnePart, renderSms, smsLength, smsParts } from '../src';

const LINK = 'https://rv.example.com/r/AbCdEf123456';
const SHORT = 'rv.example.com/r/AbCdEf123456';

function step(body: string, name = 'Anna', location = 'Acme Dental') {
  return busV1.StepDue.fromPartial({ stepId: 's1', recipient: { name }, location: { name: location }, template: { body }, reviewUrl: LINK });
}

describe('SMS length rules', () => {
  it('counts GSM-7 septets, with extension characters costing 2', () => {
    expect(encodingOf('Hello {name} €5')).toBe('GSM-7');
    expect(smsLength('abc')).toBe(3);
    expect(smsLength('a{b}€')).toBe(1 + 2 + 1 + 2 + 2);
    expect(fitsOnePart('x'.repeat(160))).toBe(true);
    expect(fitsOnePart('x'.repeat(161))).toBe(false);
    expect(fitsOnePart('€'.repeat(80))).toBe(true);
    expect(fitsOnePart('€'.repeat(81))).toBe(false);
  });

  it('switches to UCS-2 for Cyrillic and emoji; an emoji outside the BMP costs 2 units', () => {
    expect(encodingOf('Привет')).toBe('UCS-2');
    expect(encodingOf('Hi 😀')).toBe('UCS-2');
    expect(smsLength('😀', 'UCS-2')).toBe(2);
    expect(fitsOnePart('я'.repeat(70))).toBe(true);
    expect(fitsOnePart('я'.repeat(71))).toBe(false);
    expect(fitsOnePart('😀'.repeat(35))).toBe(true);
    expect(fitsOnePart(`${'😀'.repeat(35)}a`)).toBe(false);
    expect(smsParts('я'.repeat(71))).toBe(2);
  });
});

describe('cutting the SMS text to one part', () => {
  it('keeps a short Latin text whole', () => {
    const sms = renderSms(step('Hello {{name}}, rate {{location}}: {{link}} Thanks!'));
    expect(sms).toEqual({ text: `Hello Anna, rate Acme Dental: ${LINK} Thanks!`, encoding: 'GSM-7', parts: 1, link: LINK, cut: false });
  });

  it('uses only the first line of the template', () => {
    expect(renderSms(step('Hi {{name}} {{link}}\nsecond line is not sent')).text).toBe(`Hi Anna ${LINK}`);
  });

  it('cuts a long Latin text to 160 septets before the link and keeps the link whole, in its short form', () => {
    const sms = renderSms(step(`${'word '.repeat(60)}{{link}} trailing words here`));
    expect(sms.encoding).toBe('GSM-7');
    expect(sms.parts).toBe(1);
    expect([sms.link, sms.cut]).toEqual([SHORT, true]);
    expect(smsLength(sms.text)).toBeLessThanOrEqual(160);
    expect(sms.text.endsWith(` ${SHORT}`)).toBe(true);
    expect(sms.text).not.toContain('trailing');
    // Cut at a word boundary.
    expect(sms.text.replace(` ${SHORT}`, '')).toMatch(/(word )*word$/);
  });

  it('cuts a Cyrillic text to 70 UCS-2 units, the link whole', () => {
    const sms = renderSms(step('Здравствуйте, {{name}}! Пожалуйста, оцените ваш визит в {{location}} по ссылке: {{link}}', 'Анна', 'Стоматология Улыбка'));
    expect(sms.encoding).toBe('UCS-2');
    expect(sms.parts).toBe(1);
    expect(sms.cut).toBe(true);
    expect(sms.text.length).toBeLessThanOrEqual(70);
    expect(sms.text.endsWith(SHORT)).toBe(true);
    expect(sms.text.startsWith('Здравствуйте, Анна!')).toBe(true);
  });

  it('drops only the scheme of the link when that alone makes the text fit one part, so no word is lost', () => {
    const demoLink = 'http://localhost:8080/r/AbCdEf0123456789GhIjKl';
    const demo = busV1.StepDue.fromPartial({ stepId: 's1', recipient: { name: 'Анна' }, location: { name: 'Demo Coffee on Tverskaya' }, template: { body: 'Demo Coffee: оцените визит {{link}}' }, reviewUrl: demoLink });
    const sms = renderSms(demo);
    expect(sms).toEqual({ text: 'Demo Coffee: оцените визит localhost:8080/r/AbCdEf0123456789GhIjKl', encoding: 'UCS-2', parts: 1, link: 'localhost:8080/r/AbCdEf0123456789GhIjKl', cut: false });
    // Whole with the full link whenever it fits.
    expect(renderSms(step('Оцените визит: {{link}}')).link).toBe(LINK);
  });

  it('never splits an emoji and counts it as 2 units', () => {
    const sms = renderSms(step(`${'😀'.repeat(30)} {{link}}`));
    expect(sms.encoding).toBe('UCS-2');
    expect(sms.text.length).toBeLessThanOrEqual(70);
    expect(sms.text.endsWith(SHORT)).toBe(true);
    const prefix = sms.text.slice(0, sms.text.length - SHORT.length).trimEnd();
    expect(Array.from(prefix).every((c) => c === '😀')).toBe(true);
    expect(prefix.length % 2).toBe(0);
  });

  it('appends the link when the first line has no {{link}}', () => {
    expect(renderSms(step('Rate us, {{name}}')).text).toBe(`Rate us, Anna ${LINK}`);
  });

  it('returns the link alone when nothing else fits, never a broken link', () => {
    const long = `https://rv.example.com/r/${'a'.repeat(150)}`;
    expect(cutToOnePart('Привет ', long, '')).toBe(long);
  });
});
