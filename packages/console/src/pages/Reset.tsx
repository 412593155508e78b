import { useState } from 'preact/hooks';
import { call } from '../api';
import { ErrorNote } from '../App';
import type { Translate } from '../i18n';

/** Where a password reset link lands: a new password, and the member is signed in (their other sessions end). */
export function ResetPage({ t, token, onSignedIn }: { t: Translate; token: string; onSignedIn: () => void }) {
  const [password, setPassword] = useState('');
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      await call('POST', '/password-reset', { body: { token, password } });
      onSignedIn();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section class="narrow">
      <h1>{t('resetTitle')}</h1>
      <form onSubmit={submit}>
        <label for="new-password">{t('newPassword')}</label>
        <input id="new-password" type="password" autocomplete="new-password" required minLength={10} aria-describedby="password-rule" value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        <p id="password-rule" class="hint">{t('passwordRule')}</p>
        <ErrorNote error={error} t={t} />
        <button type="submit">{t('setPassword')}</button>
      </form>
    </section>
  );
}
