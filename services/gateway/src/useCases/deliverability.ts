import { Resolver } from 'node:dns/promises';
import { getDomain } from 'tldts';
import type { busV1 } from '@rrs/proto';

/*
 * The sender-domain check (docs/channels.md, "Deliverability"): what receiving servers (Gmail, Microsoft)
 * look up before they accept our mail, asked of DNS the same way: SPF at the domain, each DKIM selector's
 * key at `<selector>._domainkey.<d=>`, DMARC at `_dmarc.<domain>` (or at its organizational domain).
 * Each check says pass or fail and gives the record to publish. It knows nothing of HTTP: the admin
 * and account APIs show it.
 */

/** The TXT records of a name, each joined from its strings; [] when the name or the type does not exist. Throws when DNS does not answer. */
export type TxtLookup = (name: string) => Promise<string[]>;

export type CheckStatus = 'pass' | 'fail' | 'not_checked' | 'dns_error';

export interface RecordCheck {
  check: 'spf' | 'dkim' | 'dmarc';
  /** The DKIM selector; null for SPF and DMARC. */
  selector: string | null;
  status: CheckStatus;
  /** The DNS name looked up. */
  name: string;
  /** The records of the kind found there (SPF, DKIM or DMARC ones), as published. */
  found: string[];
  detail: string;
  /** The TXT record to publish at `name` (or to keep there); null when there is nothing of ours to publish. */
  record: string | null;
}

export interface DeliverabilityReport {
  domain: string;
  checkedAt: Date;
  checks: RecordCheck[];
}

/** RFC 7208 §4.6.4: at most 10 DNS-querying terms per evaluation. */
const SPF_LOOKUP_LIMIT = 10;
const SPF_RECORD = /^v=spf1(\s|$)/i;
const DMARC_RECORD = /^v=DMARC1\s*(;|$)/i;

/** DNS through the given servers (`DNS_RESOLVER`: `ip[:port]`, several for failover), or the system's when none. */
export function txtLookup(servers: readonly string[] = [], options: { timeoutMs?: number } = {}): TxtLookup {
  const resolver = new Resolver({ timeout: options.timeoutMs ?? 3_000, tries: 2 });
  if (servers.length > 0) resolver.setServers([...servers]);
  return async (name) => {
    try {
      return (await resolver.resolveTxt(name)).map((strings) => strings.join(''));
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === 'ENOTFOUND' || code === 'ENODATA') return [];
      throw err;
    }
  };
}

/** The organizational domain (RFC 7489 §3.2): the registrable domain by the Public Suffix List. */
export function organizationalDomain(domain: string): string {
  return getDomain(domain, { allowPrivateDomains: false }) ?? domain;
}

function dnsFailure(err: unknown): string {
  const code = (err as { code?: string }).code ?? (err as Error).message;
  return `DNS did not answer (${code}): try again, or check DNS_RESOLVER`;
}

/** Every check of the sender domain, in the order SPF, DKIM (per selector), DMARC. */
export async function checkSenderDomain(sender: busV1.SenderDomain, lookup: TxtLookup, now = new Date()): Promise<DeliverabilityReport> {
  const checks = await Promise.all([checkSpf(sender, lookup), ...dkimChecks(sender, lookup), checkDmarc(sender, lookup)]);
  return { domain: sender.domain, checkedAt: now, checks };
}

/** One SPF record's terms, lower case, qualifier `+` dropped (it is the default). */
function spfTerms(record: string): string[] {
  return record.split(/\s+/).slice(1).filter(Boolean).map((term) => term.toLowerCase().replace(/^\+/, ''));
}

/**
 * Whether the domain's SPF authorizes each expected term: the term is in its record, or in a record it
 * reaches through `include:` and `redirect=` (at most 10 look-ups, as RFC 7208 allows an evaluation).
 */
