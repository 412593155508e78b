import Papa from 'papaparse';
import { useState } from 'preact/hooks';
import { ApiError, call, callReplayable } from '../api';
import { ErrorNote, Scroll } from '../widgets';
import type { Translate } from '../i18n';
import { useAction } from '../parts';
import { MAX_RECIPIENTS_PER_REQUEST } from '../rules';

/** One part sent: its cascade, what it did, and what names it (the order's externalId, or its file lines). */
interface Started {
  id: string;
  queued: number;
  skipped: number;
  replayed: boolean;
  label: string;
  recipients: number;
}
/** A refused row: its line in the file (the header is line 1), the column and why. */
interface RowError {
  line: number;
  field: string;
  detail: string;
}
interface Recipient {
  name?: string;
  email?: string;
  phone?: string;
  consentAt?: string;
}
/** One request's worth of rows: the rows of one externalId (or of none), at most MAX_RECIPIENTS_PER_REQUEST. */
interface Part {
  externalId?: string;
  lines: number[];
  recipients: Recipient[];
}
type Target = { locationId: string; flowId: string; ignoreCooldown: boolean };

/** Header names as papaparse gives them here (trimmed, lower-case). */
const COLUMNS = { name: 'name', email: 'email', phone: 'phone', consentAt: 'consentat', externalId: 'externalid' } as const;

/**
 * The file's rows as requests: rows with the same `externalId` (an order, a deal) make one cascade, rows
 * without one another, each cut into parts of at most MAX_RECIPIENTS_PER_REQUEST, in the file's order.
 */
function partsOf(rows: Array<Record<string, string>>): Part[] {
  const groups = new Map<string, Array<{ line: number; recipient: Recipient }>>();
  rows.forEach((row, index) => {
    const cell = (column: string) => (row[column] ?? '').trim() || undefined;
    const key = cell(COLUMNS.externalId) ?? '';
    const group = groups.get(key) ?? [];
    group.push({ line: index + 2, recipient: { name: cell(COLUMNS.name), email: cell(COLUMNS.email), phone: cell(COLUMNS.phone), consentAt: cell(COLUMNS.consentAt) } });
    groups.set(key, group);
  });
  const parts: Part[] = [];
  for (const [externalId, group] of groups) {
    for (let start = 0; start < group.length; start += MAX_RECIPIENTS_PER_REQUEST) {
      const slice = group.slice(start, start + MAX_RECIPIENTS_PER_REQUEST);
      parts.push({ externalId: externalId || undefined, lines: slice.map((r) => r.line), recipients: slice.map((r) => r.recipient) });
    }
  }
  return parts;
}

/** The API's refusals of a part's rows (`/recipients/N/<field>`), by the file's line; none when the refusal is not about rows. */
function rowErrorsOf(err: unknown, part: Part): RowError[] {
  return (err instanceof ApiError ? err.fields : []).flatMap((f) => {
    const row = /^\/recipients\/(\d+)\/?(.*)$/.exec(f.pointer ?? '');
    return row && part.lines[Number(row[1])] !== undefined ? [{ line: part.lines[Number(row[1])], field: row[2], detail: f.detail }] : [];
  });
}

/**
 * A part's Idempotency-Key, derived from what it sends: sending the same file again (after a part was
 * refused, or a double click) replays the parts already sent instead of sending them twice.
 */
