import { smsCount, smsParts } from '../src/smsParts';

/** The SMS part counter shared by the SMS sender's debit and the console's template preview. */
describe('smsCount', () => {
  it('counts GSM-7: 160 septets in one part, then 153 a part', () => {
    expect(smsCount('a'.repeat(160))).toEqual({ encoding: 'GSM-7', length: 160, parts: 1, perPart: 160 });
    expect(smsCount('a'.repeat(161))).toEqual({ encoding: 'GSM-7', length: 161, parts: 2, perPart: 153 });
    expect(smsCount('a'.repeat(306))).toMatchObject({ parts: 2 });
    expect(smsCount('a'.repeat(307))).toMatchObject({ parts: 3 });
  });

  it('counts an extension character (€ [ ] { } ^ ~ | \\) as 2 septets', () => {
    expect(smsCount('€')).toMatchObject({ encoding: 'GSM-7', length: 2 });
    expect(smsCount(`${'a'.repeat(158)}{`)).toMatchObject({ length: 160, parts: 1 });
    expect(smsCount(`${'a'.repeat(159)}{`)).toMatchObject({ length: 161, parts: 2 });
  });

  it('switches to UCS-2 for Cyrillic: 70 units in one part, then 67 a part', () => {
    expect(smsCount('Привет')).toEqual({ encoding: 'UCS-2', length: 6, parts: 1, perPart: 70 });
    expect(smsCount('я'.repeat(70))).toMatchObject({ parts: 1 });
    expect(smsCount('я'.repeat(71))).toEqual({ encoding: 'UCS-2', length: 71, parts: 2, perPart: 67 });
    expect(smsCount('я'.repeat(135))).toMatchObject({ parts: 3 });
    // One Cyrillic letter turns a GSM-7 text into UCS-2: 100 Latin characters go from 1 part to 2.
    expect(smsCount('a'.repeat(100)).parts).toBe(1);
    expect(smsCount(`${'a'.repeat(99)}ы`).parts).toBe(2);
  });

  it('counts an emoji outside the BMP as 2 UCS-2 units', () => {
    expect(smsCount('😀')).toMatchObject({ encoding: 'UCS-2', length: 2 });
    expect(smsParts('😀'.repeat(36))).toBe(2);
  });
});
