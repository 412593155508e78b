export { reviewFormRouter, type ReviewFormOptions } from './router';
