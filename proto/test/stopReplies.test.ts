import { isStopReply, STOP_REPLY_WORDS } from '../src';

describe('STOP-style replies', () => {
  it.each(['STOP', 'stop', ' Stop! ', 'СТОП', 'стоп.', 'Отписаться', 'ОТПИСКА', 'unsubscribe', 'Stop all', '🛑 STOP 🛑', '«стоп»', 'S.T.O.P'])('%j is an opt-out', (text) => {
    expect(isStopReply(text)).toBe(true);
  });

  it.each(['', 'ok', 'stop by tomorrow', 'не стоп', 'стопка', 'Спасибо, всё отлично', 'STOP2', '5'])('%j is not', (text) => {
    expect(isStopReply(text)).toBe(false);
  });

  it('lists every word in the form the check compares (upper-case letters only)', () => {
    for (const word of STOP_REPLY_WORDS) expect(word).toMatch(/^[A-ZА-Я]+$/);
  });
});
