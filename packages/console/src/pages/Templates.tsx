import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { canChange, ErrorNote, ReadOnlyNote, type PageProps } from '../widgets';
import type { Translate } from '../i18n';
import { useAction } from '../parts';
import { CHANNELS_WITH_SMS_TEXT, renderEmail, renderMessengerText, renderSms, smsCount } from '../rules';

interface Template {
  channel: string;
  subject: string;
  body: string;
  isDefault: boolean;
}
type Step = Parameters<typeof renderEmail>[0];

/** Review link tokens are 22 base62 characters: the sample has the length a real link has, so the counts are right. */
const SAMPLE_TOKEN = 'AbCdEf0123456789GhIjKl';

/** The step a preview renders: the customer "Anna" at one of the organization's locations, with a link as long as a real one (PUBLIC_BASE_URL + token). */
function sampleStep(template: Template, locationName: string, locale: string, customerName: string, linkBase: string): Step {
  return {
    stepId: 'preview', attemptId: '', attempt: 1, organizationId: '', cascadeId: '', recipientId: '', channel: template.channel,
    recipient: { name: customerName, email: 'anna@example.com', phone: '+79161234567' },
    location: { id: '', name: locationName, address: '', city: '' },
    template: { subject: template.subject, body: template.body },
    reviewUrl: `${linkBase}/r/${SAMPLE_TOKEN}`, unsubscribeUrl: `${linkBase}/u/${SAMPLE_TOKEN}`, locale, dueAt: undefined, dispatchedAt: undefined,
  } as Step;
}

/**
 * Message templates per channel, each with a live preview made by the senders' own renderers
 * (packages/sender-kit): the email as sent, the SMS with its GSM-7/UCS-2 part count and cost, and the
 * MAX/Telegram text (the location's name, then the SMS template).
 */
export function TemplatesPage({ t, session }: PageProps) {
  const [templates, setTemplates] = useState<Template[] | null>(null);
  const [linkBase, setLinkBase] = useState(location.origin);
  const [locationNames, setLocationNames] = useState<string[]>([session.organization.name]);
  const action = useAction();

  const load = () =>
    call<{ templates: Template[]; reviewLinkBase: string }>('GET', '/templates').then((r) => {
      setTemplates(r.templates);
      setLinkBase(r.reviewLinkBase);
    }, action.setError);
  useEffect(() => {
    void load();
    call<{ locations: Array<{ name: string }> }>('GET', '/locations').then((r) => r.locations.length > 0 && setLocationNames(r.locations.map((l) => l.name)), action.setError);
  }, []);

  const own = (templates ?? []).filter((x) => !(CHANNELS_WITH_SMS_TEXT as readonly string[]).includes(x.channel));
  return (
    <section>
      <h1>{t('templates')}</h1>
      <ReadOnlyNote t={t} session={session} />
      <ErrorNote error={action.error} t={t} />
      <p class="hint">{t('previewSample')}</p>
      {templates === null ? (
        <p role="status">{t('loading')}</p>
      ) : (
        own.map((template) => <TemplateEditor key={template.channel} t={t} session={session} template={template} locationNames={locationNames} linkBase={linkBase} onSaved={load} />)
      )}
    </section>
  );
}

