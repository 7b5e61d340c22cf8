import { synchronousRefinements } from '@toolgate/core';
import * as z from 'zod';
import { type CompiledArgument, type CompiledQuery, DEFAULT_TEXT_LENGTH } from './compile.js';

/** The tool's flat input shape: one field per filter argument, then `sort` and `limit`. */
export function inputShape(compiled: CompiledQuery): Record<string, z.ZodType> {
  const shape: Record<string, z.ZodType> = {};
  for (const argument of compiled.arguments) shape[argument.arg] = argumentSchema(argument);
  if (compiled.defaultSort !== undefined) {
    const options = [...compiled.sortOptions.keys()] as [string, ...string[]];
    shape.sort = z
      .enum(options)
      .default(compiled.defaultSort)
      .describe(`Sort order. Default ${compiled.defaultSort}.`);
  }
  const { default: byDefault, max } = compiled.limit;
  shape.limit = z
    .number()
    .int()
    .min(1)
    .max(max)
    .default(byDefault)
    .describe(`How many rows to return, at most ${max}. Default ${byDefault}.`);
  return shape;
}

/** The output shape: `items` (the declared columns) and `total`. */
export function outputShape(compiled: CompiledQuery): Record<string, z.ZodType> {
  const item: Record<string, z.ZodType> = {};
  for (const column of compiled.columns) {
    item[column.key] =
      column.description === undefined ? z.unknown() : z.unknown().describe(column.description);
  }
  return {
    items: z.array(z.object(item)),
    total: z
      .number()
      .int()
      .nonnegative()
      .describe('How many rows match in all; more than items when the list was cut.'),
  };
}

function argumentSchema(argument: CompiledArgument): z.ZodType {
  const spec = argument.spec;
  let schema: z.ZodType;
  let description = spec.description;
  switch (spec.kind) {
    case 'enum':
      schema = z.enum(spec.values as [string, ...string[]]);
      if (spec.default !== undefined) return schema.default(spec.default).describe(description);
      break;
    case 'oneOf':
      schema = z
        .array(z.enum(spec.values as [string, ...string[]]))
        .min(1)
        .max(spec.values.length);
      break;
    case 'equals':
      if (spec.type === 'uuid') schema = z.uuid();
      else if (spec.type === 'integer') {
        schema = z
          .number()
          .int()
          .min(spec.min ?? Number.MIN_SAFE_INTEGER)
          .max(spec.max ?? Number.MAX_SAFE_INTEGER);
      } else schema = spec.pattern ? text(spec.maxLength).regex(spec.pattern) : text(spec.maxLength);
      break;
    case 'range': {
      const which = argument.bound === 'min' ? 'at least' : 'at most';
      description = `${spec.description} (${which}; from ${spec.min} to ${spec.max})`;
      if (spec.type === 'date') {
        const min = spec.min as string;
        const max = spec.max as string;
        schema = synchronousRefinements(
          z.iso.date().refine((value) => value >= min && value <= max, `a date from ${min} to ${max}`),
        );
      } else {
        const number = spec.type === 'integer' ? z.number().int() : z.number();
        schema = number.min(spec.min as number).max(spec.max as number);
      }
      break;
    }
    case 'withinDays':
      schema = z.number().int().min(1).max(spec.max);
      if (spec.default !== undefined) return schema.default(spec.default).describe(description);
      break;
    case 'prefix':
    case 'contains':
      schema = text(spec.maxLength).min(1);
      break;
  }
  schema = schema.describe(description);
  return spec.required === true ? schema : schema.optional();
}

// PostgreSQL text cannot hold NUL; refusing it here keeps it a model mistake, not a server error.
// Both refinements are synchronous and pure: declared so, core validates the tool's arguments with
// zod's synchronous parse (measured on search_orders: about 30 µs a call less than the async one).
function text(maxLength: number | undefined): z.ZodString {
  return synchronousRefinements(
    z
      .string()
      .max(maxLength ?? DEFAULT_TEXT_LENGTH)
      .refine((value) => !value.includes('\u0000'), 'text without NUL characters')
      // A surrogate without its pair is no character: the drivers would send U+FFFD in its place and
      // search for text the model never wrote.
      .refine((value) => value.isWellFormed(), 'well-formed Unicode text'),
  );
}
