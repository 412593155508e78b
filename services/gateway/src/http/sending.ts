/**
 * The refusals of the sending rule (@rrs/proto `sendingRefusal`), in the order it checks them (402
 * before 409), as a route that sends documents them. The gateway never checks the rule itself: the
 * scheduler's admission answers it for every entry point (services/cascade-scheduler/src/admission.ts,
 * through StartCascade or its dry run), and the gateway passes its refusal on unchanged.
 */
export const SENDING_ERRORS = ['plan_required', 'email_not_confirmed'] as const;
