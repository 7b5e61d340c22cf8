/** What a tool may override (`tools: { name: { ... } }`), or `false` to opt out. */
export interface CallCounterRules {
  /** Write a decision on every `every`-th call of a caller to a tool. @default 100 */
  every: number;
}

/** Options of `createCallCounter`. */
export interface CallCounterOptions extends Partial<CallCounterRules> {
  /** Per tool: rules that replace the global ones, or `false`. @default {} */
  tools?: Record<string, Partial<CallCounterRules> | false>;
}
