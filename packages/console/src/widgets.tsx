/** The widgets every page shares: the page's props, a refusal shown, the viewer's note, a scrolling table region. */
import type { ComponentChildren } from 'preact';
import { ApiError, type SessionInfo } from './api';
import type { Translate } from './i18n';

export interface PageProps {
  t: Translate;
  session: SessionInfo;
}

/** A refusal of the API as the person reads it: its detail, then each field's. */
export function ErrorNote({ error, t }: { error: unknown; t: Translate }) {
  if (!error) return null;
  const e = error instanceof ApiError ? error : new ApiError(0, '', error instanceof Error ? error.message : String(error));
  return (
    <div role="alert" class="error">
      {e.code === 'recipient_quota_exceeded' && <p>{t('recipientQuotaExceeded')}</p>}
      <strong>{t('error')}:</strong> {e.message} {e.code && <code>{e.code}</code>}
      {e.fields.length > 0 && (
        <ul>
          {e.fields.map((f, i) => (
            <li key={i}>
              {f.pointer ?? f.parameter}: {f.detail}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export const canChange = (session: SessionInfo) => session.member.role !== 'viewer';

export function ReadOnlyNote({ session, t }: PageProps) {
  return canChange(session) ? null : <p class="note">{t('readOnly')}</p>;
}

/** A wide table scrolls sideways on a phone; the region is focusable so a keyboard can scroll it too. */
export function Scroll({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="scroll" role="region" aria-label={label} tabIndex={0}>
      {children}
    </div>
  );
}
