import { getOverview } from './overview';
import { listRatings, setRatingHandled } from './listRatings';
import { recordPublicLinkClick } from './publicLinkClicks';
import type { IdempotencyRequest } from '@rrs/idempotency';
import type { LinkPurpose, schedulerV1 } from '@rrs/proto';
import type { Bus, Pool } from '@rrs/runtime';
import { getAlertSettings, setAlertSettings, setMemberAlerts } from './alertSettings';
import { getRating, replyToRating, updateRating } from './inboxWorkflow';
import { createStaffLinkCode, listStaffChats, unlinkStaffChat } from './staffChats';
import { getOrganizationSettings, setOrganizationSettings } from './organizationSettings';
import type { OrganizationProfiles } from './organizationProfiles';
import { submitFeedback, submitRating } from './ratings';
import { claimBotLink, recordBotOptOut } from './botLinks';
import { getReviewForm } from './reviewForm';
import { cancelReviewRequest, createReviewRequest, type ReviewRequestInput } from './reviewRequests';
import { listRatingFeed } from './ratingFeed';
import type { SnapshotWriter } from './snapshots';
import type { RecipientBudgets } from './recipientBudget';
import { unsubscribe } from './unsubscribe';
import type { AddressHasher } from './personHash';

export interface ReviewsDeps {
  pool: Pool;
  /** Where replies to customers are published (steps.system.email). */
  bus?: Bus;
  profiles: OrganizationProfiles;
  snapshots: SnapshotWriter;
  /** The organizations' recipient budgets: a review request is one recipient. */
  budgets: RecipientBudgets;
  publicBaseUrl: string;
  minuteMs: number;
  feedbackWindowMinutes: number;
  alertHoldMs: number;
  /** Keyed hashes of addresses: the opt-out ledger keeps those of erased people (personHash.ts). */
  hasher: AddressHasher;
}

/**
 * The review side of the scheduler, one method per use case: review requests, the public form behind
 * `/r/<token>` and `/u/<token>`, and the organization settings it reads. A cascade recipient's link and
 * a link from POST /review-requests are the same kind of row and behave the same way; a rating on a
 * recipient's link also finishes the recipient.
 */
export class Reviews {
  constructor(private readonly deps: ReviewsDeps) {}

  /** The console's overview: the funnel and the ratings of the review requests made in a range. */
  overview(input: schedulerV1.GetOverviewRequest): Promise<schedulerV1.GetOverviewResponse> {
    return getOverview(this.deps.pool, input);
  }

  /** The ratings inbox: newest first, optionally only low ones, with feedback, or of one location. */
  listRatings(input: schedulerV1.ListRatingsRequest): Promise<schedulerV1.ListRatingsResponse> {
    return listRatings(this.deps.pool, input);
  }

  /** The ratings feed: every rating in the order recorded, after a position (ratingFeed.ts). */
  ratingFeed(input: schedulerV1.ListRatingFeedRequest): Promise<schedulerV1.ListRatingFeedResponse> {
    return listRatingFeed(this.deps.pool, input);
  }

  /** Marks a rating of the inbox handled by a member, or clears the mark. */
  setRatingHandled(input: schedulerV1.SetRatingHandledRequest): Promise<schedulerV1.SetRatingHandledResponse> {
    return setRatingHandled(this.deps.pool, input);
  }

  /** One rating of the inbox with its history, and whether a reply is possible. */
  getRating(input: schedulerV1.GetRatingRequest): Promise<schedulerV1.GetRatingResponse> {
    return getRating(this.deps, input);
  }

  /** A member's action on a rating of the inbox (assign, unassign, resolve, reopen, note). */
  updateRating(input: schedulerV1.UpdateRatingRequest): Promise<schedulerV1.UpdateRatingResponse> {
    return updateRating(this.deps, input);
  }

  /** A member's reply to the customer by email. */
  replyToRating(input: schedulerV1.ReplyToRatingRequest): Promise<schedulerV1.ReplyToRatingResponse> {
    return replyToRating(this.deps, input);
  }

