import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { canChange, type PageProps } from '../widgets';
import { ConfigHeader, EditorForm, ListTable } from '../configParts';
import { useAction } from '../parts';
import { REVIEW_PLATFORMS, reviewLinkOf, type ReviewPlatform } from '../rules';

export interface Location {
  id: string;
  name: string;
  address: string;
  city: string;
  timeZone: string;
  reviewLinks: Array<{ provider: string; url: string }>;
}

type Draft = Omit<Location, 'id'>;
const EMPTY: Draft = { name: '', address: '', city: '', timeZone: '', reviewLinks: [] };

/** Locations: the list, and one form that creates a location or edits the one chosen, with the review-link builders. */
export function LocationsPage({ t, session }: PageProps) {
  const [locations, setLocations] = useState<Location[] | null>(null);
  const [editing, setEditing] = useState<Location | null>(null);
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const [saved, setSaved] = useState(false);
  const action = useAction();
  const writable = canChange(session);

  const load = () => call<{ locations: Location[] }>('GET', '/locations').then((r) => setLocations(r.locations), action.setError);
  useEffect(() => {
    void load();
  }, []);

  const startEdit = (location: Location | null) => {
    setEditing(location);
    setDraft(location ? { name: location.name, address: location.address, city: location.city, timeZone: location.timeZone, reviewLinks: location.reviewLinks } : EMPTY);
    setSaved(false);
    action.setError(null);
  };
  const field = (name: 'name' | 'address' | 'city' | 'timeZone') => (e: Event) => setDraft({ ...draft, [name]: (e.currentTarget as HTMLInputElement).value });
  const setLink = (index: number, part: 'provider' | 'url', value: string) => setDraft({ ...draft, reviewLinks: draft.reviewLinks.map((l, i) => (i === index ? { ...l, [part]: value } : l)) });

  const submit = () => {
    setSaved(false);
    void action.run(async () => {
      const body = { ...draft, name: draft.name.trim(), reviewLinks: draft.reviewLinks.filter((l) => l.url.trim()) };
      if (editing) await call('PATCH', `/locations/${encodeURIComponent(editing.id)}`, { body });
      else await call('POST', '/locations', { body });
      startEdit(null);
      setSaved(true);
      await load();
    });
  };

  const title = editing ? t('editLocation', { name: editing.name }) : t('newLocation');
  return (
    <section>
      <ConfigHeader t={t} session={session} title="locations" error={action.error} saved={saved} />
      <ListTable
        t={t}
        items={locations}
        caption="locations"
        empty="noLocations"
        head={
          <>
            <th scope="col">{t('name')}</th>
            <th scope="col">{t('address')}</th>
            <th scope="col">{t('city')}</th>
            <th scope="col">{t('timeZone')}</th>
            <th scope="col">{t('reviewLinks')}</th>
            {writable && <td />}
          </>
        }
        row={(l) => (
          <tr key={l.id}>
            <td>{l.name}</td>
            <td>{l.address || '—'}</td>
            <td>{l.city || '—'}</td>
            <td>{l.timeZone || '—'}</td>
            <td>
              {l.reviewLinks.length === 0
                ? '—'
                : l.reviewLinks.map((link, i) => (
                    <div key={i}>
                      <a href={link.url} rel="noopener noreferrer" target="_blank">
                        {link.provider}
                      </a>
                    </div>
                  ))}
            </td>
            {writable && (
              <td>
                <button type="button" aria-label={t('editItem', { name: l.name })} onClick={() => startEdit(l)}>
                  {t('edit')}
                </button>
              </td>
            )}
          </tr>
        )}
      />
      {writable && (
        <EditorForm t={t} title={title} busy={action.busy} editing={editing !== null} onSubmit={submit} onCancel={() => startEdit(null)}>
          <label for="location-name">{t('name')}</label>
          <input id="location-name" required maxLength={200} value={draft.name} onInput={field('name')} />
          <label for="location-address">{t('address')}</label>
          <input id="location-address" maxLength={500} value={draft.address} onInput={field('address')} />
          <label for="location-city">{t('city')}</label>
          <input id="location-city" maxLength={200} value={draft.city} onInput={field('city')} />
          <label for="location-tz">{t('timeZone')}</label>
          <input id="location-tz" maxLength={64} value={draft.timeZone} onInput={field('timeZone')} aria-describedby="location-tz-hint" />
          <p id="location-tz-hint" class="hint">
            {t('locationTimeZoneHint')}
          </p>
          <fieldset>
            <legend>{t('reviewLinks')}</legend>
            {draft.reviewLinks.map((link, i) => (
              <div key={i} class="filters">
                <label>
                  {t('reviewPlatform')} {i + 1}
                  <input value={link.provider} maxLength={32} required onInput={(e) => setLink(i, 'provider', e.currentTarget.value)} />
                </label>
                <label>
                  {t('reviewUrl')} {i + 1}
                  <input type="url" value={link.url} maxLength={2048} required onInput={(e) => setLink(i, 'url', e.currentTarget.value)} />
                </label>
                <button type="button" class="danger" onClick={() => setDraft({ ...draft, reviewLinks: draft.reviewLinks.filter((_, j) => j !== i) })}>
                  {t('removeLink', { n: i + 1 })}
                </button>
              </div>
            ))}
            <button type="button" onClick={() => setDraft({ ...draft, reviewLinks: [...draft.reviewLinks, { provider: '', url: '' }] })}>
              {t('addLink')}
            </button>
            <LinkBuilder t={t} onAdd={(provider, url) => setDraft({ ...draft, reviewLinks: [...draft.reviewLinks, { provider, url }] })} />
          </fieldset>
        </EditorForm>
      )}
    </section>
  );
}

/** A platform's id in, its write-a-review link out (proto/src/reviewLinks.ts), shown before it is added. */
function LinkBuilder({ t, onAdd }: { t: PageProps['t']; onAdd: (provider: ReviewPlatform, url: string) => void }) {
  const [platform, setPlatform] = useState<ReviewPlatform>('google');
  const [id, setId] = useState('');
  const url = id.trim() ? reviewLinkOf(platform, id) : null;
  return (
    <div class="card">
      <h3>{t('linkHelpers')}</h3>
      <label for="link-platform">{t('reviewPlatform')}</label>
      <select id="link-platform" value={platform} onChange={(e) => setPlatform(e.currentTarget.value as ReviewPlatform)}>
        {REVIEW_PLATFORMS.map((p) => (
          <option key={p} value={p}>
            {t(`platform_${p}`)}
          </option>
        ))}
      </select>
      <label for="link-id">{t(`platform_${platform}`)}</label>
      <input id="link-id" value={id} maxLength={300} onInput={(e) => setId(e.currentTarget.value)} aria-describedby="link-built" />
      <p id="link-built" class="hint" aria-live="polite">
        {id.trim() === '' ? '' : url ? <code>{url}</code> : t('badPlatformId', { platform: t(`platform_${platform}`) })}
      </p>
      <button
        type="button"
        disabled={!url}
        onClick={() => {
          if (!url) return;
          onAdd(platform, url);
          setId('');
        }}
      >
        {t('addBuiltLink')}
      </button>
    </div>
  );
}