async function keyOf(body: unknown): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(JSON.stringify(body))));
  return `csv-${Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/**
 * Many customers from a CSV file (a header row naming `name`, `email`, `phone`, and optionally
 * `externalId` and `consentAt`). A file of more rows than one request takes goes in several requests.
 * Nothing is sent until every row is right: every part is first checked by the API's dry run
 * (POST /cascades/check, the very rules of a send), and the refusals are shown by file line and column.
 */
export function CsvUpload({ t, target }: { t: Translate; target: Target }) {
  const [file, setFile] = useState<File | null>(null);
  const [rowErrors, setRowErrors] = useState<RowError[]>([]);
  const [progress, setProgress] = useState('');
  const [started, setStarted] = useState<Started[]>([]);
  const action = useAction();

  const submit = (e: Event) => {
    e.preventDefault();
    setRowErrors([]);
    setStarted([]);
    void action.run(async () => {
      if (!file) throw new Error(t('csvChoose'));
      const parsed = Papa.parse<Record<string, string>>(await file.text(), { header: true, skipEmptyLines: 'greedy', transformHeader: (h) => h.trim().toLowerCase() });
      const fields = parsed.meta.fields ?? [];
      if (!fields.includes(COLUMNS.email) && !fields.includes(COLUMNS.phone)) throw new Error(t('csvHeader'));
      if (parsed.data.length === 0) throw new Error(t('csvRows'));
      const errors: RowError[] = parsed.errors.map((err) => ({ line: (err.row ?? 0) + 2, field: '', detail: err.message }));
      parsed.data.forEach((row, index) => {
        if (!(row[COLUMNS.email] ?? '').trim() && !(row[COLUMNS.phone] ?? '').trim()) errors.push({ line: index + 2, field: 'email, phone', detail: t('needContact') });
      });
      const parts = partsOf(parsed.data);
      const bodyOf = (part: Part) => ({ locationId: target.locationId, flowId: target.flowId || undefined, externalId: part.externalId, recipients: part.recipients, ignoreCooldown: target.ignoreCooldown || undefined });
      try {
        for (const [i, part] of parts.entries()) {
          setProgress(t('csvChecking', { part: i + 1, parts: parts.length }));
          try {
            // With the part's own key: a part already sent is a replay, which its budget must not refuse.
            const body = bodyOf(part);
            await call('POST', '/cascades/check', { body, idempotencyKey: await keyOf(body) });
          } catch (err) {
            const perRow = rowErrorsOf(err, part);
            if (perRow.length === 0) throw err;
            errors.push(...perRow);
          }
        }
        if (errors.length > 0) {
          setRowErrors(errors.sort((a, b) => a.line - b.line));
          return;
        }
        const done: Started[] = [];
        for (const [i, part] of parts.entries()) {
          setProgress(t('csvSending', { part: i + 1, parts: parts.length }));
          const body = bodyOf(part);
          try {
            const r = await callReplayable<Started>('POST', '/cascades', { body, idempotencyKey: await keyOf(body) });
            done.push({ ...r.body, replayed: r.replayed, label: part.externalId ?? t('csvLines', { from: part.lines[0], to: part.lines[part.lines.length - 1] }), recipients: part.recipients.length });
          } catch (err) {
            setStarted(done);
            throw i === 0 ? err : new ApiError(0, err instanceof ApiError ? err.code : '', `${t('csvPartFailed', { done: i, part: i + 1 })} ${err instanceof Error ? err.message : ''}`);
          }
        }
        setStarted(done);
      } finally {
        setProgress('');
      }
    });
  };

  const total = (key: 'queued' | 'skipped') => started.reduce((sum, s) => sum + s[key], 0);
  return (
    <form onSubmit={submit} class="card">
      <h2>{t('csvTitle')}</h2>
      <p class="hint" id="csv-hint">
        {t('csvHint', { max: MAX_RECIPIENTS_PER_REQUEST })}
      </p>
      <p>
        <a href="sample-recipients.csv" download="sample-recipients.csv">
          {t('csvSample')}
        </a>
      </p>
      <label for="csv">{t('csvFile')}</label>
      <input id="csv" type="file" accept=".csv,text/csv" aria-describedby="csv-hint" onChange={(e) => setFile(e.currentTarget.files?.[0] ?? null)} />
      <ErrorNote error={action.error} t={t} />
      {rowErrors.length > 0 && (
        <div role="alert" class="error">
          <p>{t('csvRefused')}</p>
          <Scroll label={t('csvRowErrors')}>
            <table>
              <caption>{t('csvRowErrors')}</caption>
              <thead>
                <tr>
                  <th scope="col">{t('csvLine')}</th>
                  <th scope="col">{t('csvColumn')}</th>
                  <th scope="col">{t('reason')}</th>
                </tr>
              </thead>
              <tbody>
                {rowErrors.map((r, i) => (
                  <tr key={i} data-line={r.line}>
                    <td>{r.line}</td>
                    <td>{r.field || '—'}</td>
                    <td>{r.detail}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
        </div>
      )}
      {progress && <p role="status">{progress}</p>}
      {started.length > 0 && (
        <div role="status" class="ok" data-testid="csv-sent-parts">
          <p>
            {started.every((s) => s.replayed)
              ? t('csvSentBefore', { cascades: started.length })
              : t('csvSentNow', { recipients: started.reduce((sum, s) => sum + s.recipients, 0), cascades: started.length, queued: total('queued'), skipped: total('skipped') })}
            {started.some((s) => s.replayed) && !started.every((s) => s.replayed) && ` ${t('csvSomeBefore', { count: started.filter((s) => s.replayed).length })}`}
          </p>
          <ul>
            {started.map((s) => (
              <li key={s.id}>
                <a href={`#/cascades/${encodeURIComponent(s.id)}`}>{t('openCascadeNamed', { name: s.label })}</a>
              </li>
            ))}
          </ul>
        </div>
      )}
      <button type="submit" disabled={action.busy}>
        {t('csvSend')}
      </button>
    </form>
  );
}
