import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { canChange, ErrorNote, type PageProps } from '../widgets';
import { DayRangeFilter, LocationFilter, useLocations } from '../filters';
import { PagedTable, SearchForm, useAction, usePaged } from '../parts';

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
  handledAt: string | null;
  handledBy: string | null;
}

/** The ratings inbox: newest first, the private feedback of low ratings beside them, "handled" marks, filterable. */
export function RatingsPage({ t, session }: PageProps) {
  const [maxRating, setMaxRating] = useState('');
  const [withFeedback, setWithFeedback] = useState(false);
  const [locationId, setLocationId] = useState('');
  const [handled, setHandled] = useState('');
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  // Ratings marked or cleared on this page since the list was loaded, by review request.
  const [marked, setMarked] = useState<Record<string, Rating>>({});
  const paged = usePaged<Rating>('/ratings', 'ratings');
  const mark = useAction();
  const search = () => {
    setMarked({});
    return paged.load({ maxRating, withFeedback: withFeedback ? 'true' : undefined, locationId, handled, from, to });
  };
  const setMark = (rating: Rating, on: boolean) =>
    mark.run(async () => {
      const r = await call<{ rating: Rating }>(on ? 'PUT' : 'DELETE', `/ratings/${encodeURIComponent(rating.reviewRequestId)}/handled`);
      setMarked((old) => ({ ...old, [rating.reviewRequestId]: r.rating }));
    });
  useEffect(() => {
    void search();
  }, []);
  const { locations, nameOf } = useLocations();

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
        <LocationFilter t={t} id="rating-location" locations={locations} value={locationId} onChange={setLocationId} />
        <div>
          <label for="rating-handled">{t('handled')}</label>
          <select id="rating-handled" value={handled} onChange={(e) => setHandled(e.currentTarget.value)}>
            <option value="">{t('anyHandled')}</option>
            <option value="handled">{t('onlyHandled')}</option>
            <option value="unhandled">{t('onlyUnhandled')}</option>
          </select>
        </div>
        <DayRangeFilter t={t} id="ratings" from={from} to={to} onFrom={setFrom} onTo={setTo} />
        <label class="check">
          <input type="checkbox" checked={withFeedback} onChange={(e) => setWithFeedback(e.currentTarget.checked)} /> {t('withFeedback')}
        </label>
      </SearchForm>
      <ErrorNote error={mark.error} t={t} />
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
            <th scope="col">{t('handled')}</th>
          </>
        }
        row={(listed) => {
          const r = marked[listed.reviewRequestId] ?? listed;
          const customer = [r.customerName, r.contact].filter(Boolean).join(' · ') || r.reviewRequestId;
          return (
          <tr key={r.reviewRequestId} data-review-request-id={r.reviewRequestId}>
            <td>{new Date(r.ratedAt).toLocaleString()}</td>
            <td>
              <span aria-hidden="true">{'★'.repeat(r.rating) + '☆'.repeat(5 - r.rating)}</span> {r.rating} / 5
            </td>
            <td>{r.feedback ?? '—'}</td>
            <td>{[r.customerName, r.contact].filter(Boolean).join(' · ') || '—'}</td>
            <td>{nameOf(r.locationId)}</td>
            <td>{r.cascadeId ? <a href={`#/cascades/${encodeURIComponent(r.cascadeId)}`}>{r.externalId ?? t('open')}</a> : '—'}</td>
            <td>
              {r.handledAt ? <span data-testid="handled">{t('handledOn', { when: new Date(r.handledAt).toLocaleString() })}</span> : canChange(session) ? null : '—'}
              {canChange(session) && (
                <input type="checkbox" checked={r.handledAt !== null} disabled={mark.busy} aria-label={`${t('handled')}: ${customer}`} onChange={(e) => void setMark(r, e.currentTarget.checked)} />
              )}
            </td>
          </tr>
          );
        }}
      />
    </section>
  );
}
