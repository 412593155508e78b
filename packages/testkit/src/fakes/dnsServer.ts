/**
 * A local authoritative DNS server for tests: the records it is given, over UDP and TCP on one loopback
 * port, answered per RFC 1035 (packets by dns-packet). What the sender-domain check (SPF, DKIM, DMARC)
 * and DKIM verification query through a configured resolver, so they run against real DNS without the
 * internet. A name it has no record of is NXDOMAIN; a known name without the asked type is an empty answer.
 * A UDP answer longer than 512 bytes (a 2048-bit DKIM key) is sent truncated (TC), as a real server does,
 * and the resolver asks again over TCP.
 */
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import * as dnsPacket from 'dns-packet';

export interface DnsRecords {
  /** TXT records of a name; each record one string (split into 255-byte strings on the wire). */
  TXT?: string[];
  A?: string[];
  AAAA?: string[];
}

export interface FakeDnsServer {
  /** `127.0.0.1:<port>`: what a resolver is pointed at (e.g. DNS_RESOLVER). */
  address: string;
  port: number;
  /** Sets (replaces) the records of a name; `undefined` removes the name. */
  set(name: string, records: DnsRecords | undefined): void;
  /** Every question asked so far, as `TYPE name` (lower case). */
  readonly questions: string[];
  close(): Promise<void>;
}

const UDP_LIMIT = 512;
const RCODE = { NOERROR: 0, FORMERR: 1, NXDOMAIN: 3 } as const;
const TTL = 60;

/** Splits a TXT value into the 255-byte character-strings DNS carries it in (RFC 1035 §3.3.14). */
function characterStrings(value: string): Buffer[] {
  const bytes = Buffer.from(value, 'utf8');
  const parts: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += 255) parts.push(bytes.subarray(at, at + 255));
  return parts.length > 0 ? parts : [Buffer.alloc(0)];
}

export async function startFakeDnsServer(initial: Record<string, DnsRecords> = {}): Promise<FakeDnsServer> {
  const zone = new Map<string, DnsRecords>();
  const questions: string[] = [];
  const key = (name: string) => name.toLowerCase().replace(/\.$/, '');
  for (const [name, records] of Object.entries(initial)) zone.set(key(name), records);

  const answer = (query: dnsPacket.Packet): dnsPacket.Packet => {
    const question = query.questions?.[0];
    // The response code is the low four bits of the flags (dns-packet writes them as given).
    const base = (rcode: number) => ({ id: query.id, type: 'response' as const, flags: dnsPacket.AUTHORITATIVE_ANSWER | ((query.flags ?? 0) & dnsPacket.RECURSION_DESIRED) | rcode, questions: query.questions ?? [] });
    if (!question) return { ...base(RCODE.FORMERR), answers: [] };
    questions.push(`${question.type} ${key(question.name)}`);
    const records = zone.get(key(question.name));
    if (!records) return { ...base(RCODE.NXDOMAIN), answers: [] };
    const answers: dnsPacket.Answer[] = [];
    if (question.type === 'TXT') for (const value of records.TXT ?? []) answers.push({ type: 'TXT', name: question.name, ttl: TTL, class: 'IN', data: characterStrings(value) });
    if (question.type === 'A') for (const value of records.A ?? []) answers.push({ type: 'A', name: question.name, ttl: TTL, class: 'IN', data: value });
    if (question.type === 'AAAA') for (const value of records.AAAA ?? []) answers.push({ type: 'AAAA', name: question.name, ttl: TTL, class: 'IN', data: value });
    return { ...base(RCODE.NOERROR), answers };
  };

  const openUdp = (): UdpSocket => {
    const socket = createSocket('udp4');
    socket.on('message', (message, remote) => {
      let query: dnsPacket.Packet;
      try {
        query = dnsPacket.decode(message);
      } catch {
        return;
      }
      const response = answer(query);
      let bytes = dnsPacket.encode(response);
      if (bytes.length > UDP_LIMIT) bytes = dnsPacket.encode({ ...response, flags: (response.flags ?? 0) | dnsPacket.TRUNCATED_RESPONSE, answers: [] });
      socket.send(bytes, remote.port, remote.address);
    });
    return socket;
  };

  // The same port over TCP: two-byte length prefixes (RFC 1035 §4.2.2).
  const sockets = new Set<Socket>();
  const tcp: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const length = buffered.readUInt16BE(0);
        const message = buffered.subarray(2, 2 + length);
        buffered = buffered.subarray(2 + length);
        let query: dnsPacket.Packet;
        try {
          query = dnsPacket.decode(message);
        } catch {
          socket.destroy();
          return;
        }
        socket.write(dnsPacket.streamEncode(answer(query)));
      }
    });
  });
  // A free UDP port whose TCP twin is free too: a few tries, each on a port the system picked.
  let port = 0;
  let udp = openUdp();
  for (let attempt = 1; port === 0; attempt++) {
    if (attempt > 1) udp = openUdp();
    const socket = udp;
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, '127.0.0.1', () => resolve());
    });
    const candidate = udp.address().port;
    const listening = await new Promise<boolean>((resolve, reject) => {
      tcp.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' && attempt < 5 ? resolve(false) : reject(err)));
      tcp.listen(candidate, '127.0.0.1', () => resolve(true));
    });
    if (listening) port = candidate;
    else await new Promise((resolve) => socket.close(() => resolve(undefined)));
  }

  return {
    address: `127.0.0.1:${port}`,
    port: (tcp.address() as AddressInfo).port,
    set(name, records) {
      if (records) zone.set(key(name), records);
      else zone.delete(key(name));
    },
    questions,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await Promise.all([new Promise((resolve) => udp.close(() => resolve(undefined))), new Promise((resolve) => tcp.close(() => resolve(undefined)))]);
    },
  };
}
