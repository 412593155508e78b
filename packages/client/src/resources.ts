import type { Client } from 'openapi-fetch';
import type { components, operations, paths } from './generated/api';
import { IDEMPOTENCY_KEY_HEADER } from './idempotency';

type Schemas = components['schemas'];
type JsonBody<Operation> = Operation extends { requestBody: { content: { 'application/json': infer Body } } } ? Body : never;
type Success<Operation, Status extends number> = Operation extends { responses: { [S in Status]: { content: { 'application/json': infer Body } } } } ? Body : never;
type Query<Operation> = Operation extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

/** A cascade as GET /cascades/{id} shows it (also what a cancel answers). */
export type Cascade = Success<operations['getCascade'], 200>;
export type StartCascadeBody = JsonBody<operations['startCascade']>;
export type StartedCascade = Success<operations['startCascade'], 202>;
export type CascadeListQuery = Query<operations['listCascades']>;
export type CascadePage = Success<operations['listCascades'], 200>;
export type CreateReviewRequestBody = JsonBody<operations['createReviewRequest']>;
export type ReviewRequest = Success<operations['createReviewRequest'], 201>;
export type RatingFeedQuery = Query<operations['listRatings']>;
export type RatingPage = Success<operations['listRatings'], 200>;
export type Rating = Schemas['Rating'];

/** The problem details of a refused call (RFC 9457), with its HTTP status; `problem.code` is the stable code. */
export class ReviewRequestApiError extends Error {
  readonly status: number;
  readonly problem: Schemas['Problem'];

  constructor(status: number, problem: Schemas['Problem']) {
    super(`${status} ${problem.code}: ${problem.detail}`);
    this.name = 'ReviewRequestApiError';
    this.status = status;
    this.problem = problem;
  }

  get code(): Schemas['Problem']['code'] {
    return this.problem.code;
  }
}

/** Per call: the Idempotency-Key to send (e.g. your own order or deal id), instead of a generated one. */
export interface CallOptions {
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** What openapi-fetch answers: the body, or the problem (thrown here), with the response. */
function unwrap<Data>(result: { data?: Data; error?: unknown; response: Response }): Data {
  if (result.error !== undefined || result.data === undefined) {
    const problem = (result.error ?? {}) as Schemas['Problem'];
    throw new ReviewRequestApiError(result.response.status, { ...problem, status: problem.status ?? result.response.status });
  }
  return result.data;
}

const keyHeader = (options: CallOptions | undefined) => (options?.idempotencyKey ? { [IDEMPOTENCY_KEY_HEADER]: options.idempotencyKey } : undefined);

/**
 * A list read page by page: `await` it for the first page, or `for await` it for every page in turn
 * (each next page asked for with the previous page's cursor, until the list says there is no more).
 */
export class Pages<Page> implements PromiseLike<Page>, AsyncIterable<Page> {
  constructor(
    private readonly fetchPage: (cursor: string | undefined) => Promise<Page>,
    private readonly first: string | undefined,
    private readonly nextOf: (page: Page) => string | undefined,
  ) {}

  then<Fulfilled = Page, Rejected = never>(onFulfilled?: ((page: Page) => Fulfilled | PromiseLike<Fulfilled>) | null, onRejected?: ((reason: unknown) => Rejected | PromiseLike<Rejected>) | null): Promise<Fulfilled | Rejected> {
    return this.fetchPage(this.first).then(onFulfilled, onRejected);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Page> {
    let cursor = this.first;
    for (;;) {
      const page = await this.fetchPage(cursor);
      yield page;
      const next = this.nextOf(page);
      if (next === undefined) return;
      cursor = next;
    }
  }
}

/** `client.cascades`: start, read, list and cancel cascades. */
export interface CascadesResource {
  /** POST /cascades (202): the recipients are put into the flow; steps run in the background. */
  create(body: StartCascadeBody, options?: CallOptions): Promise<StartedCascade>;
  /** GET /cascades/{id}. */
  get(id: string, options?: Pick<CallOptions, 'signal'>): Promise<Cascade>;
  /** GET /cascades: newest first; `await` the first page or `for await` every page. */
  list(query?: CascadeListQuery, options?: Pick<CallOptions, 'signal'>): Pages<CascadePage>;
  /** POST /cascades/{id}/cancel: every recipient not finished yet finishes `canceled`; the cascade as it is then. */
  cancel(id: string, options?: CallOptions): Promise<Cascade>;
  /** POST /cascades/cancel: cancels every running cascade started with this externalId; the ids canceled. */
  cancelByExternalId(externalId: string, options?: CallOptions): Promise<string[]>;
}

/** `client.reviewRequests`: personal review links you deliver yourself. */
export interface ReviewRequestsResource {
  create(body: CreateReviewRequestBody, options?: CallOptions): Promise<ReviewRequest>;
  /** POST /review-requests/{id}/cancel: the link shows "no longer active" and takes no rating. */
  cancel(id: string, options?: CallOptions): Promise<ReviewRequest>;
}

/** `client.ratings`: the ratings feed. */
export interface RatingsResource {
  /**
   * GET /ratings from `since` (a `nextCursor` you kept; none = from the start). `await` it for one page,
   * or `for await` it to read until you are up to date: keep the last page's `nextCursor` and pass it as
   * `since` next time.
   */
  list(query?: RatingFeedQuery, options?: Pick<CallOptions, 'signal'>): Pages<RatingPage>;
}

export interface Resources {
  cascades: CascadesResource;
  reviewRequests: ReviewRequestsResource;
  ratings: RatingsResource;
}

/** The resource methods over the path calls of `client`: each returns the body, or throws ReviewRequestApiError. */
export function resourcesOf(client: Client<paths>): Resources {
  return {
    cascades: {
      create: async (body, options) => unwrap(await client.POST('/cascades', { body, params: { header: keyHeader(options) }, signal: options?.signal })),
      get: async (id, options) => unwrap(await client.GET('/cascades/{id}', { params: { path: { id } }, signal: options?.signal })),
      list: (query = {}, options) =>
        new Pages(
          async (cursor) => unwrap(await client.GET('/cascades', { params: { query: { ...query, cursor } }, signal: options?.signal })),
          query.cursor,
          (page) => page.nextCursor ?? undefined,
        ),
      cancel: async (id, options) => unwrap(await client.POST('/cascades/{id}/cancel', { params: { path: { id }, header: keyHeader(options) }, signal: options?.signal })),
      cancelByExternalId: async (externalId, options) =>
        unwrap(await client.POST('/cascades/cancel', { body: { externalId }, params: { header: keyHeader(options) }, signal: options?.signal })).canceled,
    },
    reviewRequests: {
      create: async (body, options) => unwrap(await client.POST('/review-requests', { body, params: { header: keyHeader(options) }, signal: options?.signal })),
      cancel: async (id, options) => unwrap(await client.POST('/review-requests/{id}/cancel', { params: { path: { id }, header: keyHeader(options) }, signal: options?.signal })),
    },
    ratings: {
      list: (query = {}, options) =>
        new Pages(
          async (since) => unwrap(await client.GET('/ratings', { params: { query: { ...query, since } }, signal: options?.signal })),
          query.since,
          (page) => (page.hasMore ? page.nextCursor : undefined),
        ),
    },
  };
}
