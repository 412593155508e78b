import { sendingRefusal, type SendingAccount } from '@rrs/proto';
import { sendingRefused } from '@rrs/runtime';
import type { RequestInput } from './validation';
import type { Route } from './route';

/** The refusals of the sending rule, in the order it checks them (402 before 409). */
export const SENDING_ERRORS = ['plan_required', 'email_not_confirmed'] as const;

/** Whether this request of the route sends messages (`sends` may decide from the validated request). */
export function requestSends(route: Route, input: RequestInput): boolean {
  return typeof route.sends === 'function' ? route.sends(input) : route.sends === true;
}

/** The sending rule of @rrs/proto: 402 `plan_required` on a trial plan, 409 `email_not_confirmed`. */
export function checkSendingAllowed(account: SendingAccount): void {
  const refusal = sendingRefusal(account);
  if (refusal) throw sendingRefused(refusal);
}
