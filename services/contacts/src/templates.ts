import { InvalidError, type Pool } from '@rrs/runtime';
import { templateChannelOf } from '@rrs/proto';
import { asUuid, checkText, FieldErrors, found, isChannelKey, MAX_CHANNEL_KEY_LENGTH } from './validation';

/** Channels every organization is shown, configured or not. Other keys appear once they are set. */
export const KNOWN_CHANNELS = ['EMAIL', 'SMS', 'MAX', 'TELEGRAM'] as const;

/** The channels a list shows: the known ones, then every other key the organization has set. */
export function shownChannels(keysSet: string[]): string[] {
  return [...KNOWN_CHANNELS, ...keysSet.filter((key) => !(KNOWN_CHANNELS as readonly string[]).includes(key))];
}

export const PLACEHOLDERS = ['name', 'location', 'link'] as const;
export const MAX_SUBJECT_LENGTH = 200;
export const MAX_BODY_LENGTH = 4000;

export interface MessageTemplate {
  channel: string;
  /** EMAIL only; empty for the other channels. */
  subject: string;
  body: string;
  isDefault: boolean;
}

type Locale = 'en' | 'ru';

/**
 * Defaults by locale. The SMS text is one line so it survives being cut to one SMS part with the link
 * intact; MAX and TELEGRAM send it too, with the location name as a first line from the sender (the
 * spec). MESSENGER is the default of text channels added later (e.g. VIBER).
 */
const DEFAULTS: Record<Locale, { EMAIL: { subject: string; body: string }; SMS: string; MESSENGER: string }> = {
  en: {
    EMAIL: {
      subject: 'How was your visit to {{location}}?',
      body: 'Hello {{name}},\n\nThank you for visiting {{location}}. Would you take a minute to rate your visit?\n\n{{link}}\n\nYour feedback helps us get better.',
    },
    SMS: 'Please rate your visit to {{location}}: {{link}}',
    MESSENGER: 'Hello {{name}}! Thank you for your visit. Please rate it, it takes a minute: {{link}}',
  },
  ru: {
    EMAIL: {
      subject: 'Как прошёл ваш визит в {{location}}?',
      body: 'Здравствуйте, {{name}}!\n\nСпасибо, что выбрали {{location}}. Пожалуйста, уделите минуту и оцените визит:\n\n{{link}}\n\nВаш отзыв помогает нам стать лучше.',
    },
    SMS: 'Оцените визит в {{location}}: {{link}}',
    MESSENGER: 'Здравствуйте, {{name}}! Спасибо за визит. Оцените его, пожалуйста, это займёт минуту: {{link}}',
  },
};

export function defaultTemplate(locale: string, channel: string): MessageTemplate {
  const texts = DEFAULTS[(locale in DEFAULTS ? locale : 'en') as Locale];
  if (channel === 'EMAIL') return { channel, subject: texts.EMAIL.subject, body: texts.EMAIL.body, isDefault: true };
  if (channel === 'SMS') return { channel, subject: '', body: texts.SMS, isDefault: true };
  // Channels added later are short text messages (MAX and TELEGRAM are shown SMS's: templateChannelOf).
  return { channel, subject: '', body: texts.MESSENGER, isDefault: true };
}

export function checkChannelKey(channel: string): void {
  if (!isChannelKey(channel)) {
    throw new InvalidError(
      [{ pointer: '/channel', detail: `must be an upper-case channel key such as EMAIL, SMS, MAX or TELEGRAM (^[A-Z][A-Z0-9_]{0,31}$, at most ${MAX_CHANNEL_KEY_LENGTH} characters)` }],
      { message: `channel ${JSON.stringify(channel)} is not a channel key` },
    );
  }
}

function checkPlaceholders(errors: FieldErrors, pointer: string, text: string): void {
  for (const [placeholder, name] of text.matchAll(/\{\{(.*?)\}\}/g)) {
    if (!(PLACEHOLDERS as readonly string[]).includes(name)) {
      errors.add(pointer, `unknown placeholder ${placeholder}; the placeholders are ${PLACEHOLDERS.map((known) => `{{${known}}}`).join(', ')}`);
    }
  }
}

