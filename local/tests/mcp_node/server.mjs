// A real MCP server on the official TypeScript SDK for the MCP transport, elicitation and
// OAuth tests (local/tests/e2e_mcp_node.rs, remote-agent/tests/mcp_node.rs).
//
//   node server.mjs --transport stdio|sse|http [--oauth] [--token-ttl SECONDS] [--port-file F]
//
// Tools: `echo {text}`; `ask_name` (asks the client for a name through a form elicitation and
// says what came back); `pick_target` (the same with a field that has a default); `whoami` (the OAuth client the bearer token was issued to).
// HTTP modes listen on 127.0.0.1 (random port) and print one line `LISTENING <url>` (and
// `AUTH <issuer>` with --oauth) on stdout; with --port-file the lines also go to that file.
// `GET /evil-sse` is an SSE stream announcing an endpoint on another origin.
// With --oauth the MCP routes need a bearer token from the SDK's authorization server pieces
// (metadata, dynamic registration, authorize + PKCE, token with refresh), run on a second
// port; the /authorize step signs in at once (no login page) and redirects back.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import express from 'express';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { mcpAuthRouter, mcpAuthMetadataRouter, createOAuthMetadata, getOAuthProtectedResourceMetadataUrl } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { InvalidTokenError, InvalidGrantError } from '@modelcontextprotocol/sdk/server/auth/errors.js';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : dflt;
};
const transportKind = arg('--transport', 'stdio');
const useOAuth = process.argv.includes('--oauth');
const tokenTtl = Number(arg('--token-ttl', '3600'));
const portFile = arg('--port-file', null);

function announce(line) {
  console.log(line);
  if (portFile) fs.appendFileSync(portFile, line + '\n');
}

function makeServer() {
  const server = new McpServer({ name: 'reasonix-node-fixture', version: '1.0.0' });
  server.tool('echo', 'Echo the text back', { text: z.string() }, async ({ text }) => ({
    content: [{ type: 'text', text: `echo: ${text}` }],
  }));
  server.tool('ask_name', 'Ask the user for a name', {}, async (_args, extra) => {
    let result;
    try {
      result = await server.server.elicitInput(
        {
          mode: 'form',
          message: 'Which name should the fixture greet?',
          requestedSchema: {
            type: 'object',
            properties: { name: { type: 'string', title: 'Name', description: 'Who to greet' } },
            required: ['name'],
          },
        },
        { relatedRequestId: extra.requestId },
      );
    } catch (e) {
      return { content: [{ type: 'text', text: `elicitation failed: ${e.message}` }], isError: true };
    }
    const content = result.content ? JSON.stringify(result.content) : '';
    return { content: [{ type: 'text', text: `elicitation ${result.action} ${content}`.trim() }] };
  });
  server.tool('pick_target', 'Ask the user where to deploy (a form whose field has a default)', {}, async (_args, extra) => {
    const result = await server.server.elicitInput(
      {
        mode: 'form',
        message: 'Where should the fixture deploy?',
        requestedSchema: {
          type: 'object',
          properties: { target: { type: 'string', title: 'Target', default: 'staging-7' } },
          required: ['target'],
        },
      },
      { relatedRequestId: extra.requestId },
    );
    const content = result.content ? JSON.stringify(result.content) : '';
    return { content: [{ type: 'text', text: `elicitation ${result.action} ${content}`.trim() }] };
  });
  server.tool('whoami', 'The OAuth client of the bearer token', {}, async (_args, extra) => ({
    content: [{ type: 'text', text: `client ${extra.authInfo?.clientId ?? 'none'}` }],
  }));
  return server;
}

