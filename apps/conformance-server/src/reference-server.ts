import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { type Logger, registerTools, type ToolDefinition, type ToolMiddleware } from '@toolgate/core';
import * as z from 'zod';
import { RED_PIXEL_PNG } from './media.js';

export const SERVER_INFO = { name: 'toolgate-conformance-server', version: '0.0.0' };

export interface ReferenceServerOptions {
  tools: readonly ToolDefinition[];
  middleware: readonly ToolMiddleware[];
  logger: Logger;
}

/**
 * One McpServer (one per session): the reference tools through toolgate's chain, and the suite's
 * resources, prompts and completions registered directly on the SDK (toolgate governs tools only).
 */
export function createReferenceServer(options: ReferenceServerOptions): McpServer {
  const server = new McpServer(SERVER_INFO);
  registerTools(server, options.tools, { middleware: options.middleware, logger: options.logger });
  registerResources(server);
  registerPrompts(server);
  return server;
}

function registerResources(server: McpServer): void {
  server.registerResource(
    'static-text',
    'test://static-text',
    { title: 'Static text', description: 'A fixed text resource.', mimeType: 'text/plain' },
    (uri) => ({
      contents: [
        { uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' },
      ],
    }),
  );
  server.registerResource(
    'static-binary',
    'test://static-binary',
    { title: 'Static binary', description: 'A 1x1 PNG image.', mimeType: 'image/png' },
    (uri) => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: RED_PIXEL_PNG }] }),
  );
  server.registerResource(
    'watched-resource',
    'test://watched-resource',
    {
      title: 'Watched resource',
      description: 'A resource clients may subscribe to.',
      mimeType: 'text/plain',
    },
    (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'Watched resource content.' }] }),
  );
  server.registerResource(
    'template-data',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { title: 'Data by id', description: 'JSON data for the id in the URI.', mimeType: 'application/json' },
    (uri, { id }) => {
      const value = Array.isArray(id) ? id.join(',') : String(id);
      return {
        contents: [
          {
            uri: uri.href,
            mimeType: 'application/json',
            text: JSON.stringify({ id: value, templateTest: true, data: `Data for ID: ${value}` }),
          },
        ],
      };
    },
  );
  // McpServer has no subscription API: the low-level handlers keep this session's subscriptions. The
  // resources never change, so no notifications/resources/updated is ever due.
  const subscribed = new Set<string>();
  server.server.registerCapabilities({ resources: { subscribe: true } });
  server.server.setRequestHandler(SubscribeRequestSchema, (request) => {
    subscribed.add(request.params.uri);
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, (request) => {
    subscribed.delete(request.params.uri);
    return {};
  });
}

function registerPrompts(server: McpServer): void {
  server.registerPrompt(
    'test_simple_prompt',
    { title: 'Simple prompt', description: 'A prompt without arguments.' },
    () => ({
      messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      title: 'Prompt with arguments',
      description: 'A prompt that repeats its two arguments; arg1 completes.',
      argsSchema: {
        arg1: completable(z.string().describe('First test argument'), (value) =>
          ['paris', 'park', 'party'].filter((word) => word.startsWith(value)),
        ),
        arg2: z.string().describe('Second test argument'),
      },
    },
    ({ arg1, arg2 }) => ({
      messages: [
        {
          role: 'user',
          content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` },
        },
      ],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    {
      title: 'Prompt with an embedded resource',
      description: 'A prompt that embeds the resource named by its argument.',
      argsSchema: { resourceUri: z.string().describe('URI of the resource to embed') },
    },
    ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: {
              uri: resourceUri,
              mimeType: 'text/plain',
              text: 'Embedded resource content for testing.',
            },
          },
        },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
      ],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_image',
    { title: 'Prompt with an image', description: 'A prompt that carries a 1x1 PNG image.' },
    () => ({
      messages: [
        { role: 'user', content: { type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' } },
        { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
      ],
    }),
  );
}
