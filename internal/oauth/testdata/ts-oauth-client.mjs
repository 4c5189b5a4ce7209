// Connects the official TypeScript MCP SDK client to berth's /mcp knowing
// only its URL, the way an editor does on "connect": the 401 leads it to
// the protected resource metadata, the authorization server metadata,
// dynamic client registration and an authorization code flow with PKCE.
// redirectToAuthorization plays the browser with fetch: it signs in with
// the development login and approves the consent page. Then tools/list,
// and a refresh forced by a rejected access token. Prints one JSON summary
// line; any failure exits non-zero with the reason on stderr.
//
// Environment: BERTH_MCP_URL, BERTH_USER, BERTH_TS_SDK (the SDK's
// dist/esm directory).
import { join } from "node:path";
import { pathToFileURL } from "node:url";

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

const cookies = new Map();
function keepCookies(res) {
  for (const c of res.headers.getSetCookie()) {
    const [pair] = c.split(";");
    const i = pair.indexOf("=");
    const name = pair.slice(0, i), value = pair.slice(i + 1);
    if (value === "" || /max-age=(0|-1)\b/i.test(c)) cookies.delete(name);
    else cookies.set(name, value);
  }
}
async function visit(url, init = {}) {
  const headers = { ...(init.headers ?? {}), cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") };
  const res = await fetch(url, { ...init, headers, redirect: "manual" });
  keepCookies(res);
  return res;
}
const entities = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };
const unescapeHTML = (s) => s.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (m, e) =>
  e[0] !== "#" ? (entities[e.toLowerCase()] ?? m) : String.fromCodePoint(e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10)));
function hiddenFields(html) {
  const f = new URLSearchParams();
  for (const m of html.matchAll(/<input type="hidden" name="([a-z_]+)" value="([^"]*)">/g)) f.set(m[1], unescapeHTML(m[2]));
  return f;
}

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
  async redirectToAuthorization(authUrl) {
    let next = authUrl.toString();
    let init = {};
    for (let step = 0; step < 10; step++) {
      const res = await visit(next, init);
      init = {};
      if (res.status >= 300 && res.status < 400) {
        const loc = new URL(res.headers.get("location"), next);
        if (loc.origin !== mcpUrl.origin) {
          const q = loc.searchParams;
          if (q.get("error")) throw new Error(`authorization error ${q.get("error")}: ${q.get("error_description")}`);
          if (q.get("iss") !== mcpUrl.origin) throw new Error(`iss ${q.get("iss")}, want ${mcpUrl.origin}`);
          code = q.get("code");
          return;
        }
        next = loc.toString();
        continue;
      }
      const html = await res.text();
      if (res.status !== 200) throw new Error(`authorization page ${res.status}: ${html}`);
      const form = hiddenFields(html);
      if (html.includes('action="/oauth/login"')) {
        form.set("username", user);
        next = mcpUrl.origin + "/oauth/login";
      } else if (html.includes('action="/oauth/authorize"')) {
        form.set("decision", "approve");
        next = mcpUrl.origin + "/oauth/authorize";
      } else {
        throw new Error(`unexpected page: ${html}`);
      }
      init = { method: "POST", body: form };
    }
    throw new Error("too many steps in the authorization");
  },
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
