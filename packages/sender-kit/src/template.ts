import type { busV1 } from '@rrs/proto';

/* The text of a message: the organization's template filled in, and made safe for HTML. */

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text made safe to put in HTML, as element content or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => HTML_ESCAPES[char]);
}

/**
 * `{{name}}` with what stands before it when there is no name, so that "Hello {{name}}," reads "Hello,"
 * and "Здравствуйте, {{name}}!" reads "Здравствуйте!" rather than greeting nobody ("Hello !").
 */
const NAME_WITH_LEAD = /(?:,[ \t]*|[ \t]+)?\{\{\s*name\s*\}\}/g;
const NAME = /\{\{\s*name\s*\}\}/g;
const LOCATION = /\{\{\s*location\s*\}\}/g;
const LINK = /\{\{\s*link\s*\}\}/g;

/**
 * Fills `{{name}}`, `{{location}}` and `{{link}}` in a template text. Values are inserted by a function,
 * never as a replacement pattern, so a name such as "$'" or "$&" stays exactly what the customer typed.
 */
export function fillTemplate(text: string, step: busV1.StepDue): string {
  const name = (step.recipient?.name ?? '').trim();
  const location = step.location?.name ?? '';
  const withName = name === '' ? text.replace(NAME_WITH_LEAD, () => '') : text.replace(NAME, () => name);
  return withName.replace(LOCATION, () => location).replace(LINK, () => step.reviewUrl);
}
