import { ConfigError } from '@rrs/runtime';
import { buildConfig } from '../src';

describe('contacts config', () => {
  const base = { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/x' };

  it('keeps saved Idempotency-Key responses 24 h unless told otherwise', () => {
    expect(buildConfig(base).idempotencyTtlMs).toBe(24 * 3_600_000);
    expect(buildConfig({ ...base, IDEMPOTENCY_TTL_HOURS: '1.5' }).idempotencyTtlMs).toBe(5_400_000);
  });

  it.each(['0', '-1', 'soon', '721'])('refuses IDEMPOTENCY_TTL_HOURS=%s naming the variable', (value) => {
    let err: unknown;
    try {
      buildConfig({ ...base, IDEMPOTENCY_TTL_HOURS: value });
    } catch (caught) {
      err = caught;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).variable).toBe('IDEMPOTENCY_TTL_HOURS');
  });
});
