import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { call } from './api';
import { ErrorNote, Scroll } from './widgets';
import type { MessageKey, Translate } from './i18n';

/** A form's submission: busy while it runs, the refusal (if any) to show. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = async (action: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    try {
      await action();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, setError, run };
}

/** A list the account API answers a page at a time (`{<field>: [...], nextAfter}`), newest first. */
export function usePaged<T>(path: string, field: string) {
  const [rows, setRows] = useState<T[] | null>(null);
  const [nextAfter, setNextAfter] = useState<string | null>(null);
  const [query, setQuery] = useState<Record<string, string | undefined>>({});
  const action = useAction();
  const load = (newQuery: Record<string, string | undefined>, after?: string) =>
    action.run(async () => {
      const r = await call<Record<string, unknown> & { nextAfter: string | null }>('GET', path, { query: { ...newQuery, after } });
      const page = r[field] as T[];
      setRows(after ? [...(rows ?? []), ...page] : page);
      setNextAfter(r.nextAfter);
      setQuery(newQuery);
    });
  return { rows, nextAfter, error: action.error, load, more: () => load(query, nextAfter ?? undefined) };
}

/** The filters of a list: a search landmark whose button reloads the first page. */
export function SearchForm({ t, onSearch, children }: { t: Translate; onSearch: () => void; children: ComponentChildren }) {
  return (
    <form
      class="filters"
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        onSearch();
      }}
    >
      {children}
      <button type="submit">{t('search')}</button>
    </form>
  );
}

/** A paged list as a captioned table: loading, empty, the rows, and "Show more" while there is a next page. */
export function PagedTable<T>(props: {
  t: Translate;
  paged: ReturnType<typeof usePaged<T>>;
  caption: MessageKey;
  empty: MessageKey;
  head: ComponentChildren;
  row: (item: T) => ComponentChildren;
}) {
  const { t, paged } = props;
  return (
    <>
      <ErrorNote error={paged.error} t={t} />
      {paged.rows === null ? (
        <p role="status">{t('loading')}</p>
      ) : paged.rows.length === 0 ? (
        <p>{t(props.empty)}</p>
      ) : (
        <Scroll label={t(props.caption)}>
          <table>
            <caption>{t(props.caption)}</caption>
            <thead>
              <tr>{props.head}</tr>
            </thead>
            <tbody>{paged.rows.map(props.row)}</tbody>
          </table>
        </Scroll>
      )}
      {paged.nextAfter && (
        <button type="button" onClick={paged.more}>
          {t('more')}
        </button>
      )}
    </>
  );
}