async function checkSpf(sender: busV1.SenderDomain, lookup: TxtLookup): Promise<RecordCheck> {
  const base = { check: 'spf' as const, selector: null, name: sender.domain };
  const expected = sender.spfTerms.map((term) => term.toLowerCase().replace(/^\+/, ''));
  let records: string[];
  try {
    records = (await lookup(sender.domain)).filter((text) => SPF_RECORD.test(text));
  } catch (err) {
    return { ...base, status: 'dns_error', found: [], detail: dnsFailure(err), record: null };
  }
  if (expected.length === 0) {
    return { ...base, status: 'not_checked', found: records, detail: 'No SMTP server of ours to authorize: the sender does not send over SMTP (Postmark sends from its own return-path domain).', record: null };
  }
  const suggested = `v=spf1 ${expected.join(' ')} ~all`;
  if (records.length === 0) return { ...base, status: 'fail', found: [], detail: `No SPF record: receivers cannot tell that ${expected.join(', ')} may send for ${sender.domain}.`, record: suggested };
  if (records.length > 1) return { ...base, status: 'fail', found: records, detail: 'More than one SPF record: receivers treat that as an error (RFC 7208 §3.2). Merge them into one.', record: mergeSpf(records[0], expected) };
  const terms = spfTerms(records[0]);
  if (terms.includes('all')) return { ...base, status: 'fail', found: records, detail: '"+all" lets every server on the internet send as the domain: receivers distrust it.', record: mergeSpf(records[0].replace(/(^|\s)\+?all(?=\s|$)/i, ''), expected) };
  const reached = new Set(terms);
  const seen = new Set<string>([sender.domain.toLowerCase()]);
  let lookups = 0;
  const queue = terms.map(spfTarget).filter((target): target is string => target !== undefined);
  try {
    while (queue.length > 0 && lookups < SPF_LOOKUP_LIMIT && expected.some((term) => !reached.has(term))) {
      const next = queue.shift()!;
      if (seen.has(next)) continue;
      seen.add(next);
      lookups++;
      const found = (await lookup(next)).filter((text) => SPF_RECORD.test(text));
      for (const term of found.length === 1 ? spfTerms(found[0]) : []) {
        reached.add(term);
        const target = spfTarget(term);
        if (target) queue.push(target);
      }
    }
  } catch (err) {
    return { ...base, status: 'dns_error', found: records, detail: dnsFailure(err), record: null };
  }
  const missing = expected.filter((term) => !reached.has(term));
  if (missing.length > 0) return { ...base, status: 'fail', found: records, detail: `The SPF record does not authorize ${missing.join(', ')}: mail from there fails SPF.`, record: mergeSpf(records[0], missing) };
  return { ...base, status: 'pass', found: records, detail: `Authorizes ${expected.join(', ')}.`, record: records[0] };
}

/** The domain an `include:` or `redirect=` term sends the evaluation to. */
function spfTarget(term: string): string | undefined {
  return /^(?:include:|redirect=)(.+)$/.exec(term)?.[1];
}

/** The record with the missing terms added before its `all` (or `redirect=`), or before a `~all` added at the end. */
function mergeSpf(record: string, missing: readonly string[]): string {
  const terms = record.trim().split(/\s+/).slice(1);
  const last = terms.findIndex((term) => /^[+~?-]?all$/i.test(term) || /^redirect=/i.test(term));
  const add = missing.filter((term) => !terms.map((t) => t.toLowerCase().replace(/^\+/, '')).includes(term));
  const merged = last < 0 ? [...terms, ...add, '~all'] : [...terms.slice(0, last), ...add, ...terms.slice(last)];
  return `v=spf1 ${merged.join(' ')}`;
}

/** DKIM tags (`k=v; …`), names lower case, values without folding whitespace. */
function tags(record: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of record.split(';')) {
    const at = part.indexOf('=');
    if (at > 0) out.set(part.slice(0, at).trim().toLowerCase(), part.slice(at + 1).replace(/\s+/g, ''));
  }
  return out;
}

