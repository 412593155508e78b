import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, StorageType } from 'nats';
import { freePort } from './servers';

/**
 * A private three-node `nats-server` cluster with JetStream (routes between all nodes, one store
 * directory per node, kept across a node's restart), on free loopback ports. For tests of replicated
 * streams and of a node lost; the shared server on 4222 is never touched.
 */
export interface NatsCluster {
  /** The client URL of each node, in node order. */
  urls: string[];
  /** All client URLs, comma separated: what `NATS_URL` holds in a cluster. */
  url: string;
  /** The server name of each node (`n0`, `n1`, `n2`): what JetStream reports as a stream's leader. */
  names: string[];
  /** Kills a node (SIGKILL) and waits for it to exit. */
  kill(node: number): Promise<void>;
  /** Restarts a killed node on the same ports and data; resolves once it accepts clients. */
  start(node: number): Promise<void>;
  /** Kills every node and deletes the data. */
  remove(): Promise<void>;
}

const NODES = 3;

export async function startNatsCluster(): Promise<NatsCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'rrs-nats-cluster-'));
  const clientPorts: number[] = [];
  const routePorts: number[] = [];
  for (let i = 0; i < NODES; i++) {
    clientPorts.push(await freePort());
    routePorts.push(await freePort());
  }
  const names = clientPorts.map((_, i) => `n${i}`);
  const children: (ChildProcess | undefined)[] = new Array(NODES).fill(undefined);
  const routes = routePorts.map((p) => `nats-route://127.0.0.1:${p}`);
  for (let i = 0; i < NODES; i++) {
    writeFileSync(
      join(dir, `${names[i]}.conf`),
      [
        `server_name: ${names[i]}`,
        `listen: 127.0.0.1:${clientPorts[i]}`,
        `jetstream { store_dir: "${join(dir, names[i])}" }`,
        `cluster { name: rrs-test, listen: 127.0.0.1:${routePorts[i]}, routes: [${routes.filter((_, j) => j !== i).join(', ')}] }`,
      ].join('\n'),
    );
  }
  const urls = clientPorts.map((p) => `nats://127.0.0.1:${p}`);

  const kill = async (node: number): Promise<void> => {
    const child = children[node];
    children[node] = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  };
  const start = async (node: number): Promise<void> => {
    if (children[node]) return;
    const child = spawn('nats-server', ['-c', join(dir, `${names[node]}.conf`)], { stdio: 'ignore' });
    children[node] = child;
    const failed = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`nats-server ${names[node]} exited with ${code}`))));
    failed.catch(() => undefined);
    // Bounded: 200 tries 50 ms apart.
    for (let attempt = 0; attempt < 200; attempt++) {
      const up = await Promise.race([
        connect({ servers: urls[node], reconnect: false, timeout: 500 }).then(
          (nc) => nc.close().then(() => true),
          () => false,
        ),
        failed,
      ]);
      if (up) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await kill(node);
    throw new Error(`nats-server ${names[node]} did not accept clients on ${urls[node]}`);
  };
  const remove = async (): Promise<void> => {
    for (let i = 0; i < NODES; i++) await kill(i);
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    await Promise.all(names.map((_, i) => start(i)));
    await untilJetStreamPlaces(urls);
  } catch (err) {
    await remove();
    throw err;
  }
  return { urls, url: urls.join(','), names, kill, start, remove };
}

/**
 * Resolves once the cluster can place a stream on all its nodes: a probe stream with one replica per node
 * is created and deleted. The meta leader answers account info before every peer has reported in, and a
 * replicated stream created then fails with "no suitable peers for placement" (CI saw it on a loaded
 * machine). Bounded: 30 s.
 */
export async function untilJetStreamPlaces(urls: string[], replicas = urls.length): Promise<void> {
  const nc = await connect({ servers: urls });
  try {
    const deadline = Date.now() + 30_000;
    for (let attempt = 0; ; attempt++) {
      const name = `READY_PROBE_${process.pid}_${attempt}`;
      try {
        const jsm = await nc.jetstreamManager({ timeout: 2_000 });
        await jsm.streams.add({ name, subjects: [`ready-probe.${process.pid}.${attempt}`], num_replicas: replicas, storage: StorageType.Memory });
        await jsm.streams.delete(name);
        return;
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`the NATS cluster cannot place a stream on ${replicas} nodes: ${(err as Error).message}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  } finally {
    await nc.close();
  }
}