function TemplateEditor({ t, session, template, locationNames, linkBase, onSaved }: PageProps & { template: Template; locationNames: string[]; linkBase: string; onSaved: () => Promise<unknown> }) {
  const [subject, setSubject] = useState(template.subject);
  const [body, setBody] = useState(template.body);
  const [saved, setSaved] = useState(false);
  const action = useAction();
  const writable = canChange(session);
  // What the server now has (after a save or a reset) replaces what was typed.
  useEffect(() => {
    setSubject(template.subject);
    setBody(template.body);
  }, [template.subject, template.body]);
  const channel = template.channel;
  const id = channel.toLowerCase();
  const isEmail = channel === 'EMAIL';
  const steps = locationNames.map((name) => sampleStep({ ...template, subject, body }, name, session.organization.locale, t('customerSample'), linkBase));
  const step = steps[0];

  const save = (e: Event) => {
    e.preventDefault();
    setSaved(false);
    void action.run(async () => {
      await call('PUT', `/templates/${encodeURIComponent(channel)}`, { body: isEmail ? { subject, body } : { body } });
      setSaved(true);
      await onSaved();
    });
  };
  const reset = () =>
    action.run(async () => {
      await call('DELETE', `/templates/${encodeURIComponent(channel)}`);
      setSaved(true);
      await onSaved();
    });

  return (
    <article class="card template-card" aria-labelledby={`template-${id}`}>
      <h2 id={`template-${id}`}>{channel}</h2>
      <p>{t('templateIs', { which: template.isDefault ? t('templateDefault') : t('templateOwn') })}</p>
      <ErrorNote error={action.error} t={t} />
      {saved && <p class="ok" role="status">{t('saved')}</p>}
      {writable ? (
        <form onSubmit={save} aria-label={`${t('templates')}: ${channel}`}>
          {isEmail && (
            <>
              <label for={`${id}-subject`}>{t('subject')}</label>
              <input id={`${id}-subject`} required maxLength={200} value={subject} onInput={(e) => setSubject(e.currentTarget.value)} />
            </>
          )}
          <label for={`${id}-body`}>{t('templateBody')}</label>
          <textarea id={`${id}-body`} required maxLength={4000} rows={isEmail ? 6 : 3} value={body} onInput={(e) => setBody(e.currentTarget.value)} aria-describedby={`${id}-placeholders`} />
          <p id={`${id}-placeholders`} class="hint">
            {t('placeholders')} <code>{'{{name}}'}</code> <code>{'{{location}}'}</code> <code>{'{{link}}'}</code>
          </p>
          <button type="submit" disabled={action.busy}>
            {t('save')}
          </button>{' '}
          {!template.isDefault && (
            <button type="button" class="link" onClick={reset}>
              {t('resetTemplate')}
            </button>
          )}
        </form>
      ) : (
        <>
          {isEmail && <p>{template.subject}</p>}
          <blockquote>{template.body}</blockquote>
        </>
      )}
      <h3>{t('preview')}</h3>
      {isEmail ? <EmailPreview t={t} step={step} /> : <SmsPreview t={t} steps={steps} id={id} messenger={channel === 'SMS'} />}
    </article>
  );
}

function EmailPreview({ t, step }: { t: Translate; step: Step }) {
  const email = renderEmail(step, 'reviews@example.com');
  // Sandboxed: the email runs nothing and reaches nothing of the console's.
  return (
    <>
      <p>
        <strong>{t('subject')}:</strong> {email.subject}
      </p>
      <iframe class="email-preview" title={t('emailPreview')} sandbox="" srcDoc={email.html} width="100%" height="420" />
    </>
  );
}

/**
 * The SMS exactly as the sender makes it (renderSms), for each of the organization's locations: its
 * text, and one line with its encoding, length, parts and cost, counted on that text, so the counter and
 * the cost cannot disagree. A text cut to one part says so, and so does the short link form.
 */
function SmsPreview({ t, steps, id, messenger }: { t: Translate; steps: Step[]; id: string; messenger: boolean }) {
  return (
    <>
      <h4>{t('smsAsSent')}</h4>
      {steps.map((step, index) => {
        const sms = renderSms(step);
        const count = smsCount(sms.text);
        return (
          <div key={index} class="sms-preview" data-location={step.location?.name}>
            <p>
              <strong>{step.location?.name}</strong>
            </p>
            <pre class="message-preview">{sms.text}</pre>
            <p id={index === 0 ? `${id}-counter` : undefined} class="sms-counter" role={index === 0 ? 'status' : undefined} data-encoding={count.encoding} data-parts={sms.parts} data-cut={String(sms.cut)}>
              {t('smsCounter', { encoding: count.encoding, length: count.length, perPart: count.perPart, parts: sms.parts })}
            </p>
            {sms.cut && <p class="error">{t('smsCut')}</p>}
            {sms.link !== step.reviewUrl && <p class="hint">{t('smsShortLink')}</p>}
          </div>
        );
      })}
      {messenger && (
        <>
          <h4>{t('messengerPreview')}</h4>
          <p class="hint">{t('messengerNote')}</p>
          <pre class="message-preview">{renderMessengerText(steps[0])}</pre>
        </>
      )}
    </>
  );
}
