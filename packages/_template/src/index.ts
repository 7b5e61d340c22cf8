// Public face of the package: explicit named exports only.
export { createCallCounter } from './call-counter.js';
export type { CallCounterOptions, CallCounterRules } from './types.js';
