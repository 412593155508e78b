import type { busV1 } from '@rrs/proto';
import { fillTemplate } from './template';
import { cutToOnePart, encodingOf, fitsOnePart, smsParts, type SmsEncoding } from './smsParts';

const DEFAULT_TEMPLATE = '{{name}}, please rate {{location}}: {{link}}';
const LINK = /\{\{\s*link\s*\}\}/;
/** A template line is bounded before cutting, so a runaway template cannot make the cut expensive. */
const MAX_LINE = 1_000;

export interface SmsText {
  text: string;
  encoding: SmsEncoding;
  parts: number;
  /** The link as the text carries it: the review URL, or, when only that makes the text fit one part, its short form (`shortLink`). */
  link: string;
  /** True when words of the template line were left out to fit one part (the link never is). */
  cut: boolean;
}

/**
 * The review link without its scheme: `reviews.example.com/r/<token>`, 8 characters shorter than with
 * `https://`. Phones make it a link all the same (opened as http, which the ingress redirects to https).
 */
export function shortLink(url: string): string {
  return url.replace(/^https?:\/\//, '');
}

/**
 * The SMS text: the first line of the organization's SMS template with `{{name}}`, `{{location}}` and the
 * link filled in, in one part. The whole line with the full link when it fits; else with the short link
 * (`shortLink`), whole if that fits, cut otherwise (words before the link, never the link itself). With
 * no `{{link}}` in that line the link is appended. The console's template editor shows exactly this.
 */
export function renderSms(step: busV1.StepDue): SmsText {
  const template = (step.template?.body || DEFAULT_TEMPLATE).split(/\r?\n/)[0].slice(0, MAX_LINE);
  const placeholder = LINK.exec(template);
  const noLink = { ...step, reviewUrl: '' };
  const before = (placeholder ? fillTemplate(template.slice(0, placeholder.index), noLink) : `${fillTemplate(template, noLink).trimEnd()} `).replace(/^\s+/, '');
  const after = (placeholder ? fillTemplate(template.slice(placeholder.index + placeholder[0].length), noLink) : '').trimEnd();
  const whole = (link: string) => `${before}${link}${after}`;
  let link = step.reviewUrl;
  let text = whole(link);
  if (!fitsOnePart(text)) {
    link = shortLink(step.reviewUrl);
    text = cutToOnePart(before, link, after);
  }
  return { text, encoding: encodingOf(text), parts: smsParts(text), link, cut: text !== whole(link) };
}
