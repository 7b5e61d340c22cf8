import { setTimeout as sleep } from 'node:timers/promises';
import type { ElicitRequestFormParams } from '@modelcontextprotocol/sdk/types.js';
import { defineTool, ok, type ToolContext, type ToolDefinition } from '@toolgate/core';
import * as z from 'zod';
import { RED_PIXEL_PNG, SILENT_WAV } from './media.js';

// The reference tools of @modelcontextprotocol/conformance 0.1.13: names, arguments and content are the
// ones its scenarios call and check. Each answers through core's result contract, so the JSON text of
// the envelope comes first and the scenario's own content blocks follow it.

/** The pause between steps the logging and progress scenarios ask for (~50 ms), so notifications interleave. */
const STEP_MS = 50;

const simpleText = defineTool({
  name: 'test_simple_text',
  description: 'Returns a fixed text (conformance scenario tools-call-simple-text).',
  input: {},
  handler: () => ok({ text: 'This is a simple text response for testing.' }),
});

const imageContent = defineTool({
  name: 'test_image_content',
  description: 'Returns a 1x1 PNG image (conformance scenario tools-call-image).',
  input: {},
  handler: () =>
    ok(
      { mimeType: 'image/png' },
      { content: [{ type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' }] },
    ),
});

const audioContent = defineTool({
  name: 'test_audio_content',
  description: 'Returns a short silent WAV clip (conformance scenario tools-call-audio).',
  input: {},
  handler: () =>
    ok({ mimeType: 'audio/wav' }, { content: [{ type: 'audio', data: SILENT_WAV, mimeType: 'audio/wav' }] }),
});

const embeddedResource = defineTool({
  name: 'test_embedded_resource',
  description: 'Returns an embedded text resource (conformance scenario tools-call-embedded-resource).',
  input: {},
  handler: () =>
    ok(
      { uri: 'test://embedded-resource' },
      {
        content: [
          {
            type: 'resource',
            resource: {
              uri: 'test://embedded-resource',
              mimeType: 'text/plain',
              text: 'This is an embedded resource content.',
            },
          },
        ],
      },
    ),
});

const multipleContentTypes = defineTool({
  name: 'test_multiple_content_types',
  description:
    'Returns text, an image and an embedded resource (conformance scenario tools-call-mixed-content).',
  input: {},
  handler: () =>
    ok(
      { parts: 3 },
      {
        content: [
          { type: 'text', text: 'Multiple content types test:' },
          { type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' },
          {
            type: 'resource',
            resource: {
              uri: 'test://mixed-content-resource',
              mimeType: 'application/json',
              text: JSON.stringify({ test: 'data', value: 123 }),
            },
          },
        ],
      },
    ),
});

const withLogging = defineTool({
  name: 'test_tool_with_logging',
  description:
    'Sends three info log messages ~50 ms apart, then answers (conformance scenario tools-call-with-logging).',
  input: {},
  handler: async (_args, ctx) => {
    await ctx.server.log('info', 'Tool execution started');
    await sleep(STEP_MS, undefined, { signal: ctx.signal });
    await ctx.server.log('info', 'Tool processing data');
    await sleep(STEP_MS, undefined, { signal: ctx.signal });
    await ctx.server.log('info', 'Tool execution completed');
    return ok({ messages: 3 });
  },
});

const errorHandling = defineTool({
  name: 'test_error_handling',
  description: 'Always fails (conformance scenario tools-call-error).',
  input: {},
  handler: () => {
    // A raw throw on purpose: the suite sees what redact-errors makes of it (`internal` and an incident
    // id, the message kept for the server log).
    throw new Error('This tool intentionally returns an error for testing');
  },
});

const withProgress = defineTool({
  name: 'test_tool_with_progress',
  description:
    'Reports progress 0, 50 and 100 of 100, ~50 ms apart (conformance scenario tools-call-with-progress).',
  input: {},
  handler: async (_args, ctx) => {
    await ctx.server.progress(0, 100);
    await sleep(STEP_MS, undefined, { signal: ctx.signal });
    await ctx.server.progress(50, 100);
    await sleep(STEP_MS, undefined, { signal: ctx.signal });
    const reported = await ctx.server.progress(100, 100);
    // `total` is the envelope's own key (a cut list), so the data says `outOf`.
    return ok({ progress: 100, outOf: 100, notified: reported });
  },
});

const sampling = defineTool({
  name: 'test_sampling',
  description: "Asks the client's model to answer a prompt (conformance scenario tools-call-sampling).",
  input: { prompt: z.string().describe('The prompt to send to the model') },
  handler: async ({ prompt }, ctx) => {
    const answer = await ctx.server.sample({
      messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
      maxTokens: 100,
    });
    const text = answer.content.type === 'text' ? answer.content.text : `(${answer.content.type} content)`;
    return ok(
      { model: answer.model, response: text },
      { content: [{ type: 'text', text: `LLM response: ${text}` }] },
    );
  },
});

const elicitation = defineTool({
  name: 'test_elicitation',
  description: 'Asks the user for a username and an email (conformance scenario tools-call-elicitation).',
  input: { message: z.string().describe('The message to show the user') },
  handler: ({ message }, ctx) =>
    askUser(ctx, 'User response', {
      message,
      requestedSchema: {
        type: 'object',
        properties: {
          username: { type: 'string', description: "User's response" },
          email: { type: 'string', description: "User's email address" },
        },
        required: ['username', 'email'],
      },
    }),
});

const elicitationDefaults = defineTool({
  name: 'test_elicitation_sep1034_defaults',
  description:
    'Asks the user with a default for every primitive type (conformance scenario elicitation-sep1034-defaults).',
  input: {},
  handler: (_args, ctx) =>
    askUser(ctx, 'Elicitation completed', {
      message: 'Please review and update the form fields with defaults',
      requestedSchema: {
        type: 'object',
        properties: {
          name: { type: 'string', description: 'User name', default: 'John Doe' },
          age: { type: 'integer', description: 'User age', default: 30 },
          score: { type: 'number', description: 'User score', default: 95.5 },
          status: {
            type: 'string',
            description: 'User status',
            enum: ['active', 'inactive', 'pending'],
            default: 'active',
          },
          verified: { type: 'boolean', description: 'Verification status', default: true },
        },
      },
    }),
});

const elicitationEnums = defineTool({
  name: 'test_elicitation_sep1330_enums',
  description: 'Asks the user with all five enum forms (conformance scenario elicitation-sep1330-enums).',
  input: {},
  handler: (_args, ctx) =>
    askUser(ctx, 'Elicitation completed', {
      message: 'Please select options from the enum fields',
      requestedSchema: {
        type: 'object',
        properties: {
          untitledSingle: {
            type: 'string',
            description: 'Untitled single-select',
            enum: ['option1', 'option2', 'option3'],
          },
          titledSingle: {
            type: 'string',
            description: 'Titled single-select',
            oneOf: [
              { const: 'value1', title: 'First Option' },
              { const: 'value2', title: 'Second Option' },
              { const: 'value3', title: 'Third Option' },
            ],
          },
          legacyEnum: {
            type: 'string',
            description: 'Legacy titled enum (deprecated enumNames)',
            enum: ['opt1', 'opt2', 'opt3'],
            enumNames: ['Option One', 'Option Two', 'Option Three'],
          },
          untitledMulti: {
            type: 'array',
            description: 'Untitled multi-select',
            items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
          },
          titledMulti: {
            type: 'array',
            description: 'Titled multi-select',
            items: {
              anyOf: [
                { const: 'value1', title: 'First Choice' },
                { const: 'value2', title: 'Second Choice' },
                { const: 'value3', title: 'Third Choice' },
              ],
            },
          },
        },
      },
    }),
});

// Registered by id, so the published schema carries it once under `$defs` and points at it with `$ref`.
const address = z
  .object({ street: z.string().optional(), city: z.string().optional() })
  .meta({ id: 'address' });

const jsonSchema2020 = defineTool({
  name: 'json_schema_2020_12_tool',
  description:
    'Tool with JSON Schema 2020-12 features: $schema, $defs and additionalProperties (pending conformance scenario json-schema-2020-12).',
  input: { name: z.string().optional(), address: address.optional() },
  handler: (args) => ok({ received: args }),
});

/** Elicits through core (which refuses at once when the client or transport cannot) and reports the answer. */
async function askUser(ctx: ToolContext, label: string, params: ElicitRequestFormParams) {
  const answer = await ctx.server.elicit(params);
  const content = answer.content ?? {};
  return ok(
    { action: answer.action, answer: content },
    {
      content: [
        { type: 'text', text: `${label}: action=${answer.action}, content=${JSON.stringify(content)}` },
      ],
    },
  );
}

/** Every reference tool, in the order the suite's scenarios list them. */
export function referenceTools(): ToolDefinition[] {
  return [
    simpleText,
    imageContent,
    audioContent,
    embeddedResource,
    multipleContentTypes,
    withLogging,
    errorHandling,
    withProgress,
    sampling,
    elicitation,
    elicitationDefaults,
    elicitationEnums,
    jsonSchema2020,
  ] as ToolDefinition[];
}