function dkimChecks(sender: busV1.SenderDomain, lookup: TxtLookup): Array<Promise<RecordCheck>> {
  if (sender.dkimKeys.length === 0) {
    const name = sender.dkimDomain || sender.domain;
    if (sender.dkimSignedBy === 'relay' || sender.dkimSignedBy === 'postmark') {
      const detail =
        sender.dkimSignedBy === 'relay'
          ? 'Your SMTP relay signs (DKIM_SIGNED_BY_RELAY): publish the DKIM record it gives you; its key is not ours to compare.'
          : 'Postmark signs its sends: publish the DKIM record Postmark shows for the domain.';
      return [Promise.resolve({ check: 'dkim', selector: null, status: 'not_checked', name, found: [], detail, record: null })];
    }
    // Unsigned mail is refused by Gmail and Microsoft: a sender that signs nothing (the demo sink) fails.
    return [Promise.resolve({ check: 'dkim', selector: null, status: 'fail', name, found: [], detail: 'Nothing signs the mail: give channel-email DKIM_SELECTORS and DKIM_PRIVATE_KEYS (the demo sink delivers nothing at all).', record: null })];
  }
  return sender.dkimKeys.map(async (key) => {
    const name = `${key.selector}._domainkey.${sender.dkimDomain}`;
    const record = `v=DKIM1; k=rsa; p=${key.publicKey}`;
    const base = { check: 'dkim' as const, selector: key.selector, name, record };
    let found: string[];
    try {
      found = (await lookup(name)).filter((text) => tags(text).has('p'));
    } catch (err) {
      return { ...base, status: 'dns_error' as const, found: [], detail: dnsFailure(err) };
    }
    if (found.length === 0) return { ...base, status: 'fail' as const, found, detail: `No DKIM key is published for selector ${key.selector}: receivers cannot verify its signatures.` };
    const published = found.map((text) => tags(text).get('p') ?? '');
    if (published.includes(key.publicKey)) return { ...base, status: 'pass' as const, found, detail: `The published key is the one selector ${key.selector} signs with.` };
    if (published.every((p) => p === '')) return { ...base, status: 'fail' as const, found, detail: `The record of selector ${key.selector} is revoked (empty p=).` };
    return { ...base, status: 'fail' as const, found, detail: `The key published for selector ${key.selector} is not the one it signs with: its signatures fail.` };
  });
}

async function checkDmarc(sender: busV1.SenderDomain, lookup: TxtLookup): Promise<RecordCheck> {
  const organization = organizationalDomain(sender.domain);
  const suggested = `v=DMARC1; p=none`;
  let name = `_dmarc.${sender.domain}`;
  let records: string[];
  try {
    records = (await lookup(name)).filter((text) => DMARC_RECORD.test(text));
    // RFC 7489 §6.6.3: no record at the From domain → the organizational domain's applies.
    if (records.length === 0 && organization !== sender.domain) {
      const atOrganization = (await lookup(`_dmarc.${organization}`)).filter((text) => DMARC_RECORD.test(text));
      if (atOrganization.length > 0) {
        name = `_dmarc.${organization}`;
        records = atOrganization;
      }
    }
  } catch (err) {
    return { check: 'dmarc', selector: null, status: 'dns_error', name, found: [], detail: dnsFailure(err), record: null };
  }
  const base = { check: 'dmarc' as const, selector: null, name };
  if (records.length === 0) return { ...base, status: 'fail', found: [], detail: `No DMARC record: Gmail and Microsoft require one of bulk senders. Start with p=none and tighten it once reports are clean.`, record: suggested };
  if (records.length > 1) return { ...base, status: 'fail', found: records, detail: 'More than one DMARC record: receivers then apply none (RFC 7489 §6.6.3). Keep one.', record: records[0] };
  const policy = tags(records[0]);
  if (!['none', 'quarantine', 'reject'].includes((policy.get('p') ?? '').toLowerCase())) return { ...base, status: 'fail', found: records, detail: 'The DMARC record has no valid policy (p=none, quarantine or reject).', record: suggested };
  if (sender.dkimKeys.length > 0) {
    const strict = (policy.get('adkim') ?? 'r').toLowerCase() === 's';
    const aligned = strict ? sender.dkimDomain === sender.domain : organizationalDomain(sender.dkimDomain) === organization;
    if (!aligned) {
      return { ...base, status: 'fail', found: records, detail: `Our DKIM signs for ${sender.dkimDomain}, which does not align with the From domain ${sender.domain}${strict ? ' (adkim=s asks for the same domain)' : ''}: DMARC fails on DKIM. Set DKIM_DOMAIN to ${sender.domain}.`, record: records[0] };
    }
  }
  return { ...base, status: 'pass', found: records, detail: `Policy p=${policy.get('p')}${sender.dkimKeys.length > 0 ? `; our DKIM signature (d=${sender.dkimDomain}) aligns with the From domain` : ''}.`, record: records[0] };
}