  getAlertSettings(organizationId: string): Promise<schedulerV1.AlertSettings> {
    return getAlertSettings(this.deps.pool, organizationId);
  }

  setAlertSettings(settings: schedulerV1.AlertSettings): Promise<schedulerV1.AlertSettings> {
    return setAlertSettings(this.deps.pool, this.deps.profiles, settings);
  }

  setMemberAlerts(input: schedulerV1.SetMemberAlertsRequest): Promise<schedulerV1.AlertSettings> {
    return setMemberAlerts(this.deps.pool, this.deps.profiles, input);
  }

  createStaffLinkCode(input: schedulerV1.CreateStaffLinkCodeRequest): Promise<schedulerV1.CreateStaffLinkCodeResponse> {
    return createStaffLinkCode(this.deps.pool, input);
  }

  listStaffChats(organizationId: string): Promise<schedulerV1.ListStaffChatsResponse> {
    return listStaffChats(this.deps.pool, organizationId);
  }

  unlinkStaffChat(input: schedulerV1.UnlinkStaffChatRequest): Promise<schedulerV1.UnlinkStaffChatResponse> {
    return unlinkStaffChat(this.deps.pool, input);
  }

  /** A click on a public review link of the thank-you page, once per review request and site; answers the URL. */
  recordPublicLinkClick(input: schedulerV1.RecordPublicLinkClickRequest): Promise<schedulerV1.RecordPublicLinkClickResponse> {
    return recordPublicLinkClick(this.deps.pool, input);
  }

  create(input: ReviewRequestInput, idempotency?: IdempotencyRequest) {
    return createReviewRequest(this.deps, input, idempotency);
  }

  /** Closes a review request's link (not a cascade recipient's): no rating is taken on it any more. */
  cancel(organizationId: string, id: string, idempotency?: IdempotencyRequest) {
    return cancelReviewRequest(this.deps, organizationId, id, idempotency);
  }

  /** The form's data; with `recordOpen`, the first view is recorded as `opened`. */
  getForm(token: string, recordOpen: boolean, purpose: LinkPurpose = 'review', botChannels: readonly string[] = []): Promise<schedulerV1.ReviewForm> {
    return getReviewForm(this.deps.pool, this.deps.hasher, token, recordOpen, purpose, botChannels);
  }

  /** A bot chat claims the code of a thank-you page's deep link (botLinks.ts). */
  claimBotLink(request: schedulerV1.ClaimBotLinkRequest): Promise<schedulerV1.ClaimBotLinkResponse> {
    return claimBotLink(this.deps.pool, request);
  }

  /** A person unlinked a bot chat: their opt-out (botLinks.ts). */
  recordBotOptOut(request: schedulerV1.RecordBotOptOutRequest): Promise<schedulerV1.RecordBotOptOutResponse> {
    return recordBotOptOut(this.deps.pool, request);
  }

  submitRating(token: string, rating: number): Promise<schedulerV1.SubmitRatingResponse> {
    return submitRating(this.deps.pool, this.deps, token, rating);
  }

  submitFeedback(token: string, text: string): Promise<schedulerV1.SubmitFeedbackResponse> {
    return submitFeedback(this.deps.pool, token, text);
  }

  unsubscribe(request: schedulerV1.UnsubscribeRequest): Promise<schedulerV1.UnsubscribeResponse> {
    return unsubscribe(this.deps.pool, this.deps.minuteMs, request);
  }

  getSettings(organizationId: string): Promise<schedulerV1.OrganizationSettings> {
    return getOrganizationSettings(this.deps.pool, organizationId);
  }

  /** `maxRecipientsPerRequest` 0 restores the default (500). */
  setSettings(organizationId: string, lowRatingThreshold: number, maxRecipientsPerRequest = 0): Promise<schedulerV1.OrganizationSettings> {
    return setOrganizationSettings(this.deps.pool, organizationId, lowRatingThreshold, maxRecipientsPerRequest);
  }
}
