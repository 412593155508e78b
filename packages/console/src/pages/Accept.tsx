import { useState } from 'preact/hooks';
import { call } from '../api';
import { ErrorNote } from '../App';
import type { Translate } from '../i18n';

/** Where an invitation's link lands: the invited person sets a name and password and is signed in. */
export function AcceptPage({ t, token, onSignedIn }: { t: Translate; token: string; onSignedIn: () => void }) {
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      await call('POST', '/invitations/accept', { body: { token, name, password } });
      onSignedIn();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section class="narrow">
      <h1>{t('acceptTitle')}</h1>
      <form onSubmit={submit}>
        <label for="name">{t('yourName')}</label>
        <input id="name" autocomplete="name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <label for="new-password">{t('newPassword')}</label>
        <input id="new-password" type="password" autocomplete="new-password" required minLength={10} aria-describedby="password-rule" value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        <p id="password-rule" class="hint">{t('passwordRule')}</p>
        <ErrorNote error={error} t={t} />
        <button type="submit">{t('accept')}</button>
      </form>
    </section>
  );
}
