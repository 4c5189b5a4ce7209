// Step-up authorization with the official TypeScript MCP SDK client. The
// client first holds a token for berth:read berth:exec only (the user
// granted less than asked: the browser narrows the first request). Calling
// register_client then gets a 403 insufficient_scope challenge; the SDK
// authorizes again with exactly the challenge's scopes, and the script
// retries. The new token must still allow bash: a challenge naming only
// the missing scope would trade berth:exec for berth:write, and bash would
// need a third authorization, which the script reports as a failure.
// The client registers without refresh tokens, so the SDK's step-up goes
// to the authorization endpoint (with a refresh token it refreshes with
// the old scopes instead). Prints one JSON summary line; any failure exits
// non-zero with the reason on stderr.
//
// Environment: BERTH_MCP_URL, BERTH_USER, BERTH_TS_SDK (the SDK's
// dist/esm directory).
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { newBrowser } from "./browser.mjs";

const sdk = process.env.BERTH_TS_SDK;
const mcpUrl = new URL(process.env.BERTH_MCP_URL);
const load = (p) => import(pathToFileURL(join(sdk, p)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { UnauthorizedError } = await load("client/auth.js");

const redirectUrl = "http://127.0.0.1:33419/callback";
const authorize = newBrowser(mcpUrl.origin, process.env.BERTH_USER);
let clientInfo, tokens, verifier, code;
const requested = []; // the scope of each authorization request the SDK made

const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return {
      client_name: "TypeScript SDK step-up", redirect_uris: [redirectUrl], token_endpoint_auth_method: "none",
      grant_types: ["authorization_code"], response_types: ["code"],
    };
  },
  clientInformation() { return clientInfo; },
  saveClientInformation(info) { clientInfo = info; },
  tokens() { return tokens; },
  saveTokens(t) { tokens = t; },
  saveCodeVerifier(v) { verifier = v; },
  codeVerifier() { return verifier; },
  async redirectToAuthorization(authUrl) {
    requested.push(authUrl.searchParams.get("scope") ?? "");
    if (requested.length === 1) authUrl.searchParams.set("scope", "berth:read berth:exec");
    code = await authorize(authUrl);
  },
};

// The first connection only leads to the first authorization.
const t1 = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
try {
  await new Client({ name: "ts-stepup-interop", version: "1.0.0" }).connect(t1);
  throw new Error("connected without authorization");
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
}
if (!code) throw new Error("no authorization code came back");
await t1.finishAuth(code);
code = undefined;

const transport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
const client = new Client({ name: "ts-stepup-interop", version: "1.0.0" });

// withAuth runs fn; when the SDK had to send the user to authorize, it
// finishes that authorization and runs fn once more.
async function withAuth(what, fn) {
  try {
    return await fn();
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
    if (!code) throw new Error(`${what}: authorization gave no code`);
    await transport.finishAuth(code);
    code = undefined;
    return await fn();
  }
}

async function callTool(name, args) {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) throw new Error(`${name}: tool error: ${(res.content ?? []).map((c) => c.text ?? "").join("\n")}`);
  return res.structuredContent;
}

try {
  await client.connect(transport);
  const first = tokens.scope;
  const registered = await withAuth("register_client", () => callTool("register_client", { request: { name: "ts-stepup" } }));
  const stepped = tokens.scope;
  const authorizations = requested.length;
  const start = await callTool("start_server", { request: { client_id: registered.id, image_tag: "base", wait_seconds: 120 } });
  const serverId = JSON.parse(start.result).server_id;
  let bash;
  try {
    bash = await callTool("bash", { server_id: serverId, command: "echo stepped up" });
  } catch (e) {
    throw new Error(`bash after the step-up (token scope "${tokens.scope}", authorization requests ${JSON.stringify(requested)}): ${e}`);
  }
  await callTool("stop_client", { request: { client_id: registered.id } });
  console.log(JSON.stringify({
    first_scope: first, stepped_scope: stepped, requested, authorizations, bash_stdout: bash.stdout,
  }));
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exitCode = 1;
} finally {
  await client.close().catch(() => {});
}
