import { WaitLine } from '../src';

describe('WaitLine', () => {
  it("serves small requests' waiters first, each line first come first served; a removed waiter is not served", () => {
    const line = new WaitLine<string>();
    line.push('bulk1');
    line.push('order1', true);
    line.push('bulk2');
    line.push('order2', true);
    line.push('bulk3');
    expect(line.remove('bulk2')).toBe(true);
    expect(line.remove('bulk2')).toBe(false);
    expect(line.length).toBe(4);
    expect([line.shift(), line.shift(), line.shift()]).toEqual(['order1', 'order2', 'bulk1']);
    line.push('order3', true);
    expect(line.takeAll()).toEqual(['order3', 'bulk3']);
    expect(line.shift()).toBeUndefined();
    expect(line.length).toBe(0);
  });
});
