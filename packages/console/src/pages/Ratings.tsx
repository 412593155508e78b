import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { canChange, ErrorNote, type PageProps } from '../widgets';
import { DayRangeFilter, LocationFilter, useLocations } from '../filters';
import { PagedTable, SearchForm, useAction, usePaged } from '../parts';
import { formatWhen, zoneOf } from '../time';

export interface Rating {
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
  status: 'new' | 'in_progress' | 'resolved';
  assignedTo: string | null;
  actionable: boolean;
  respondBy: string | null;
  overdue: boolean;
  resolutionNote: string | null;
}

/** A rating's place in the workflow, in words: resolved, in progress, new (overdue when past its target). */
export function RatingStatus({ t, session, rating }: PageProps & { rating: Rating }) {
  return (
    <span data-testid="rating-status">
      {t(`ratingStatus_${rating.status}`)}
      {rating.overdue && <strong class="overdue"> · {t('overdue')}</strong>}
      {rating.actionable && rating.status !== 'resolved' && rating.respondBy && (
        <>
          <br />
          <span class="hint">{t('respondBy', { when: formatWhen(session, rating.respondBy) })}</span>
        </>
      )}
    </span>
  );
}

/**
 * The ratings inbox: newest first, the private feedback of low ratings beside them, each rating's place in
 * the workflow (new, in progress, resolved; overdue past its target) and "handled" marks, filterable. A
 * rating opens on its own page (RatingPage), where members act on it.
 */
export function RatingsPage({ t, session }: PageProps) {
  const [maxRating, setMaxRating] = useState('');
  const [withFeedback, setWithFeedback] = useState(false);
  const [locationId, setLocationId] = useState('');
  const [handled, setHandled] = useState('');
  // Opened from the overview's "open" or "overdue" figure: the inbox filtered the same way.
  const [status, setStatus] = useState(() => new URLSearchParams(location.hash.split('?')[1] ?? '').get('status') ?? '');
  const [mine, setMine] = useState(false);
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  // Ratings marked or cleared on this page since the list was loaded, by review request.
  const [marked, setMarked] = useState<Record<string, Rating>>({});
  const paged = usePaged<Rating>('/ratings', 'ratings');
  const mark = useAction();
  const search = () => {
    setMarked({});
    return paged.load({ maxRating, withFeedback: withFeedback ? 'true' : undefined, locationId, handled, status, assignedTo: mine ? session.member.id : undefined, from, to });
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
      <p class="hint">{t('timesIn', { zone: zoneOf(session) })}</p>
      <SearchForm t={t} onSearch={search}>
        <div>
          <label for="rating-status">{t('status')}</label>
          <select id="rating-status" value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
            <option value="">{t('anyStatus')}</option>
            <option value="open">{t('ratingStatus_open')}</option>
            <option value="overdue">{t('overdue')}</option>
            <option value="new">{t('ratingStatus_new')}</option>
            <option value="in_progress">{t('ratingStatus_in_progress')}</option>
            <option value="resolved">{t('ratingStatus_resolved')}</option>
          </select>
        </div>
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
        <label class="check">
          <input type="checkbox" checked={mine} onChange={(e) => setMine(e.currentTarget.checked)} /> {t('assignedToMe')}
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
            <th scope="col">{t('status')}</th>
            <th scope="col">{t('handled')}</th>
          </>
        }
        row={(listed) => {
          const r = marked[listed.reviewRequestId] ?? listed;
          const customer = [r.customerName, r.contact].filter(Boolean).join(' · ') || r.reviewRequestId;
          return (
          <tr key={r.reviewRequestId} data-review-request-id={r.reviewRequestId}>
            <td>
              <a href={`#/ratings/${encodeURIComponent(r.reviewRequestId)}`} aria-label={`${t('openRating')}: ${customer}, ${formatWhen(session, r.ratedAt)}`}>
                {formatWhen(session, r.ratedAt)}
              </a>
            </td>
            <td>
              <span aria-hidden="true">{'★'.repeat(r.rating) + '☆'.repeat(5 - r.rating)}</span> {r.rating} / 5
            </td>
            <td>{r.feedback ?? '—'}</td>
            <td>{[r.customerName, r.contact].filter(Boolean).join(' · ') || '—'}</td>
            <td>{nameOf(r.locationId)}</td>
            <td>{r.cascadeId ? <a href={`#/cascades/${encodeURIComponent(r.cascadeId)}`}>{r.externalId ?? t('open')}</a> : '—'}</td>
            <td>
              <RatingStatus t={t} session={session} rating={r} />
            </td>
            <td>
              {r.handledAt ? <span data-testid="handled">{t('handledOn', { when: formatWhen(session, r.handledAt) })}</span> : canChange(session) ? null : '—'}
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
