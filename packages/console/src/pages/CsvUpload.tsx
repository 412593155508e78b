import Papa from 'papaparse';
import { useState } from 'preact/hooks';
import { ApiError, call, newIdempotencyKey } from '../api';
import { ErrorNote, Scroll } from '../App';
import type { Translate } from '../i18n';
import { useAction } from '../parts';
import { MAX_RECIPIENTS_PER_REQUEST } from '../rules';

interface Started {
  id: string;
  queued: number;
  skipped: number;
}
/** A refused row: its line in the file (the header is line 1), the column and why. */
interface RowError {
  line: number;
  field: string;
  detail: string;
}

const COLUMNS = ['name', 'email', 'phone'] as const;

/**
 * Many customers from a CSV file (a header row naming `name`, `email`, `phone`), in one request with
 * one Idempotency-Key per chosen file. Every row is checked first, here for what the file itself
 * shows and then by the API; a refusal names its rows, and nothing is sent until every row is right.
 */
export function CsvUpload({ t, target }: { t: Translate; target: { locationId: string; flowId: string; ignoreCooldown: boolean } }) {
  const [file, setFile] = useState<File | null>(null);
  const [idempotencyKey, setIdempotencyKey] = useState(newIdempotencyKey);
  const [rowErrors, setRowErrors] = useState<RowError[]>([]);
  const [started, setStarted] = useState<Started | null>(null);
  const action = useAction();

  const submit = (e: Event) => {
    e.preventDefault();
    setRowErrors([]);
    setStarted(null);
    void action.run(async () => {
      if (!file) throw new Error(t('csvChoose'));
      const parsed = Papa.parse<Record<string, string>>(await file.text(), { header: true, skipEmptyLines: 'greedy', transformHeader: (h) => h.trim().toLowerCase() });
      const fields = parsed.meta.fields ?? [];
      if (!fields.includes('email') && !fields.includes('phone')) throw new Error(t('csvHeader'));
      if (parsed.data.length === 0 || parsed.data.length > MAX_RECIPIENTS_PER_REQUEST) throw new Error(t('csvRows', { max: MAX_RECIPIENTS_PER_REQUEST }));
      const errors: RowError[] = parsed.errors.map((err) => ({ line: (err.row ?? 0) + 2, field: '', detail: err.message }));
      const recipients = parsed.data.map((row, index) => {
        const [name, email, phone] = COLUMNS.map((c) => (row[c] ?? '').trim() || undefined);
        if (!email && !phone) errors.push({ line: index + 2, field: 'email, phone', detail: t('needContact') });
        return { name, email, phone };
      });
      if (errors.length > 0) {
        setRowErrors(errors);
        return;
      }
      try {
        setStarted(await call<Started>('POST', '/cascades', { body: { locationId: target.locationId, flowId: target.flowId || undefined, recipients, ignoreCooldown: target.ignoreCooldown || undefined }, idempotencyKey }));
      } catch (err) {
        const perRow = (err instanceof ApiError ? err.fields : []).flatMap((f) => {
          const row = /^\/recipients\/(\d+)\/?(.*)$/.exec(f.pointer ?? '');
          return row ? [{ line: Number(row[1]) + 2, field: row[2], detail: f.detail }] : [];
        });
        if (perRow.length === 0) throw err;
        setRowErrors(perRow);
      }
    });
  };

  return (
    <form onSubmit={submit} class="card">
      <h2>{t('csvTitle')}</h2>
      <p class="hint" id="csv-hint">
        {t('csvHint', { max: MAX_RECIPIENTS_PER_REQUEST })}
      </p>
      <label for="csv">{t('csvFile')}</label>
      <input
        id="csv"
        type="file"
        accept=".csv,text/csv"
        aria-describedby="csv-hint"
        onChange={(e) => {
          setFile(e.currentTarget.files?.[0] ?? null);
          // Another file is another request.
          setIdempotencyKey(newIdempotencyKey());
        }}
      />
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
      {started && (
        <p role="status" class="ok">
          {t('sent', { id: started.id, queued: started.queued, skipped: started.skipped })}
        </p>
      )}
      <button type="submit" disabled={action.busy}>
        {t('csvSend')}
      </button>
    </form>
  );
}
