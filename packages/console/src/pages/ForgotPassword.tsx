import { useState } from 'preact/hooks';
import { call } from '../api';
import { ErrorNote } from '../widgets';
import type { Translate } from '../i18n';
import { useAction } from '../parts';

/** "Forgot password?": asks for a reset link by email. The answer is the same whether or not the email has an account. */
export function ForgotPasswordPage({ t }: { t: Translate }) {
  const [email, setEmail] = useState('');
  const [sent, setSent] = useState(false);
  const action = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    setSent(false);
    void action.run(async () => {
      await call('POST', '/password-reset/request', { body: { email } });
      setSent(true);
    });
  };
  return (
    <section class="narrow">
      <h1>{t('forgotTitle')}</h1>
      <p>{t('forgotIntro')}</p>
      <form onSubmit={submit}>
        <label for="forgot-email">{t('email')}</label>
        <input id="forgot-email" name="email" type="email" autocomplete="username" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        <ErrorNote error={action.error} t={t} />
        {sent && (
          <p role="status" class="ok">
            {t('forgotSent')}
          </p>
        )}
        <button type="submit" disabled={action.busy}>
          {t('sendResetLink')}
        </button>
      </form>
      <p>
        <a href="#/">{t('backToSignIn')}</a>
      </p>
    </section>
  );
}
