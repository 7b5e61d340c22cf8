import * as z from 'zod';
import type { InferArgs, InputSchema, ToolDefinition, ToolSpec } from './types.js';

// MCP tool names: 1-128 characters of letters, digits, `_`, `-` and `.`.
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/**
 * Defines a tool once, without the SDK. The input becomes a strict zod object (unknown arguments are
 * refused and the published schema says `additionalProperties: false`); a declared output is
 * published extended with the envelope's own fields `ok`, `total` and `note`.
 */
export function defineTool<const S extends InputSchema, O extends InputSchema | undefined = undefined>(
  spec: ToolSpec<S, O>,
): ToolDefinition<InferArgs<S>> {
  if (!TOOL_NAME.test(spec.name)) {
    throw new TypeError(
      `defineTool: invalid tool name ${JSON.stringify(spec.name)}; use 1-128 letters, digits, "_", "-" or "."`,
    );
  }
  if (typeof spec.description !== 'string' || spec.description.trim() === '') {
    throw new TypeError(`defineTool(${spec.name}): a description is required; say when to use the tool`);
  }
  if (typeof spec.handler !== 'function') {
    throw new TypeError(`defineTool(${spec.name}): handler must be a function`);
  }
  if (spec.bind !== undefined && typeof spec.bind !== 'function') {
    throw new TypeError(`defineTool(${spec.name}): bind must be a function of (request, caller)`);
  }
  const middleware = spec.middleware ?? [];
  middleware.forEach((entry, index) => {
    if (typeof entry !== 'function') {
      throw new TypeError(`defineTool(${spec.name}): middleware[${index}] is not a function`);
    }
  });
  const inputSchema = toObjectSchema(spec.input, `defineTool(${spec.name}): input`).strict();
  const outputSchema =
    spec.output === undefined
      ? undefined
      : toObjectSchema(spec.output, `defineTool(${spec.name}): output`).extend({
          ok: z.literal(true),
          total: z.number().int().nonnegative().optional(),
          note: z.string().optional(),
        });
  return Object.freeze({
    name: spec.name,
    title: spec.title,
    description: spec.description,
    inputSchema,
    outputSchema,
    annotations: spec.annotations,
    middleware: Object.freeze([...middleware]),
    meta: spec.meta,
    bind: spec.bind,
    handler: spec.handler as ToolDefinition<InferArgs<S>>['handler'],
  });
}

function toObjectSchema(schema: InputSchema, what: string): z.ZodObject {
  if (isZodObject(schema)) return schema;
  if (typeof schema !== 'object' || schema === null) {
    throw new TypeError(`${what} must be a zod shape or a zod object`);
  }
  for (const [key, value] of Object.entries(schema)) {
    if (!isZodType(value)) throw new TypeError(`${what}.${key} is not a zod schema`);
  }
  return z.object(schema);
}

// Structural checks rather than instanceof: the server author's zod may be another copy.
function isZodType(value: unknown): value is z.ZodType {
  return typeof value === 'object' && value !== null && '_zod' in value;
}

function isZodObject(value: unknown): value is z.ZodObject {
  return isZodType(value) && (value as z.ZodType)._zod.def.type === 'object';
}
