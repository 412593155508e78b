import type { ComponentChildren } from 'preact';
import { ErrorNote, ReadOnlyNote, Scroll, type PageProps } from './widgets';
import type { MessageKey } from './i18n';

/** A configuration page's head: its title, the viewer's note, the last refusal and the last save. */
export function ConfigHeader({ t, session, title, error, saved }: PageProps & { title: MessageKey; error: unknown; saved: boolean }) {
  return (
    <>
      <h1>{t(title)}</h1>
      <ReadOnlyNote t={t} session={session} />
      <ErrorNote error={error} t={t} />
      {saved && (
        <p class="ok" role="status">
          {t('saved')}
        </p>
      )}
    </>
  );
}

/** A whole (unpaged) list as a captioned table: loading, empty, or the rows. */
export function ListTable<T>(props: { t: PageProps['t']; items: T[] | null; caption: MessageKey; empty: MessageKey; head: ComponentChildren; row: (item: T) => ComponentChildren }) {
  const { t, items } = props;
  if (items === null) return <p role="status">{t('loading')}</p>;
  if (items.length === 0) return <p>{t(props.empty)}</p>;
  return (
    <Scroll label={t(props.caption)}>
      <table>
        <caption>{t(props.caption)}</caption>
        <thead>
          <tr>{props.head}</tr>
        </thead>
        <tbody>{items.map(props.row)}</tbody>
      </table>
    </Scroll>
  );
}

/** A number field as typed; what is not a number goes to the API as it is and is refused there, by field. */
export const numberOf = (text: string): number | string => (text.trim() !== '' && Number.isFinite(Number(text)) ? Number(text) : text);

/** The form that creates an item, or edits the one chosen (then "Cancel" goes back to creating). */
export function EditorForm(props: { t: PageProps['t']; title: string; busy: boolean; editing: boolean; onSubmit: () => void; onCancel: () => void; children: ComponentChildren }) {
  const { t } = props;
  return (
    <form
      class="card"
      aria-label={props.title}
      onSubmit={(e) => {
        e.preventDefault();
        props.onSubmit();
      }}
    >
      <h2>{props.title}</h2>
      {props.children}
      <button type="submit" disabled={props.busy}>
        {t('save')}
      </button>{' '}
      {props.editing && (
        <button type="button" class="link" onClick={props.onCancel}>
          {t('cancel')}
        </button>
      )}
    </form>
  );
}
