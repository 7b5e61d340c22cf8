// Round 26 of the secret patterns, each through a real tools/call: a YAML block scalar under a secret
// key (a k8s manifest in an upstream error), webhook URLs whose path is the secret, an env-style `_PWD`
// key, and a password fed to `sudo -S`, in a real child process's `Command failed: ...`. The boundary's
// redaction (core alone) must leave no `hunter2` for the model.
import { execSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { defineTool, fail, REDACTED } from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';
import { upstreamFailure } from './fixtures/upstream-failure.js';

const R = REDACTED;
let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

/** A tool that fails with `message`, and `meta` under `_meta['acme/upstream']`. */
const failing = (message: string, meta: Record<string, unknown>) =>
  upstreamFailure('apply_manifest', 'Applies a manifest.', message, meta);

describe('secrets core’s patterns now read, through a real tools/call', () => {
  it('a k8s Secret in an apply error: the block scalars under secret keys go, their indicators and the rest stay', async () => {
    const manifest =
      'apiVersion: v1\nkind: Secret\nstringData:\n  password: |\n    hunter2\n    hunter2-line-2\n' +
      '  token: >-\n    hunter2-token\n  username: app\n';
    client = await serveTools([failing(`apply failed:\n${manifest}`, { manifest })]);
    const result = await client.callTool('apply_manifest', {});
    const envelope = expectFailure(result);
    const redacted = `apiVersion: v1\nkind: Secret\nstringData:\n  password: |\n    ${R}\n  token: >-\n    ${R}\n  username: app\n`;
    expect(envelope.message).toBe(`apply failed:\n${redacted}`);
    expect(result._meta?.['acme/upstream']).toEqual({ manifest: redacted });
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });

  it('webhook URLs in a notifier’s failure: the secret part of the path goes, scheme, host and ids stay', async () => {
    const urls = {
      slack: 'https://hooks.slack.com/services/T0AB12CD/B0EF34GH/hunter2Xy9aBcDeFgHiJk',
      discord: 'https://discord.com/api/webhooks/1234567890/hunter2-AbC_x9',
      teams: 'https://acme.webhook.office.com/webhookb2/0a1b@2c3d/IncomingWebhook/hunter2/5f6a',
    };
    client = await serveTools([failing(`POST ${urls.slack} failed: 404 no_service`, urls)]);
    const result = await client.callTool('apply_manifest', {});
    const envelope = expectFailure(result);
    expect(envelope.message).toBe(
      `POST https://hooks.slack.com/services/T0AB12CD/B0EF34GH/${R} failed: 404 no_service`,
    );
    expect(result._meta?.['acme/upstream']).toEqual({
      slack: `https://hooks.slack.com/services/T0AB12CD/B0EF34GH/${R}`,
      discord: `https://discord.com/api/webhooks/1234567890/${R}`,
      teams: `https://acme.webhook.office.com/webhookb2/${R}`,
    });
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });

  it('Node’s Command failed for a real child process: MYSQL_PWD and the password piped to sudo -S go', async () => {
    // `sudo` is a shell function here: the command line is what Node prints, no real sudo runs.
    const command = 'sudo() { return 3; }; echo hunter2 | sudo -S id && MYSQL_PWD=hunter2 PWD=/tmp mysql';
    const tool = defineTool({
      name: 'run_script',
      description: 'Runs a script.',
      input: {},
      handler: () => {
        try {
          execSync(command, { stdio: 'pipe' });
          return fail('internal', 'unexpected success');
        } catch (error) {
          return fail('unavailable', (error as Error).message);
        }
      },
    });
    client = await serveTools([tool]);
    const result = await client.callTool('run_script', {});
    const envelope = expectFailure(result);
    expect(envelope.message.split('\n')[0]).toBe(
      `Command failed: sudo() { return 3; }; echo ${R} | sudo -S id && MYSQL_PWD=${R} PWD=/tmp mysql`,
    );
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });
});
