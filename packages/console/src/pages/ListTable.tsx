import type { ComponentChildren } from 'preact';
import { Scroll } from '../widgets';
import type { MessageKey, Translate } from '../i18n';

/** A whole list as a captioned table that scrolls sideways on a phone: loading, empty, or the rows. */
export function ListTable<T>(props: { t: Translate; rows: T[] | null; caption: string; empty: MessageKey; head: ComponentChildren; row: (item: T) => ComponentChildren }) {
  const { t, rows } = props;
  if (rows === null) return <p role="status">{t('loading')}</p>;
  if (rows.length === 0) return <p>{t(props.empty)}</p>;
  return (
    <Scroll label={props.caption}>
      <table>
        <caption>{props.caption}</caption>
        <thead>
          <tr>{props.head}</tr>
        </thead>
        <tbody>{rows.map(props.row)}</tbody>
      </table>
    </Scroll>
  );
}
