import { connect } from 'node:net';
import { testContext } from '@rrs/testkit';
import { createMemoryBus, openBus, serveGrpc } from '../src';

/** Whether something accepts TCP connections on 127.0.0.1:port. */
const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

describe('serveGrpc', () => {
  it('listens on the port it returns, says so, and stops with the service', async () => {
    const ctx = testContext('serve-grpc');
    const port = await serveGrpc(ctx, { name: 'example', host: '127.0.0.1', port: 0, services: [], logFields: { mode: 'test' } });
    expect(port).toBeGreaterThan(0);
    expect(await listening(port)).toBe(true);
    const logged = ctx.logger.lines.map((line) => JSON.parse(line) as { msg: string; port?: number; mode?: string });
    expect(logged).toContainEqual(expect.objectContaining({ msg: 'example gRPC listening', port, mode: 'test' }));
    await ctx.stop();
    expect(await listening(port)).toBe(false);
  });
});

describe('openBus', () => {
  it('uses the bus handed in without any connection settings, and leaves closing it to its owner', async () => {
    const ctx = testContext('open-bus');
    const provided = createMemoryBus();
    const bus = await openBus({}, ctx, 'example', provided);
    await bus.ensureStreams();
    await ctx.stop();
    // Still open: the service did not take ownership of a bus it was given.
    await expect(provided.ensureStreams()).resolves.toBeUndefined();
    await provided.close();
  });

  it('refuses to start without a bus and without a NATS URL', async () => {
    const ctx = testContext('open-bus');
    await expect(openBus({}, ctx, 'example')).rejects.toThrow('example: no bus was handed in and no NATS URL is configured');
  });
});
