import type { busV1 } from '@rrs/proto';
import { fillTemplate } from './template';

const DEFAULT_TEMPLATE = '{{name}}, please rate your visit: {{link}}';

/** The messenger text: the location name on the first line, then the SMS template filled in (with the link). */
export function renderMessengerText(step: busV1.StepDue): string {
  const template = step.template?.body || DEFAULT_TEMPLATE;
  let body = fillTemplate(template, step).trim();
  if (!body.includes(step.reviewUrl)) body = `${body} ${step.reviewUrl}`.trim();
  const location = (step.location?.name ?? '').trim();
  return location ? `${location}\n${body}` : body;
}
