/*
 * The shared rules the console shows, from the one place they are written (proto/src), imported file by
 * file so the page's bundle takes these lists and not the gRPC code beside them.
 */
export { SCOPES } from '../../../proto/src/scopes';
export { CASCADE_STATUSES, SUBSCRIBABLE_EVENT_TYPES } from '../../../proto/src/states';
export { MEMBER_ROLES } from '../../../proto/src/members';
export { MAX_RECIPIENTS_PER_REQUEST } from '../../../proto/src/rules';
export { REVIEW_PLATFORMS, reviewLinkOf, type ReviewPlatform } from '../../../proto/src/reviewLinks';
export { MAX_FLOW_STEPS, MAX_RESPONSE_WINDOW_MINUTES, MAX_COOLDOWN_DAYS, CHANNELS_WITH_SMS_TEXT } from '../../../proto/src/rules';
export { smsCount } from '../../sender-kit/src/smsParts';
export { renderEmail } from '../../sender-kit/src/emailMessage';
export { renderSms } from '../../sender-kit/src/smsText';
export { renderMessengerText } from '../../sender-kit/src/messengerText';
export { KNOWN_CHANNEL_KEYS } from '../../../proto/src/states';
export { fillTemplate } from '../../sender-kit/src/template';
