import { buildConfig } from '../src/config';

describe('webhooks config', () => {
  const base = { DATABASE_URL: 'postgres://db/rrs', WEBHOOK_SECRET_KEYS: Buffer.alloc(32, 3).toString('base64') };

  it('reads the common gRPC service and bus variables with the webhooks defaults', () => {
    const config = buildConfig(base);
    expect(config).toMatchObject({
      databaseUrl: 'postgres://db/rrs',
      grpcHost: '0.0.0.0',
      grpcPort: 50053,
      opsHost: '0.0.0.0',
      opsPort: 9469,
      logLevel: 'info',
      natsUrl: 'nats://127.0.0.1:4222',
      busPrefix: '',
      allowLoopbackHttp: false,
      concurrency: 16,
    });
  });

  it('takes every variable by its name', () => {
    const config = buildConfig({
      ...base,
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: '6001',
      OPS_HOST: '127.0.0.2',
      OPS_PORT: '6002',
      LOG_LEVEL: 'debug',
      NATS_URL: 'tls://nats:4222',
      BUS_PREFIX: 'blue',
      WEBHOOK_CONCURRENCY: '3',
    });
    expect(config).toMatchObject({ grpcHost: '127.0.0.1', grpcPort: 6001, opsHost: '127.0.0.2', opsPort: 6002, logLevel: 'debug', natsUrl: 'tls://nats:4222', busPrefix: 'blue', concurrency: 3 });
  });

  it('names the variable it refuses', () => {
    expect(() => buildConfig({})).toThrow(/DATABASE_URL/);
    expect(() => buildConfig({ ...base, NATS_URL: 'http://nats:4222' })).toThrow(/NATS_URL/);
    expect(() => buildConfig({ ...base, BUS_PREFIX: 'Blue' })).toThrow(/BUS_PREFIX/);
    expect(() => buildConfig({ ...base, GRPC_PORT: '70000' })).toThrow(/GRPC_PORT/);
  });
});
