export { reviewFormRouter, type ReviewFormOptions } from './router';
export { busRatingOutbox, type RatingOutbox } from './ratingOutbox';
export { botLinksOf, type BotLinkSource } from './botLinks';
