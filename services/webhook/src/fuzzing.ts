// What @sextant/fuzz feeds untrusted bytes to (fuzz/src/targets/).
export { admitInjection } from "./admission/inject.js";
export { parseReview, reviewResponse } from "./admission/review.js";
export { admitValidation } from "./admission/validate.js";
export { webhookSettings } from "./settings.js";
