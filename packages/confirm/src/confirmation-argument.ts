import * as z from 'zod';

/**
 * The `confirmation` argument a tool declares in its input so a model can carry a two-step
 * confirmation back: `input: { order_id: z.string(), amount: z.number(), confirmation: confirmationArgument }`.
 * Inputs are strict, so without it a model has no way to send one (only `_meta`, which clients fill).
 */
export const confirmationArgument = z
  .string()
  .max(100)
  .optional()
  .describe(
    'Leave out. Only after the user explicitly agreed to a request this tool asked to confirm: the confirmation it returned, unchanged.',
  );
