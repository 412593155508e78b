export { reviewFormRouter, type ReviewFormOptions } from './router';
export { busRatingOutbox, type RatingOutbox } from './ratingOutbox';
