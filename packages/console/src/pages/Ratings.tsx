import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import type { PageProps } from '../App';
import { PagedTable, SearchForm, usePaged } from '../parts';

interface Rating {
  reviewRequestId: string;
  rating: number;
  feedback: string | null;
  ratedAt: string;
  customerName: string | null;
  contact: string | null;
  locationId: string;
  cascadeId: string | null;
  externalId: string | null;
}
interface Location {
  id: string;
  name: string;
}

/** The ratings inbox: newest first, the private feedback of low ratings beside them, filterable. */
export function RatingsPage({ t }: PageProps) {
  const [maxRating, setMaxRating] = useState('');
  const [withFeedback, setWithFeedback] = useState(false);
  const [locationId, setLocationId] = useState('');
  const [locations, setLocations] = useState<Location[]>([]);
  const paged = usePaged<Rating>('/ratings', 'ratings');
  const search = () => paged.load({ maxRating, withFeedback: withFeedback ? 'true' : undefined, locationId });
  useEffect(() => {
    void search();
    call<{ locations: Location[] }>('GET', '/locations').then((r) => setLocations(r.locations), () => setLocations([]));
  }, []);
  const locationName = (id: string) => locations.find((l) => l.id === id)?.name ?? id;

  return (
    <section>
      <h1>{t('ratings')}</h1>
      <SearchForm t={t} onSearch={search}>
        <div>
          <label for="max-rating">{t('maxRating')}</label>
          <select id="max-rating" value={maxRating} onChange={(e) => setMaxRating(e.currentTarget.value)}>
            <option value="">{t('anyRating')}</option>
            {[1, 2, 3, 4].map((n) => (
              <option key={n} value={String(n)}>
                ≤ {n}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label for="rating-location">{t('location')}</label>
          <select id="rating-location" value={locationId} onChange={(e) => setLocationId(e.currentTarget.value)}>
            <option value="">{t('anyLocation')}</option>
            {locations.map((l) => (
              <option key={l.id} value={l.id}>
                {l.name}
              </option>
            ))}
          </select>
        </div>
        <label class="check">
          <input type="checkbox" checked={withFeedback} onChange={(e) => setWithFeedback(e.currentTarget.checked)} /> {t('withFeedback')}
        </label>
      </SearchForm>
      <PagedTable
        t={t}
        paged={paged}
        caption="ratings"
        empty="noRatings"
        head={
          <>
            <th scope="col">{t('ratedAt')}</th>
            <th scope="col">{t('maxRating')}</th>
            <th scope="col">{t('feedback')}</th>
            <th scope="col">{t('customer')}</th>
            <th scope="col">{t('location')}</th>
            <th scope="col">{t('cascade')}</th>
          </>
        }
        row={(r) => (
          <tr key={r.reviewRequestId}>
            <td>{new Date(r.ratedAt).toLocaleString()}</td>
            <td>
              <span aria-hidden="true">{'★'.repeat(r.rating) + '☆'.repeat(5 - r.rating)}</span> {r.rating} / 5
            </td>
            <td>{r.feedback ?? '—'}</td>
            <td>{[r.customerName, r.contact].filter(Boolean).join(' · ') || '—'}</td>
            <td>{locationName(r.locationId)}</td>
            <td>{r.cascadeId ? <a href={`#/cascades/${encodeURIComponent(r.cascadeId)}`}>{r.externalId ?? t('open')}</a> : '—'}</td>
          </tr>
        )}
      />
    </section>
  );
}
