/** The console's words in both languages; a key missing from one language fails to compile. */
const en = {
  appName: 'Review requests',
  language: 'Language',
  switchTo: 'Русский',
  signInTitle: 'Sign in',
  email: 'Email',
  password: 'Password',
  signIn: 'Sign in',
  signOut: 'Sign out',
  signingIn: 'Signing in…',
  acceptTitle: 'Join your organization',
  yourName: 'Your name',
  newPassword: 'Password',
  passwordRule: 'At least 10 characters.',
  accept: 'Set password and sign in',
  nav: 'Sections',
  cascades: 'Cascades',
  send: 'Send by hand',
  developer: 'Developer',
  signedInAs: 'Signed in as',
  role_owner: 'owner',
  role_admin: 'admin',
  role_viewer: 'viewer',
  readOnly: 'Your role (viewer) can look but not change anything.',
  apiKeys: 'API keys',
  newKey: 'New API key',
  keyName: 'Key name',
  scopes: 'Scopes',
  createKey: 'Create key',
  secretOnce: 'Copy the key now: it is shown only once.',
  newSecret: 'New key',
  revoke: 'Revoke',
  revoked: 'revoked',
  active: 'active',
  name: 'Name',
  key: 'Key',
  created: 'Created',
  status: 'Status',
  noKeys: 'No API keys yet.',
  apiReference: 'API reference',
  searchExternalId: 'External id',
  filterStatus: 'Status',
  anyStatus: 'Any',
  status_running: 'running',
  status_finished: 'finished',
  search: 'Search',
  recipients: 'Recipients',
  skipped: 'Skipped',
  noCascades: 'No cascades found.',
  more: 'Show more',
  location: 'Location',
  flow: 'Flow',
  defaultFlow: 'default',
  customerName: 'Customer name',
  phone: 'Phone',
  externalId: 'External id (order, deal)',
  ignoreCooldown: 'Send even within the cooldown',
  sendRequest: 'Send review request',
  sent: 'Accepted: cascade {id}, queued {queued}, skipped {skipped}.',
  needContact: 'Give an email or a phone.',
  loading: 'Loading…',
  error: 'Error',
};

export type MessageKey = keyof typeof en;

const ru: Record<MessageKey, string> = {
  appName: 'Запросы отзывов',
  language: 'Язык',
  switchTo: 'English',
  signInTitle: 'Вход',
  email: 'Email',
  password: 'Password',
  signIn: 'Войти',
  signOut: 'Выйти',
  signingIn: 'Входим…',
  acceptTitle: 'Присоединиться к организации',
  yourName: 'Ваше имя',
  newPassword: 'Пароль',
  passwordRule: 'Не короче 10 символов.',
  accept: 'Задать пароль и войти',
  nav: 'Разделы',
  cascades: 'Каскады',
  send: 'Отправить вручную',
  developer: 'Разработчикам',
  signedInAs: 'Вы вошли как',
  role_owner: 'владелец',
  role_admin: 'администратор',
  role_viewer: 'наблюдатель',
  readOnly: 'Ваша роль (наблюдатель) позволяет смотреть, но не изменять.',
  apiKeys: 'API-ключи',
  newKey: 'Новый API-ключ',
  keyName: 'Название ключа',
  scopes: 'Права',
  createKey: 'Создать ключ',
  secretOnce: 'Скопируйте ключ сейчас: он показывается только один раз.',
  newSecret: 'Новый ключ',
  revoke: 'Отозвать',
  revoked: 'отозван',
  active: 'действует',
  name: 'Название',
  key: 'Ключ',
  created: 'Создан',
  status: 'Статус',
  noKeys: 'API-ключей пока нет.',
  apiReference: 'Справочник API',
  searchExternalId: 'Внешний id',
  filterStatus: 'Статус',
  anyStatus: 'Любой',
  status_running: 'идёт',
  status_finished: 'завершён',
  search: 'Найти',
  recipients: 'Получатели',
  skipped: 'Пропущено',
  noCascades: 'Каскадов не найдено.',
  more: 'Показать ещё',
  location: 'Точка',
  flow: 'Сценарий',
  defaultFlow: 'по умолчанию',
  customerName: 'Имя клиента',
  phone: 'Телефон',
  externalId: 'Внешний id (заказ, сделка)',
  ignoreCooldown: 'Отправить даже в период паузы',
  sendRequest: 'Отправить запрос отзыва',
  sent: 'Принято: каскад {id}, в очереди {queued}, пропущено {skipped}.',
  needContact: 'Укажите email или телефон.',
  loading: 'Загрузка…',
  error: 'Ошибка',
};

export type Language = 'en' | 'ru';
export const MESSAGES: Record<Language, Record<MessageKey, string>> = { en, ru };

const STORAGE_KEY = 'rrs.console.language';

export function initialLanguage(): Language {
  const saved = localStorage.getItem(STORAGE_KEY);
  if (saved === 'en' || saved === 'ru') return saved;
  return navigator.language.toLowerCase().startsWith('ru') ? 'ru' : 'en';
}

export function saveLanguage(language: Language): void {
  localStorage.setItem(STORAGE_KEY, language);
  document.documentElement.lang = language;
}

export type Translate = (key: MessageKey, values?: Record<string, string | number>) => string;

export function translator(language: Language): Translate {
  return (key, values) => MESSAGES[language][key].replace(/\{(\w+)\}/g, (_, name: string) => String(values?.[name] ?? ''));
}
