import { useState } from 'preact/hooks';
import { call } from '../api';
import { ErrorNote } from '../widgets';
import type { Translate } from '../i18n';
import { useAction } from '../parts';

export function SignInPage({ t, onSignedIn }: { t: Translate; onSignedIn: () => Promise<void> }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const action = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    void action.run(async () => {
      await call('POST', '/session', { body: { email, password } });
      await onSignedIn();
    });
  };
  return (
    <section class="narrow">
      <h1>{t('signInTitle')}</h1>
      <form onSubmit={submit}>
        <label for="email">{t('email')}</label>
        <input id="email" name="email" type="email" autocomplete="username" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        <label for="password">{t('password')}</label>
        <input id="password" name="password" type="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        <ErrorNote error={action.error} t={t} />
        <button type="submit" disabled={action.busy}>
          {action.busy ? t('signingIn') : t('signIn')}
        </button>
      </form>
      <p>
        <a href="#/forgot">{t('forgotPassword')}</a>
      </p>
    </section>
  );
}
