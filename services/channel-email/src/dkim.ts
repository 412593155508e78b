import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import DKIM from 'nodemailer/lib/dkim';
import { ConfigError } from '@rrs/runtime';

/**
 * DKIM (RFC 6376) for the SMTP provider: every message is signed before it reaches the SMTP pool, by
 * nodemailer's DKIM signer (relaxed/relaxed, rsa-sha256), once per selector. Two selectors are how a key
 * is rotated without a gap: publish the new selector's record, list `new,old` (every message carries
 * both signatures; a receiver needs one to verify), then drop the old one.
 */
export interface DkimKey {
  /** The `s=` tag: the key's record is TXT `<selector>._domainkey.<domain>`. */
  selector: string;
  privateKey: KeyObject;
  /** The `p=` tag of the record to publish: base64 of the public key's SubjectPublicKeyInfo (DER). */
  publicKey: string;
}

export interface DkimSettings {
  /** The `d=` tag; DMARC passes when it is the From domain or its organizational domain. */
  domain: string;
  /** Signing keys in the order of DKIM_SELECTORS; empty when the relay signs (DKIM_SIGNED_BY_RELAY). */
  keys: DkimKey[];
}

/** Signs a whole RFC 5322 message; the DKIM-Signature headers come first. */
export type DkimSigner = (raw: Buffer) => Promise<Buffer>;

const DKIM_HEADER = 'DKIM-Signature:';

/** Selectors a deployment signs with at once: the current one and, while rotating, the one before. */
export const MAX_DKIM_SELECTORS = 2;
/** RFC 8301 §3.2: signers MUST use RSA keys of at least 1024 bits (2048 recommended). */
const MIN_RSA_BITS = 1024;
const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const SELECTOR = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`, 'i');
const PEM_BLOCK = /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g;

/**
 * Headers every signature covers: nodemailer's default list (RFC 6376 §5.4.1's) plus
 * List-Unsubscribe-Post, which Gmail's one-click unsubscribe needs under the signature as well.
 */
const SIGNED_HEADERS =
  'From:Sender:Reply-To:Subject:Date:Message-ID:To:Cc:MIME-Version:Content-Type:Content-Transfer-Encoding:Content-ID:Content-Description:' +
  'Resent-Date:Resent-From:Resent-Sender:Resent-To:Resent-Cc:Resent-Message-ID:In-Reply-To:References:List-Id:List-Help:List-Unsubscribe:' +
  'List-Unsubscribe-Post:List-Subscribe:List-Post:List-Owner:List-Archive';

/**
 * DKIM_SELECTORS (comma-separated, at most two) and DKIM_PRIVATE_KEYS (the PEM private keys in the same
 * order, one after the other): checked at start, each naming the variable it comes from.
 */
export function parseDkimKeys(selectors: string, privateKeys: string): DkimKey[] {
  const names = selectors.split(',').map((name) => name.trim().toLowerCase()).filter(Boolean);
  if (names.length === 0 || names.length > MAX_DKIM_SELECTORS) throw new ConfigError('DKIM_SELECTORS', `must list one selector, or two while a key is rotated (the new one first): ${JSON.stringify(selectors)}`);
  for (const name of names) if (!SELECTOR.test(name)) throw new ConfigError('DKIM_SELECTORS', `${JSON.stringify(name)} is not a selector (DNS labels: letters, digits, -)`);
  if (new Set(names).size !== names.length) throw new ConfigError('DKIM_SELECTORS', 'lists a selector twice');
  const blocks = privateKeys.replace(/\\n/g, '\n').match(PEM_BLOCK) ?? [];
  if (blocks.length !== names.length) throw new ConfigError('DKIM_PRIVATE_KEYS', `holds ${blocks.length} PEM private key(s) for ${names.length} selector(s) in DKIM_SELECTORS: one key per selector, in the same order`);
  return names.map((selector, index) => {
    let privateKey: KeyObject;
    try {
      privateKey = createPrivateKey(blocks[index]);
    } catch (err) {
      throw new ConfigError('DKIM_PRIVATE_KEYS', `the key of selector ${selector} is not a readable unencrypted PEM private key (${(err as Error).message})`, { cause: err });
    }
    const bits = privateKey.asymmetricKeyDetails?.modulusLength ?? 0;
    if (privateKey.asymmetricKeyType !== 'rsa' || bits < MIN_RSA_BITS) {
      throw new ConfigError('DKIM_PRIVATE_KEYS', `the key of selector ${selector} must be RSA of at least ${MIN_RSA_BITS} bits (2048 recommended; make one with: openssl genrsa 2048), not ${privateKey.asymmetricKeyType} ${bits || ''}`.trim());
    }
    const publicKey = createPublicKey(privateKey).export({ type: 'spki', format: 'der' }).toString('base64');
    return { selector, privateKey, publicKey };
  });
}

/** The TXT record a selector's key is published as (RFC 6376 §3.6.1). */
export function dkimRecord(publicKey: string): string {
  return `v=DKIM1; k=rsa; p=${publicKey}`;
}

export function dkimSigner(settings: DkimSettings): DkimSigner {
  const signer = new DKIM({
    keys: settings.keys.map((key) => ({ domainName: settings.domain, keySelector: key.selector, privateKey: key.privateKey })),
    headerFieldNames: SIGNED_HEADERS,
  });
  return (raw) =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      const signed = signer.sign(raw);
      signed.on('data', (chunk: Buffer) => chunks.push(chunk));
      signed.once('error', reject);
      signed.once('end', () => {
        const message = Buffer.concat(chunks);
        // nodemailer leaves a signature out, without an error, when its key cannot sign: never send unsigned.
        if (message.subarray(0, DKIM_HEADER.length).toString('latin1') !== DKIM_HEADER) return reject(new Error('DKIM signing failed: the message came out without a DKIM-Signature'));
        resolve(message);
      });
    });
}
