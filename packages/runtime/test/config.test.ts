import { z } from 'zod';
import { busConfig, busEnvShape, ConfigError, envField, grpcServiceConfig, grpcServiceEnvShape, readEnv } from '../src';

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

describe('shared env fields', () => {
  it('reads a gRPC address as host:port', () => {
    const shape = { CONTACTS_ADDR: envField.address('127.0.0.1:50051') };
    expect(readEnv(shape, {}).CONTACTS_ADDR).toBe('127.0.0.1:50051');
    expect(readEnv(shape, { CONTACTS_ADDR: 'contacts:50051' }).CONTACTS_ADDR).toBe('contacts:50051');
    expect(() => readEnv(shape, { CONTACTS_ADDR: 'http://contacts:50051' })).toThrow(/^CONTACTS_ADDR: must be host:port/);
  });

  it('reads a gRPC address as dns:///host:port, the headless-Service form clients balance over', () => {
    const shape = { CONTACTS_ADDR: envField.address('127.0.0.1:50051') };
    expect(readEnv(shape, { CONTACTS_ADDR: 'dns:///rrs-contacts-grpc:50051' }).CONTACTS_ADDR).toBe('dns:///rrs-contacts-grpc:50051');
    expect(() => readEnv(shape, { CONTACTS_ADDR: 'dns://resolver/contacts:50051' })).toThrow(/^CONTACTS_ADDR: must be host:port, dns:\/\/\/host:port or ipv4:a:port,b:port/);
    expect(readEnv(shape, { CONTACTS_ADDR: 'ipv4:10.0.0.1:50051,10.0.0.2:50051' }).CONTACTS_ADDR).toBe('ipv4:10.0.0.1:50051,10.0.0.2:50051');
    expect(() => readEnv(shape, { CONTACTS_ADDR: 'a:1,b:2' })).toThrow(/^CONTACTS_ADDR: must be host:port/);
  });

  it('reads a public base URL without its trailing slashes, http or https only', () => {
    const shape = { PUBLIC_BASE_URL: envField.baseUrl().optional() };
    expect(readEnv(shape, { PUBLIC_BASE_URL: 'https://reviews.example.com//' }).PUBLIC_BASE_URL).toBe('https://reviews.example.com');
    expect(readEnv(shape, {}).PUBLIC_BASE_URL).toBeUndefined();
    expect(() => readEnv(shape, { PUBLIC_BASE_URL: 'ftp://reviews.example.com' })).toThrow(/^PUBLIC_BASE_URL: /);
  });
});

describe('grpcServiceEnvShape and busEnvShape', () => {
  const shape = { ...grpcServiceEnvShape, GRPC_PORT: envField.port(50051), OPS_PORT: envField.port(9464), ...busEnvShape, OWN: envField.int(3) };

  it('give every gRPC service the same variables, next to the ports it defaults to', () => {
    const vars = readEnv(shape, { DATABASE_URL: 'postgres://db/x' });
    expect(grpcServiceConfig(vars)).toEqual({ databaseUrl: 'postgres://db/x', grpcHost: '0.0.0.0', grpcPort: 50051, opsHost: '0.0.0.0', opsPort: 9464, logLevel: 'info' });
    expect(busConfig(vars)).toEqual({ natsUrl: 'nats://127.0.0.1:4222', busPrefix: '', streamReplicas: 1 });
    expect(vars.OWN).toBe(3);
  });

  it('read every variable given', () => {
    const vars = readEnv(shape, {
      DATABASE_URL: 'postgresql://db/y', GRPC_HOST: '127.0.0.1', GRPC_PORT: '6000', OPS_HOST: '127.0.0.2', OPS_PORT: '6001', LOG_LEVEL: 'warn',
      NATS_URL: 'tls://nats-0:4222,tls://nats-1:4222, tls://nats-2:4222', BUS_PREFIX: 'blue', BUS_STREAM_REPLICAS: '3',
    });
    expect(grpcServiceConfig(vars)).toEqual({ databaseUrl: 'postgresql://db/y', grpcHost: '127.0.0.1', grpcPort: 6000, opsHost: '127.0.0.2', opsPort: 6001, logLevel: 'warn' });
    expect(busConfig(vars)).toEqual({ natsUrl: 'tls://nats-0:4222,tls://nats-1:4222, tls://nats-2:4222', busPrefix: 'blue', streamReplicas: 3 });
  });

  it.each([
    [{}, 'DATABASE_URL'],
    [{ DATABASE_URL: 'postgres://db/x', GRPC_PORT: '70000' }, 'GRPC_PORT'],
    [{ DATABASE_URL: 'postgres://db/x', OPS_PORT: 'ops' }, 'OPS_PORT'],
    [{ DATABASE_URL: 'postgres://db/x', LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ DATABASE_URL: 'postgres://db/x', NATS_URL: 'http://nats' }, 'NATS_URL'],
    [{ DATABASE_URL: 'postgres://db/x', NATS_URL: 'nats://a:4222,http://b:4222' }, 'NATS_URL'],
    [{ DATABASE_URL: 'postgres://db/x', NATS_URL: 'nats://a:4222,' }, 'NATS_URL'],
    [{ DATABASE_URL: 'postgres://db/x', BUS_PREFIX: 'Blue!' }, 'BUS_PREFIX'],
    [{ DATABASE_URL: 'postgres://db/x', BUS_STREAM_REPLICAS: '0' }, 'BUS_STREAM_REPLICAS'],
    [{ DATABASE_URL: 'postgres://db/x', BUS_STREAM_REPLICAS: '6' }, 'BUS_STREAM_REPLICAS'],
  ])('fail naming the variable: %j', (env, variable) => {
    expect(() => readEnv(shape, env)).toThrow(new RegExp(`^${variable}: `));
  });
});
