// What the trivial-tool HTTP scripts share: starting `benchmarks/http-trivial-servers.ts` in a child
// process of its own, and loading one of its servers with autocannon.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { distinctEchoRequest, MCP_POST_HEADERS } from './mcp-http.js';

export type TrivialServer = 'bare' | 'toolgate' | 'fastmcp';

/**
 * Starts the trivial-tool servers (`sdk`: with a real OTel SDK) in a child process; `nodeArgs` go
 * before the script (`--cpu-prof`...), `env` is added to this process's environment.
 */
export async function startTrivialServers(
  mode: 'none' | 'sdk',
  options: { nodeArgs?: readonly string[]; env?: Record<string, string> } = {},
): Promise<{ child: ChildProcess; urls: Record<TrivialServer, string> }> {
  const script = fileURLToPath(new URL('../benchmarks/http-trivial-servers.ts', import.meta.url));
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), '--import', 'tsx', script, mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...options.env },
  });
  const line = await new Promise<string>((resolveLine, rejectLine) => {
    createInterface({ input: child.stdout! }).on('line', (text) => {
      if (text.startsWith('{')) resolveLine(text);
    });
    child.once('exit', (code) => rejectLine(new Error(`trivial bench servers exited with ${code}`)));
  });
  return { child, urls: JSON.parse(line) as Record<TrivialServer, string> };
}

/** autocannon's `echo` load (distinct arguments per request) against `url`; its result. */
export function echoLoad(
  url: string,
  seconds: number,
  onResponse?: (status: number, body: string) => void,
  connections = 32,
): Promise<autocannon.Result> {
  return autocannon({
    url,
    connections,
    duration: seconds,
    method: 'POST',
    headers: { ...MCP_POST_HEADERS },
    requests: [onResponse ? { ...distinctEchoRequest(), onResponse } : distinctEchoRequest()],
  });
}
