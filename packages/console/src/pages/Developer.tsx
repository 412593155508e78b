import { useEffect, useState } from 'preact/hooks';
import { formatDay, formatWhen } from '../time';
import { call } from '../api';
import { canChange, ErrorNote, ReadOnlyNote, type PageProps, Scroll } from '../widgets';
import { SCOPES } from '../rules';
import { WebhooksSection } from './Webhooks';

interface ApiKey {
  id: string;
  name: string;
  scopes: string[];
  prefix: string;
  last4: string;
  createdAt: string;
  revokedAt: string | null;
}

/** The developer section: API keys (create with scopes, the secret shown once, revoke), webhook endpoints (./Webhooks.tsx) and the API reference. */
export function DeveloperPage({ t, session }: PageProps) {
  const [keys, setKeys] = useState<ApiKey[] | null>(null);
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>([...SCOPES]);
  const [secret, setSecret] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const writable = canChange(session);

  const load = () => call<{ apiKeys: ApiKey[] }>('GET', '/api-keys').then((r) => setKeys(r.apiKeys), setError);
  useEffect(() => {
    void load();
  }, []);

  const create = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      const r = await call<{ secret: string }>('POST', '/api-keys', { body: { name: name || undefined, scopes } });
      setSecret(r.secret);
      setName('');
      await load();
    } catch (err) {
      setError(err);
    }
  };
  const revoke = async (key: ApiKey) => {
    setError(null);
    try {
      await call('DELETE', `/api-keys/${encodeURIComponent(key.id)}`);
      await load();
    } catch (err) {
      setError(err);
    }
  };
  const toggle = (scope: string) => setScopes(scopes.includes(scope) ? scopes.filter((s) => s !== scope) : [...scopes, scope]);

  return (
    <section>
      <h1>{t('developer')}</h1>
      <ReadOnlyNote t={t} session={session} />
      <ErrorNote error={error} t={t} />
      <h2>{t('apiKeys')}</h2>
      {secret && (
        <div class="secret" role="status">
          <p>{t('secretOnce')}</p>
          <label for="new-secret">{t('newSecret')}</label>
          <input id="new-secret" readOnly value={secret} onFocus={(e) => e.currentTarget.select()} />
        </div>
      )}
      {keys === null ? (
        <p role="status">{t('loading')}</p>
      ) : keys.length === 0 ? (
        <p>{t('noKeys')}</p>
      ) : (
        <Scroll label={t('apiKeys')}>
<table>
          <caption>{t('apiKeys')}</caption>
          <thead>
            <tr>
              <th scope="col">{t('name')}</th>
              <th scope="col">{t('key')}</th>
              <th scope="col">{t('scopes')}</th>
              <th scope="col">{t('created')}</th>
              <th scope="col">{t('status')}</th>
              {writable && <td />}
            </tr>
          </thead>
          <tbody>
            {keys.map((k) => (
              <tr key={k.id}>
                <td>{k.name || '—'}</td>
                <td>
                  <code>
                    {k.prefix}…{k.last4}
                  </code>
                </td>
                <td>{k.scopes.join(', ')}</td>
                <td>{formatWhen(session, k.createdAt)}</td>
                <td>{k.revokedAt ? t('revoked') : t('active')}</td>
                {writable && (
                  <td>
                    {!k.revokedAt && (
                      <button type="button" class="danger" aria-label={`${t('revoke')} ${k.name || k.prefix}`} onClick={() => revoke(k)}>
                        {t('revoke')}
                      </button>
                    )}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
</Scroll>
      )}
      {writable && (
        <form onSubmit={create} class="card">
          <h3>{t('newKey')}</h3>
          <label for="key-name">{t('keyName')}</label>
          <input id="key-name" value={name} maxLength={200} onInput={(e) => setName(e.currentTarget.value)} />
          <fieldset>
            <legend>{t('scopes')}</legend>
            {SCOPES.map((scope) => (
              <label key={scope} class="check">
                <input type="checkbox" checked={scopes.includes(scope)} onChange={() => toggle(scope)} /> {scope}
              </label>
            ))}
          </fieldset>
          <button type="submit" disabled={scopes.length === 0}>
            {t('createKey')}
          </button>
        </form>
      )}
      <WebhooksSection t={t} writable={writable} session={session} />
      <section aria-labelledby="api-reference-title">
        <h2 id="api-reference-title">{t('apiReference')}</h2>
        <p>{t('apiReferenceNote')}</p>
        <ul>
          <li>
            <a href="/docs">{t('openApiReference')}</a>
          </li>
          <li>
            <a href="/api/v1/openapi.json">{t('openApiDocument')}</a>
          </li>
        </ul>
      </section>
    </section>
  );
}