/** An organization's own template as stored. */
export interface TemplateRow {
  channel: string;
  subject: string;
  body: string;
}

/** The effective templates of an organization whose own are `rows` (in channel order): see `Templates.list`. */
export function effectiveTemplates(locale: string, rows: readonly TemplateRow[]): MessageTemplate[] {
  const own = new Map(rows.map((row) => [row.channel, row]));
  const effective = (channel: string): MessageTemplate => {
    const template = own.get(channel);
    return template ? { channel, subject: template.subject, body: template.body, isDefault: false } : defaultTemplate(locale, channel);
  };
  // MAX and TELEGRAM show what they send: the SMS template's text (a row kept from before that rule is not used).
  return shownChannels(rows.map((row) => row.channel)).map((channel) => (templateChannelOf(channel) === channel ? effective(channel) : { ...effective(templateChannelOf(channel)), channel }));
}

/** Message templates per organization and channel; a channel without its own uses the locale default. */
export class Templates {
  constructor(private readonly pool: Pool) {}

  /** The effective template of every known channel and of each channel with its own template. */
  async list(organizationId: string): Promise<MessageTemplate[]> {
    return this.listOf({ id: organizationId, locale: await localeOf(this.pool, organizationId) });
  }

  /** `list` for an organization already read (it exists; its locale picks the defaults). */
  async listOf(organization: { id: string; locale: string }): Promise<MessageTemplate[]> {
    const { rows } = await this.pool.query<TemplateRow>('SELECT channel, subject, body FROM message_templates WHERE organization_id = $1 ORDER BY channel', [organization.id]);
    return effectiveTemplates(organization.locale, rows);
  }

  async set(input: { organizationId: string; channel: string; subject?: string; body: string }): Promise<MessageTemplate> {
    await localeOf(this.pool, input.organizationId);
    checkChannelKey(input.channel);
    if (templateChannelOf(input.channel) !== input.channel) {
      throw InvalidError.field('/channel', `${input.channel} messages use the SMS template (the location name on the first line, then the SMS text): set the SMS template`);
    }
    const subject = input.subject ?? '';
    const errors = new FieldErrors();
    if (input.channel === 'EMAIL') {
      checkText(errors, '/subject', subject, { min: 1, max: MAX_SUBJECT_LENGTH });
      checkPlaceholders(errors, '/subject', subject);
    } else if (subject !== '') {
      errors.add('/subject', 'only EMAIL templates have a subject');
    }
    checkText(errors, '/body', input.body, { min: 1, max: MAX_BODY_LENGTH, multiline: true });
    checkPlaceholders(errors, '/body', input.body);
    // Without the link the message cannot lead to the review form, which is its whole purpose.
    if (!input.body.includes('{{link}}')) errors.add('/body', 'must contain the {{link}} placeholder');
    errors.throwIfAny();
    await this.pool.query(
      `INSERT INTO message_templates (organization_id, channel, subject, body) VALUES ($1, $2, $3, $4)
       ON CONFLICT (organization_id, channel) DO UPDATE SET subject = excluded.subject, body = excluded.body, updated_at = now()`,
      [input.organizationId, input.channel, subject, input.body],
    );
    return { channel: input.channel, subject, body: input.body, isDefault: false };
  }

  /** Drops the organization's own template; returns the default that applies from now on. */
  async reset(organizationId: string, channel: string): Promise<MessageTemplate> {
    const locale = await localeOf(this.pool, organizationId);
    checkChannelKey(channel);
    await this.pool.query('DELETE FROM message_templates WHERE organization_id = $1 AND channel = $2', [organizationId, channel]);
    return defaultTemplate(locale, channel);
  }
}

/** The organization's locale; `not_found` when the organization does not exist. */
export async function localeOf(pool: Pool, organizationId: string): Promise<string> {
  const { rows } = await pool.query<{ locale: string }>('SELECT locale FROM organizations WHERE id = $1', [asUuid(organizationId, 'organization')]);
  return found(rows[0], `organization ${organizationId}`).locale;
}
