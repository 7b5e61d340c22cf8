// The README's URL-mode page, typechecked with the package (README shows '@toolgate/confirm' where this
// file imports '../src/index.js'; test/readme.test.ts keeps the two identical).
import { createServer, type IncomingMessage } from 'node:http';
import { createConfirm } from '../src/index.js';

// Yours: who signed in on this request (a session cookie your login set), and a CSRF check for forms.
declare function signedIn(request: IncomingMessage): Promise<string | undefined>;
declare function checkCsrf(request: IncomingMessage, form: URLSearchParams): boolean;
declare const secret: string;

const confirm = createConfirm({
  secret,
  tools: { request_refund: {} },
  url: { build: ({ id }) => `https://orders.example.com/confirm/${id}` },
});

const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`).replaceAll('\n', '<br>');

createServer(async (request, response) => {
  // Never inside another page's frame (a client that shows it framed could trick a click onto
  // Approve), never cached, and nothing loaded or posted anywhere else.
  response.setHeader(
    'content-security-policy',
    "default-src 'none'; form-action 'self'; frame-ancestors 'none'",
  );
  response.setHeader('x-frame-options', 'DENY');
  response.setHeader('cache-control', 'no-store');
  const id = new URL(request.url ?? '/', 'https://orders.example.com').pathname.split('/')[2] ?? '';
  const person = await signedIn(request);
  if (person === undefined) return void response.writeHead(302, { location: '/login' }).end();
  if (request.method === 'GET') {
    const call = await confirm.pending(id, person);
    if (!call) return void response.writeHead(404).end('No such confirmation.');
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    return void response.end(
      `<p>${escapeHtml(call.prompt)}</p><form method="post"><button name="approve" value="yes">Approve</button>` +
        '<button name="approve" value="no">Decline</button></form>',
    );
  }
  let body = '';
  for await (const chunk of request) body += chunk;
  const form = new URLSearchParams(body);
  if (!checkCsrf(request, form)) return void response.writeHead(403).end();
  const outcome = await confirm.answer(id, { approve: form.get('approve') === 'yes', principal: person });
  response.end(outcome === 'recorded' ? 'Done: go back to your assistant.' : `Not recorded (${outcome}).`);
}).listen(8443);
