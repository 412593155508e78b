import { useEffect, useLayoutEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, call, useCsrfToken, type SessionInfo } from './api';
import { initialLanguage, saveLanguage, translator, type Language } from './i18n';
import { AlertsPage } from './pages/Alerts';
import { CascadePage } from './pages/Cascade';
import { CascadesPage } from './pages/Cascades';
import { ChannelsPage } from './pages/Channels';
import { FlowsPage } from './pages/Flows';
import { amoCrmReturn, IntegrationsPage } from './pages/Integrations';
import { LocationsPage } from './pages/Locations';
import { SettingsPage } from './pages/Settings';
import { TemplatesPage } from './pages/Templates';
import { DeveloperPage } from './pages/Developer';
import { ForgotPasswordPage } from './pages/ForgotPassword';
import { MembersPage } from './pages/Members';
import { OverviewPage } from './pages/Overview';
import { RatingPage } from './pages/Rating';
import { RatingsPage } from './pages/Ratings';
import { SendPage } from './pages/Send';
import { SetPasswordPage } from './pages/SetPassword';
import { SignInPage } from './pages/SignIn';

/** Pages route by the URL's fragment, so the gateway serves one index.html for all of them. */
function useHashRoute(): string {
  // amoCRM's consent sends the browser back to /app/?code=… (no fragment): that is the integrations page's.
  const [route, setRoute] = useState(location.hash.slice(1) || (amoCrmReturn() ? '/integrations' : '/cascades'));
  useEffect(() => {
    const onChange = () => setRoute(location.hash.slice(1) || '/cascades');
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

const SECTIONS = [
  { path: '/overview', key: 'overview' },
  { path: '/cascades', key: 'cascades' },
  { path: '/ratings', key: 'ratings' },
  { path: '/alerts', key: 'alerts' },
  { path: '/send', key: 'send' },
  { path: '/developer', key: 'developer' },
  { path: '/members', key: 'members' },
  { path: '/locations', key: 'locations' },
  { path: '/flows', key: 'flows' },
  { path: '/integrations', key: 'integrations' },
  { path: '/templates', key: 'templates' },
  { path: '/channels', key: 'channels' },
  { path: '/settings', key: 'settings' },
] as const;

export function App() {
  const [language, setLanguage] = useState<Language>(initialLanguage);
  const t = useMemo(() => translator(language), [language]);
  const [session, setSession] = useState<SessionInfo | null | undefined>(undefined);
  const route = useHashRoute();

  // In the commit that renders the language's text, not after the paint: the document never says one
  // language while showing the other (assistive technology reads it by <html lang>).
  useLayoutEffect(() => saveLanguage(language), [language]);
  const loadSession = () =>
    call<SessionInfo>('GET', '/session').then(
      (s) => {
        useCsrfToken(s.csrfToken);
        setSession(s);
      },
      (err: unknown) => {
        if (err instanceof ApiError && err.status === 401) setSession(null);
        else throw err;
      },
    );
  useEffect(() => {
    void loadSession();
  }, []);

  const section = SECTIONS.find((s) => route.startsWith(s.path));
  useEffect(() => {
    const page = route.startsWith('/accept/') ? t('acceptTitle') : route.startsWith('/reset/') ? t('resetTitle') : !session ? t(route.startsWith('/forgot') ? 'forgotTitle' : 'signInTitle') : section ? t(section.key) : t('appName');
    document.title = `${page} — ${t('appName')}`;
  }, [route, session, language]);

  const languageSwitch = (
    <button type="button" class="link" lang={language === 'en' ? 'ru' : 'en'} onClick={() => setLanguage(language === 'en' ? 'ru' : 'en')}>
      {t('switchTo')}
    </button>
  );

  let page;
  const signedInFromLink = () => loadSession().then(() => (location.hash = '#/cascades'));
  const link = /^\/(accept|reset)\/(.+)$/.exec(route);
  if (link) page = <SetPasswordPage t={t} token={decodeURIComponent(link[2])} invitation={link[1] === 'accept'} onSignedIn={signedInFromLink} />;
  else if (session === undefined) page = <p role="status">{t('loading')}</p>;
  else if (session === null) page = route.startsWith('/forgot') ? <ForgotPasswordPage t={t} /> : <SignInPage t={t} onSignedIn={loadSession} />;
  else if (route.startsWith('/developer')) page = <DeveloperPage t={t} session={session} />;
  else if (route.startsWith('/members')) page = <MembersPage t={t} session={session} />;
  else if (route.startsWith('/overview')) page = <OverviewPage t={t} session={session} />;
  else if (route.startsWith('/ratings/')) page = <RatingPage t={t} session={session} id={decodeURIComponent(route.slice('/ratings/'.length).split('?')[0])} />;
  else if (route.startsWith('/ratings')) page = <RatingsPage key={route} t={t} session={session} />;
  else if (route.startsWith('/alerts')) page = <AlertsPage t={t} session={session} />;
  else if (route.startsWith('/integrations')) page = <IntegrationsPage t={t} session={session} />;
  else if (route.startsWith('/send')) page = <SendPage t={t} session={session} />;
  else if (route.startsWith('/locations')) page = <LocationsPage t={t} session={session} />;
  else if (route.startsWith('/flows')) page = <FlowsPage t={t} session={session} />;
  else if (route.startsWith('/templates')) page = <TemplatesPage t={t} session={session} />;
  else if (route.startsWith('/channels')) page = <ChannelsPage t={t} session={session} />;
  else if (route.startsWith('/settings')) page = <SettingsPage t={t} session={session} />;
  else if (route.startsWith('/cascades/')) page = <CascadePage t={t} session={session} id={decodeURIComponent(route.slice('/cascades/'.length))} />;
  else page = <CascadesPage t={t} session={session} />;

  const signOut = async () => {
    await call('DELETE', '/session');
    useCsrfToken('');
    setSession(null);
  };

  return (
    <>
      <header class="top">
        <span class="brand">{t('appName')}</span>
        {session && (
          <nav aria-label={t('nav')}>
            <ul>
              {SECTIONS.map((s) => (
                <li key={s.path}>
                  <a href={`#${s.path}`} aria-current={section?.path === s.path ? 'page' : undefined}>
                    {t(s.key)}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
        )}
        <div class="who">
          {session && (
            <span>
              {session.organization.name} · {session.member.email} ({t(`role_${session.member.role}`)})
            </span>
          )}
          {languageSwitch}
          {session && (
            <button type="button" class="link" onClick={signOut}>
              {t('signOut')}
            </button>
          )}
        </div>
      </header>
      <main>{page}</main>
    </>
  );
}
