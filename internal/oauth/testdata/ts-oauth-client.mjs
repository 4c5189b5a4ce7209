// Connects the official TypeScript MCP SDK client to berth's /mcp knowing
// only its URL, the way an editor does on "connect": the 401 leads it to
// the protected resource metadata, the authorization server metadata,
// dynamic client registration and an authorization code flow with PKCE.
// redirectToAuthorization plays the browser (browser.mjs): it signs in
// with the development login and approves the consent page. Then tools/list,
// and a refresh forced by a rejected access token. Prints one JSON summary
// line; any failure exits non-zero with the reason on stderr.
//
// Environment: BERTH_MCP_URL, BERTH_USER, BERTH_TS_SDK (the SDK's
// dist/esm directory).
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { newBrowser } from "./browser.mjs";

const sdk = process.env.BERTH_TS_SDK;
const mcpUrl = new URL(process.env.BERTH_MCP_URL);
const user = process.env.BERTH_USER;
const load = (p) => import(pathToFileURL(join(sdk, p)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { UnauthorizedError } = await load("client/auth.js");

const redirectUrl = "http://127.0.0.1:33418/callback";
let clientInfo, tokens, verifier, code;
let refreshes = 0;

const authorize = newBrowser(mcpUrl.origin, user);

const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return {
      client_name: "TypeScript SDK interop", redirect_uris: [redirectUrl], token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"], response_types: ["code"],
    };
  },
  clientInformation() { return clientInfo; },
  saveClientInformation(info) { clientInfo = info; },
  tokens() { return tokens; },
  saveTokens(t) { if (tokens) refreshes++; tokens = t; },
  saveCodeVerifier(v) { verifier = v; },
  codeVerifier() { return verifier; },
  async redirectToAuthorization(authUrl) { code = await authorize(authUrl); },
};

const first = new Client({ name: "ts-oauth-interop", version: "1.0.0" });
const t1 = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
try {
  await first.connect(t1);
  throw new Error("connected without authorization");
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
}
if (!code) throw new Error("no authorization code came back");
await t1.finishAuth(code);

const client = new Client({ name: "ts-oauth-interop", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
const listed = await client.listTools();
// A rejected access token makes the SDK refresh and retry.
const oldRefresh = tokens.refresh_token;
tokens = { ...tokens, access_token: "berth_at_" + "A".repeat(43) };
const again = await client.listTools();
await client.close();
console.log(JSON.stringify({
  client_id: clientInfo?.client_id ?? "",
  tools: listed.tools.length,
  tools_after_refresh: again.tools.length,
  refreshes,
  rotated: tokens.refresh_token !== oldRefresh,
  scope: tokens.scope ?? "",
}));
