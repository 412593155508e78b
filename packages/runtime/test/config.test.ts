import { z } from 'zod';
import { ConfigError, envField, readEnv } from '../src';

describe('readEnv', () => {
  const shape = { PORT: envField.port(8080), DATABASE_URL: envField.url(['postgres']), FLAG: envField.bool(false), NAME: z.string().optional() };

  it('applies defaults and coerces values', () => {
    expect(readEnv(shape, { DATABASE_URL: 'postgres://x/y', FLAG: 'yes' })).toEqual({ PORT: 8080, DATABASE_URL: 'postgres://x/y', FLAG: true });
  });

  it('treats an empty variable as unset', () => {
    expect(readEnv(shape, { DATABASE_URL: 'postgres://x/y', PORT: '' }).PORT).toBe(8080);
  });

  it.each([
    [{ PORT: 'eighty', DATABASE_URL: 'postgres://x/y' }, 'PORT'],
    [{ PORT: '70000', DATABASE_URL: 'postgres://x/y' }, 'PORT'],
    [{}, 'DATABASE_URL'],
    [{ DATABASE_URL: 'mysql://x/y' }, 'DATABASE_URL'],
    [{ DATABASE_URL: 'postgres://x/y', FLAG: 'maybe' }, 'FLAG'],
  ])('fails naming the variable: %j', (env, variable) => {
    let caught: unknown;
    try {
      readEnv(shape, env);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).variable).toBe(variable);
    expect((caught as ConfigError).message).toMatch(new RegExp(`^${variable}: `));
  });

  it('never echoes a secret-looking value in the message', () => {
    expect(() => readEnv(shape, { DATABASE_URL: 'mysql://user:hunter2@db/x' })).toThrow(/<redacted>/);
    expect(() => readEnv(shape, { DATABASE_URL: 'mysql://user:hunter2@db/x' })).not.toThrow(/hunter2/);
  });
});
