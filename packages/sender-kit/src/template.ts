import type { busV1 } from '@rrs/proto';

/* The text of a message: the organization's template filled in, and made safe for HTML. */

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text made safe to put in HTML, as element content or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => HTML_ESCAPES[char]);
}

/** Fills `{{name}}`, `{{location}}` and `{{link}}` in a template text. */
export function fillTemplate(text: string, step: busV1.StepDue): string {
  return text
    .replace(/\{\{\s*name\s*\}\}/g, step.recipient?.name ?? '')
    .replace(/\{\{\s*location\s*\}\}/g, step.location?.name ?? '')
    .replace(/\{\{\s*link\s*\}\}/g, step.reviewUrl);
}
