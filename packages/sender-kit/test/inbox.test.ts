import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { devInboxRouter, SinkOutbox } from '../src';

describe('dev inbox router', () => {
  const outbox = new SinkOutbox(3);
  let server: http.Server;
  let base: string;

  beforeAll(async () => {
    const app = express();
    app.use(devInboxRouter(outbox));
    server = http.createServer(app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('lists every sink message newest first as JSON, and filters by recipient', async () => {
    expect(await (await fetch(`${base}/dev/messages`)).json()).toEqual({ messages: [] });
    outbox.record({ channel: 'EMAIL', stepId: 's1', to: 'a@example.com', subject: 'Rate us', text: 'Hi https://x/r/1', link: 'https://x/r/1', sentAt: new Date('2026-01-01T10:00:00Z') });
    outbox.record({ channel: 'SMS', stepId: 's2', to: '+79161234567', subject: '', text: 'Hi https://x/r/2', link: 'https://x/r/2', sentAt: new Date('2026-01-01T10:01:00Z') });
    const res = await fetch(`${base}/dev/messages`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      messages: [
        { channel: 'SMS', stepId: 's2', to: '+79161234567', subject: null, text: 'Hi https://x/r/2', link: 'https://x/r/2', sentAt: '2026-01-01T10:01:00.000Z' },
        { channel: 'EMAIL', stepId: 's1', to: 'a@example.com', subject: 'Rate us', text: 'Hi https://x/r/1', link: 'https://x/r/1', sentAt: '2026-01-01T10:00:00.000Z' },
      ],
    });
    const filtered = (await (await fetch(`${base}/dev/messages?to=a@example.com`)).json()) as { messages: Array<{ stepId: string }> };
    expect(filtered.messages.map((m) => m.stepId)).toEqual(['s1']);
  });

  it('renders an HTML page with every message, escaped, with clickable links', async () => {
    outbox.record({ channel: 'MAX', stepId: 's3', to: '+7916', subject: '', text: '<script>alert(1)</script>', link: 'https://x/r/3' });
    const res = await fetch(`${base}/dev/inbox`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).not.toContain('<script>');
    expect(html).toContain('<a href="https://x/r/3">https://x/r/3</a>');
    expect(html).toContain('+79161234567');
  });

  it('keeps only the newest messages up to its capacity', () => {
    outbox.record({ channel: 'SMS', stepId: 's4', to: 'x', subject: '', text: '', link: '' });
    expect(outbox.list().map((m) => m.stepId)).toEqual(['s2', 's3', 's4']);
  });

  it('after wrapping round many times still lists exactly the newest messages, oldest first', () => {
    const small = new SinkOutbox(3);
    for (let n = 1; n <= 8; n++) {
      small.record({ channel: 'SMS', stepId: `w${n}`, to: 'x', subject: '', text: '', link: '' });
      const expected = Array.from({ length: Math.min(n, 3) }, (_, k) => `w${n - Math.min(n, 3) + 1 + k}`);
      expect(small.list().map((m) => m.stepId)).toEqual(expected);
    }
  });
});
