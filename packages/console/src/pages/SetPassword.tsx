import { useState } from 'preact/hooks';
import { call } from '../api';
import { ErrorNote } from '../widgets';
import type { Translate } from '../i18n';
import { useAction } from '../parts';

/**
 * Where an invitation's or a password reset's link lands: the person sets a password (and, invited,
 * their name) and is signed in. The token comes from the URL's fragment.
 */
export function SetPasswordPage({ t, token, invitation, onSignedIn }: { t: Translate; token: string; invitation: boolean; onSignedIn: () => void }) {
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const action = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    void action.run(async () => {
      if (invitation) await call('POST', '/invitations/accept', { body: { token, name, password } });
      else await call('POST', '/password-reset', { body: { token, password } });
      onSignedIn();
    });
  };
  return (
    <section class="narrow">
      <h1>{t(invitation ? 'acceptTitle' : 'resetTitle')}</h1>
      <form onSubmit={submit}>
        {invitation && (
          <>
            <label for="name">{t('yourName')}</label>
            <input id="name" autocomplete="name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
          </>
        )}
        <label for="new-password">{t('newPassword')}</label>
        <input id="new-password" type="password" autocomplete="new-password" required minLength={10} aria-describedby="password-rule" value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        <p id="password-rule" class="hint">{t('passwordRule')}</p>
        <ErrorNote error={action.error} t={t} />
        <button type="submit" disabled={action.busy}>
          {t(invitation ? 'accept' : 'setPassword')}
        </button>
      </form>
    </section>
  );
}