if (transportKind === 'stdio') {
  await makeServer().connect(new StdioServerTransport());
} else {
  const app = express();
  app.use(express.json());
  const listener = app.listen(0, '127.0.0.1');
  await new Promise((r) => listener.once('listening', r));
  const base = `http://127.0.0.1:${listener.address().port}`;
  let auth = (_req, _res, next) => next();
  if (useOAuth) auth = await setupOAuth(app, base);

  if (transportKind === 'sse') {
    const sessions = {};
    app.get('/sse', auth, async (_req, res) => {
      const t = new SSEServerTransport('/messages', res);
      sessions[t.sessionId] = t;
      res.on('close', () => delete sessions[t.sessionId]);
      await makeServer().connect(t);
    });
    app.post('/messages', auth, async (req, res) => {
      const t = sessions[req.query.sessionId];
      if (!t) return res.status(404).send('no such session');
      await t.handlePostMessage(req, res, req.body);
    });
    app.get('/evil-sse', (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write(`event: endpoint\ndata: http://127.0.0.2:${listener.address().port}/messages\n\n`);
    });
    announce(`LISTENING ${base}/sse`);
  } else {
    const transports = {};
    app.post('/mcp', auth, async (req, res) => {
      const sid = req.headers['mcp-session-id'];
      let t = sid ? transports[sid] : undefined;
      if (!t) {
        if (!isInitializeRequest(req.body)) {
          return res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'no session' }, id: null });
        }
        t = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => { transports[id] = t; },
        });
        await makeServer().connect(t);
      }
      await t.handleRequest(req, res, req.body);
    });
    announce(`LISTENING ${base}/mcp`);
  }
}

// The SDK's authorization server pieces with an in-memory provider that issues short-lived
// tokens and honours refresh tokens; the resource server checks tokens in-process.
async function setupOAuth(app, base) {
  const clients = new Map();
  const codes = new Map();
  const tokens = new Map();
  const refreshes = new Map();
  const issue = (clientId, scopes, resource) => {
    const access = randomUUID();
    const refresh = randomUUID();
    tokens.set(access, { clientId, scopes, resource, expiresAt: Date.now() + tokenTtl * 1000 });
    refreshes.set(refresh, { clientId, scopes, resource });
    return { access_token: access, token_type: 'bearer', expires_in: tokenTtl, refresh_token: refresh, scope: scopes.join(' ') };
  };
  const provider = {
    clientsStore: {
      getClient: async (id) => clients.get(id),
      registerClient: async (c) => { clients.set(c.client_id, c); return c; },
    },
    async authorize(client, params, res) {
      if (!client.redirect_uris.includes(params.redirectUri)) throw new Error('unregistered redirect_uri');
      const code = randomUUID();
      codes.set(code, { client, params });
      const target = new URL(params.redirectUri);
      target.searchParams.set('code', code);
      if (params.state !== undefined) target.searchParams.set('state', params.state);
      res.redirect(target.toString());
    },
    async challengeForAuthorizationCode(_client, code) {
      const c = codes.get(code);
      if (!c) throw new InvalidGrantError('unknown code');
      return c.params.codeChallenge;
    },
    async exchangeAuthorizationCode(client, code) {
      const c = codes.get(code);
      if (!c || c.client.client_id !== client.client_id) throw new InvalidGrantError('bad code');
      codes.delete(code);
      return issue(client.client_id, c.params.scopes || [], c.params.resource?.href);
    },
    async exchangeRefreshToken(client, refresh) {
      const r = refreshes.get(refresh);
      if (!r || r.clientId !== client.client_id) throw new InvalidGrantError('bad refresh token');
      refreshes.delete(refresh);
      announce(`REFRESHED ${client.client_id}`);
      return issue(client.client_id, r.scopes, r.resource);
    },
    async verifyAccessToken(token) {
      const t = tokens.get(token);
      if (!t || t.expiresAt < Date.now()) throw new InvalidTokenError('invalid or expired token');
      return { token, clientId: t.clientId, scopes: t.scopes, expiresAt: Math.floor(t.expiresAt / 1000), resource: t.resource ? new URL(t.resource) : undefined };
    },
  };
  const authApp = express();
  const authListener = authApp.listen(0, '127.0.0.1');
  await new Promise((r) => authListener.once('listening', r));
  const issuer = new URL(`http://127.0.0.1:${authListener.address().port}`);
  authApp.use(mcpAuthRouter({ provider, issuerUrl: issuer, scopesSupported: ['mcp:tools'] }));
  const metadata = createOAuthMetadata({ provider, issuerUrl: issuer, scopesSupported: ['mcp:tools'] });
  const resource = new URL(transportKind === 'sse' ? `${base}/sse` : `${base}/mcp`);
  app.use(mcpAuthMetadataRouter({ oauthMetadata: metadata, resourceServerUrl: resource, scopesSupported: ['mcp:tools'] }));
  announce(`AUTH ${issuer.href}`);
  return requireBearerAuth({ verifier: provider, resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(resource) });
}
