import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { busV1 } from '@rrs/proto';
import { startFakeDnsServer, type FakeDnsServer } from '@rrs/testkit';
import { checkSenderDomain, organizationalDomain, txtLookup, type RecordCheck } from '../src/useCases/deliverability';

/**
 * The sender-domain check (issue 29) against a real DNS server on loopback: SPF, each DKIM selector's
 * key, DMARC; each pass or fail with the record to publish.
 */
const publicKeyOf = () => createPublicKey(generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey).export({ type: 'spki', format: 'der' }).toString('base64');
const OURS = publicKeyOf();
const PREVIOUS = publicKeyOf();
const STRANGER = publicKeyOf();

const sender = (overrides: Partial<busV1.SenderDomain> = {}): busV1.SenderDomain => ({
  domain: 'shop.example',
  dkimDomain: 'shop.example',
  dkimKeys: [{ selector: 'rrs2026', publicKey: OURS }, { selector: 'rrs2025', publicKey: PREVIOUS }],
  dkimSignedBy: '',
  spfTerms: ['include:_spf.mailer.example'],
  ...overrides,
});

describe('the sender-domain check through a DNS server', () => {
  let dns: FakeDnsServer;
  const lookup = () => txtLookup([dns.address], { timeoutMs: 1_000 });
  const byName = (checks: RecordCheck[]) => Object.fromEntries(checks.map((c) => [c.selector ? `${c.check}:${c.selector}` : c.check, c]));

  beforeEach(async () => {
    dns = await startFakeDnsServer({
      // SPF reaches the relay's term through an include of the domain's own.
      'shop.example': { TXT: ['google-site-verification=abc', 'v=spf1 include:_spf.shop.example ~all'] },
      '_spf.shop.example': { TXT: ['v=spf1 ip4:203.0.113.7 include:_spf.mailer.example -all'] },
      'rrs2026._domainkey.shop.example': { TXT: [`v=DKIM1; k=rsa; p=${OURS}`] },
      'rrs2025._domainkey.shop.example': { TXT: [`v=DKIM1; k=rsa; p=${PREVIOUS}`] },
      '_dmarc.shop.example': { TXT: ['v=DMARC1; p=quarantine; rua=mailto:dmarc@shop.example'] },
    });
  });
  afterEach(async () => {
    await dns.close();
  });

  it('passes SPF (through an include), both DKIM selectors and DMARC, naming what it looked up', async () => {
    const report = await checkSenderDomain(sender(), lookup());
    expect(report.domain).toBe('shop.example');
    expect(report.checks.map((c) => [c.check, c.selector, c.status, c.name])).toEqual([
      ['spf', null, 'pass', 'shop.example'],
      ['dkim', 'rrs2026', 'pass', 'rrs2026._domainkey.shop.example'],
      ['dkim', 'rrs2025', 'pass', 'rrs2025._domainkey.shop.example'],
      ['dmarc', null, 'pass', '_dmarc.shop.example'],
    ]);
    expect(byName(report.checks).spf.found).toEqual(['v=spf1 include:_spf.shop.example ~all']);
    expect(dns.questions).toEqual(expect.arrayContaining(['TXT shop.example', 'TXT _spf.shop.example', 'TXT rrs2026._domainkey.shop.example', 'TXT _dmarc.shop.example']));
  });

  it('fails each missing record and gives the one to publish', async () => {
    for (const name of ['shop.example', 'rrs2026._domainkey.shop.example', '_dmarc.shop.example']) dns.set(name, undefined);
    const checks = byName((await checkSenderDomain(sender(), lookup())).checks);
    expect(checks.spf).toMatchObject({ status: 'fail', found: [], record: 'v=spf1 include:_spf.mailer.example ~all' });
    expect(checks['dkim:rrs2026']).toMatchObject({ status: 'fail', found: [], record: `v=DKIM1; k=rsa; p=${OURS}` });
    expect(checks['dkim:rrs2025'].status).toBe('pass');
    expect(checks.dmarc).toMatchObject({ status: 'fail', record: 'v=DMARC1; p=none' });
    expect(checks.dmarc.detail).toMatch(/Gmail and Microsoft/);
  });

  it('fails an SPF record that does not authorize our servers, giving it back with the term added before its all', async () => {
    dns.set('shop.example', { TXT: ['v=spf1 mx -all'] });
    expect(byName((await checkSenderDomain(sender(), lookup())).checks).spf).toMatchObject({ status: 'fail', found: ['v=spf1 mx -all'], record: 'v=spf1 mx include:_spf.mailer.example -all' });
    dns.set('shop.example', { TXT: ['v=spf1 include:_spf.mailer.example ~all', 'v=spf1 mx -all'] });
    expect(byName((await checkSenderDomain(sender(), lookup())).checks).spf).toMatchObject({ status: 'fail', detail: expect.stringMatching(/More than one SPF record/) });
    dns.set('shop.example', { TXT: ['v=spf1 +all'] });
    expect(byName((await checkSenderDomain(sender(), lookup())).checks).spf).toMatchObject({ status: 'fail', record: 'v=spf1 include:_spf.mailer.example ~all' });
  });

  it('fails a DKIM record whose key is not ours, or revoked', async () => {
    dns.set('rrs2026._domainkey.shop.example', { TXT: [`v=DKIM1; k=rsa; p=${STRANGER}`] });
    dns.set('rrs2025._domainkey.shop.example', { TXT: ['v=DKIM1; k=rsa; p='] });
    const checks = byName((await checkSenderDomain(sender(), lookup())).checks);
    expect(checks['dkim:rrs2026']).toMatchObject({ status: 'fail', detail: expect.stringMatching(/not the one it signs with/), record: `v=DKIM1; k=rsa; p=${OURS}` });
    expect(checks['dkim:rrs2025']).toMatchObject({ status: 'fail', detail: expect.stringMatching(/revoked/) });
  });

  it("takes DMARC from the organizational domain when the From domain has none, and fails a d= that does not align", async () => {
    const sub = sender({ domain: 'mail.shop.example', dkimDomain: 'mail.shop.example', spfTerms: [] });
    dns.set('rrs2026._domainkey.mail.shop.example', { TXT: [`v=DKIM1; k=rsa; p=${OURS}`] });
    dns.set('rrs2025._domainkey.mail.shop.example', { TXT: [`v=DKIM1; k=rsa; p=${PREVIOUS}`] });
    const checks = byName((await checkSenderDomain(sub, lookup())).checks);
    expect(checks.dmarc).toMatchObject({ status: 'pass', name: '_dmarc.shop.example' });
    expect(checks.spf.status).toBe('not_checked');
    dns.set('rrs2026._domainkey.other.example', { TXT: [`v=DKIM1; k=rsa; p=${OURS}`] });
    const misaligned = byName((await checkSenderDomain(sender({ dkimDomain: 'other.example', dkimKeys: [{ selector: 'rrs2026', publicKey: OURS }] }), lookup())).checks);
    expect(misaligned['dkim:rrs2026'].status).toBe('pass');
    expect(misaligned.dmarc).toMatchObject({ status: 'fail', detail: expect.stringMatching(/does not align/) });
    expect(organizationalDomain('mail.shop.co.uk')).toBe('shop.co.uk');
  });

  it('does not check a key that is not ours: the relay or Postmark signs', async () => {
    for (const signedBy of ['relay', 'postmark']) {
      const checks = (await checkSenderDomain(sender({ dkimKeys: [], dkimSignedBy: signedBy }), lookup())).checks.filter((c) => c.check === 'dkim');
      expect(checks).toEqual([expect.objectContaining({ status: 'not_checked', record: null })]);
    }
    // Nobody signing (the demo sink) is no pass.
    const unsigned = (await checkSenderDomain(sender({ dkimKeys: [], dkimSignedBy: '', spfTerms: [] }), lookup())).checks.filter((c) => c.check === 'dkim');
    expect(unsigned).toEqual([expect.objectContaining({ status: 'fail', detail: expect.stringMatching(/Nothing signs/) })]);
  });

  it('says when DNS does not answer, rather than pass or fail', async () => {
    // A UDP port nobody answers on, and no TCP either: every look-up times out.
    const silent = createSocket('udp4');
    await new Promise<void>((resolve) => silent.bind(0, '127.0.0.1', () => resolve()));
    try {
      const report = await checkSenderDomain(sender(), txtLookup([`127.0.0.1:${silent.address().port}`], { timeoutMs: 200 }));
      expect(report.checks.map((c) => c.status)).toEqual(['dns_error', 'dns_error', 'dns_error', 'dns_error']);
      expect(report.checks[0].detail).toMatch(/DNS did not answer/);
    } finally {
      silent.close();
    }
  });
});
