import type { busV1 } from '@rrs/proto';
import { fillTemplate } from './template';
import { cutToOnePart, encodingOf, smsParts, type SmsEncoding } from './smsParts';

const DEFAULT_TEMPLATE = '{{name}}, please rate {{location}}: {{link}}';
const LINK = /\{\{\s*link\s*\}\}/;
/** A template line is bounded before cutting, so a runaway template cannot make the cut expensive. */
const MAX_LINE = 1_000;

export interface SmsText {
  text: string;
  encoding: SmsEncoding;
  parts: number;
}

/**
 * The SMS text: the first line of the organization's SMS template with `{{name}}`, `{{location}}` and the
 * link filled in, cut to one part without breaking the link. With no `{{link}}` in that line the link
 * is appended.
 */
export function renderSms(step: busV1.StepDue): SmsText {
  const template = (step.template?.body || DEFAULT_TEMPLATE).split(/\r?\n/)[0].slice(0, MAX_LINE);
  const placeholder = LINK.exec(template);
  const noLink = { ...step, reviewUrl: '' };
  const before = placeholder ? fillTemplate(template.slice(0, placeholder.index), noLink) : `${fillTemplate(template, noLink).trimEnd()} `;
  const after = placeholder ? fillTemplate(template.slice(placeholder.index + placeholder[0].length), noLink) : '';
  const text = cutToOnePart(before.replace(/^\s+/, ''), step.reviewUrl, after.trimEnd());
  return { text, encoding: encodingOf(text), parts: smsParts(text) };
}
