/*
 * The shared rules the console shows, from the one place they are written (proto/src), imported file by
 * file so the page's bundle takes these lists and not the gRPC code beside them.
 */
export { SCOPES } from '../../../proto/src/scopes';
export { CASCADE_STATUSES, SUBSCRIBABLE_EVENT_TYPES } from '../../../proto/src/states';
export { MEMBER_ROLES } from '../../../proto/src/members';
export { MAX_RECIPIENTS_PER_REQUEST } from '../../../proto/src/rules';
