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

function urlField(protocols: string[]) {
  return z.string().refine((value) => {
    try {
      return protocols.includes(new URL(value).protocol.replace(/:$/, ''));
    } catch {
      return false;
    }
  }, `must be a URL with scheme ${protocols.join(' or ')}`);
}

/**
 * One NATS server URL or several, comma separated (`nats://a:4222,nats://b:4222`): the client connects
 * to any that answers and reconnects to the others, so a service starts while one node is down.
 */
function natsUrlsField() {
  const one = urlField(['nats', 'tls']);
  return z.string().refine(
    (value) => value.split(',').every((part) => one.safeParse(part.trim()).success),
    'must be a URL with scheme nats or tls, or several separated by commas',
  );
}

/**
 * A gRPC target: `host:port`, `dns:///host:port`, or a fixed list of replicas `ipv4:a:port,b:port`
 * (outside Kubernetes, e.g. replicas as processes on one host); no other scheme, no authority.
 */
export function grpcTarget() {
  return z
    .string()
    .regex(/^((dns:\/\/\/)?[^:/,\s]+:\d{1,5}|ipv4:[\d.]+:\d{1,5}(,[\d.]+:\d{1,5})*)$/, 'must be host:port, dns:///host:port or ipv4:a:port,b:port');
}

/** Field helpers for env shapes. */
export const envField = {
  port: (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback),
  int: (fallback: number, min = 0) => z.coerce.number().int().min(min).default(fallback),
  url: urlField,
  natsUrls: natsUrlsField,
  /** Replicas of a JetStream stream the service creates: 1 on a single server, 3 on a three-node cluster. */
  streamReplicas: () => z.coerce.number().int().min(1).max(5).default(1),
  /** An absolute http(s) base for links (`<base>/r/<token>`), read without trailing slashes. */
  baseUrl: () => urlField(['http', 'https']).transform((url) => url.replace(/\/+$/, '')),
  bool: (fallback: boolean) =>
    z
      .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
      .default(fallback ? 'true' : 'false')
      .transform((value) => value === 'true' || value === '1' || value === 'yes'),
  host: (fallback = '0.0.0.0') => z.string().min(1).default(fallback),
  /**
   * Another service's gRPC address: `host:port`, or `dns:///host:port` for a name that resolves to every
   * replica (a Kubernetes headless Service); clients balance round robin over what it resolves to.
   */
  address: (fallback: string) => grpcTarget().default(fallback),
  busPrefix: () => z.string().regex(/^[a-z][a-z0-9]{0,31}$/, 'must be lower-case letters and digits').default(''),
  logLevel: () => z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  nodeEnv: () => z.enum(['production', 'development', 'test']).default('development'),
};

/**
 * The variables every gRPC service reads besides its two ports: its database, the interfaces it
 * listens on and its log level. A service spreads this into its own shape next to its ports (their
 * defaults differ per service, so services can run side by side on one host) and reads the common
 * part back with `grpcServiceConfig`:
 *
 *     const vars = readEnv({ ...grpcServiceEnvShape, GRPC_PORT: envField.port(50051), OPS_PORT: envField.port(9464), … }, env);
 *     return { ...grpcServiceConfig(vars), … };
 */
export const grpcServiceEnvShape = {
  DATABASE_URL: envField.url(['postgres', 'postgresql']),
  GRPC_HOST: envField.host(),
  OPS_HOST: envField.host(),
  LOG_LEVEL: envField.logLevel(),
};

export type GrpcServiceEnv = z.infer<z.ZodObject<typeof grpcServiceEnvShape>> & { GRPC_PORT: number; OPS_PORT: number };

export interface GrpcServiceConfig {
  databaseUrl: string;
  grpcHost: string;
  grpcPort: number;
  opsHost: string;
  opsPort: number;
  logLevel: string;
}

export function grpcServiceConfig(vars: GrpcServiceEnv): GrpcServiceConfig {
  return {
    databaseUrl: vars.DATABASE_URL,
    grpcHost: vars.GRPC_HOST,
    grpcPort: vars.GRPC_PORT,
    opsHost: vars.OPS_HOST,
    opsPort: vars.OPS_PORT,
    logLevel: vars.LOG_LEVEL,
  };
}

/** The variables of a service that connects to the bus itself; read back with `busConfig`. */
export const busEnvShape = {
  NATS_URL: envField.natsUrls().default('nats://127.0.0.1:4222'),
  BUS_PREFIX: envField.busPrefix(),
  BUS_STREAM_REPLICAS: envField.streamReplicas(),
};

/** Where a service's own bus connection goes: the JetStream server and the prefix of its streams and subjects. */
export interface BusConfig {
  natsUrl: string;
  busPrefix: string;
  /** Replicas of the streams and bucket when this service creates them; existing ones are never changed. */
  streamReplicas: number;
}

export function busConfig(vars: z.infer<z.ZodObject<typeof busEnvShape>>): BusConfig {
  return { natsUrl: vars.NATS_URL, busPrefix: vars.BUS_PREFIX, streamReplicas: vars.BUS_STREAM_REPLICAS };
}

/** `scheme://host:port` of a URL (several, comma separated, for NATS), without credentials, path or query. */
export function whereUrlPoints(url: string): string {
  return url
    .split(',')
    .map((one) => {
      try {
        const parsed = new URL(one.trim());
        return `${parsed.protocol}//${parsed.host}`;
      } catch {
        return '<unparsable URL>';
      }
    })
    .join(',');
}
