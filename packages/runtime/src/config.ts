import { z } from 'zod';
import { ConfigError } from './errors';

export type Env = Record<string, string | undefined>;

/**
 * Reads env variables through a zod shape whose keys ARE the variable names, so every failure names
 * the variable. Empty strings count as unset, which lets `FOO=` fall back to the default.
 */
export function readEnv<S extends z.ZodRawShape>(shape: S, env: Env): z.infer<z.ZodObject<S>> {
  const input: Record<string, string> = {};
  for (const key of Object.keys(shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') input[key] = value;
  }
  const parsed = z.object(shape).safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const variable = String(issue.path[0] ?? 'environment');
    const got = input[variable];
    throw new ConfigError(variable, `${issue.message}${got === undefined ? '' : ` (got ${JSON.stringify(redactIfSecret(variable, got))})`}`);
  }
  return parsed.data as z.infer<z.ZodObject<S>>;
}

function redactIfSecret(variable: string, value: string): string {
  return /KEY|TOKEN|SECRET|PASSWORD|URL/.test(variable) ? '<redacted>' : value;
}

/** Field helpers for env shapes. */
export const envField = {
  port: (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback),
  int: (fallback: number, min = 0) => z.coerce.number().int().min(min).default(fallback),
  url: (protocols: string[]) =>
    z.string().refine((v) => {
      try {
        return protocols.includes(new URL(v).protocol.replace(/:$/, ''));
      } catch {
        return false;
      }
    }, `must be a URL with scheme ${protocols.join(' or ')}`),
  bool: (fallback: boolean) =>
    z
      .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
      .default(fallback ? 'true' : 'false')
      .transform((v) => v === 'true' || v === '1' || v === 'yes'),
  host: (fallback = '0.0.0.0') => z.string().min(1).default(fallback),
  busPrefix: () => z.string().regex(/^[a-z][a-z0-9]{0,31}$/, 'must be lower-case letters and digits').default(''),
  logLevel: () => z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  nodeEnv: () => z.enum(['production', 'development', 'test']).default('development'),
};
