// Drives the console's tokens, consent and admin pages in headless
// Chromium, with the TypeScript MCP SDK as the client a user connects:
// a token created in the console, its configuration copied and used by a
// real MCP client, then revoked there and the client refused; the OAuth
// consent page approved and denied for a headless MCP client; the admin
// pages for an admin, and a 403 page for a member. For
// internal/console/browser_test.go. Environment as lib.mjs, plus
// BERTH_TS_SDK (the SDK's dist/esm directory). alice is berth's first
// user (an admin), bob a member.
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { base, run } from "./lib.mjs";

const load = (p) => import(pathToFileURL(join(process.env.BERTH_TS_SDK, p)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { UnauthorizedError } = await load("client/auth.js");
const mcpURL = new URL(base + "/mcp");

// connect lists tools with a configuration's URL and headers, as the
// client the configuration is for would.
async function listTools(url, headers) {
  const client = new Client({ name: "console-config", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  const tools = await client.listTools();
  await client.close();
  return tools.tools.map((x) => x.name);
}

await run(async (t) => {
  const { browser, step, check, shot, audit, signIn } = t;
  let page;
  const newPage = async (ctx) => { page = await t.newPage(ctx); t.page = page; return page; };

  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base });
  await newPage(context);

  step("tokens page, empty");
  await signIn("alice", "/tokens");
  await page.getByRole("heading", { name: "Tokens", exact: true }).waitFor();
  check(await page.getByRole("link", { name: "Install in VS Code" }).getAttribute("href").then((h) => h.startsWith("vscode:mcp/install?")), "no VS Code install link");
  await audit("tokens");
  await shot("tokens");

  step("create a token");
  await page.getByLabel("Name").fill("laptop-cursor");
  await page.getByLabel("Expires in").selectOption({ label: "7 days" });
  await page.getByRole("button", { name: "Create token" }).click();
  const secret = (await page.locator("#token-secret").textContent()).trim();
  check(secret.startsWith("berth_"), "no secret shown: " + secret);
  await audit("token-created");
  await shot("token-created");

  step("copy the Cursor configuration and connect with it");
  await page.locator("#cfg-cursor + button").click();
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  check(copied === (await page.locator("#cfg-cursor").textContent()), "the copy button copied something else: " + copied);
  const cfg = JSON.parse(copied).mcpServers.berth;
  const tools = await listTools(cfg.url, cfg.headers);
  check(tools.includes("bash") && tools.includes("start_server"), "tools with the console's token: " + tools);

  step("the list shows it used, never its secret");
  await page.goto(base + "/tokens");
  const row = page.locator("#token-list tr", { hasText: "laptop-cursor" });
  await row.waitFor();
  check(!(await page.content()).includes(secret), "the list shows the secret");
  check(!(await row.locator("td[data-label='Last used']").textContent()).includes("never"), "last use not recorded");

  step("revoke it and see the client refused");
  await row.getByRole("button", { name: /Revoke/ }).click();
  await page.getByText("Token revoked").waitFor();
  let refused = false;
  try { await listTools(cfg.url, cfg.headers); } catch (e) { refused = /401|nauthorized|revoked/.test(String(e)); }
  check(refused, "the revoked token still connects");
  await shot("token-revoked");

  step("admin pages, as an admin");
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Admin" }).click();
  await page.getByRole("heading", { name: "Users" }).waitFor();
  await audit("admin");
  await shot("admin");
  await page.getByRole("link", { name: "Audit log" }).click();
  await page.getByLabel("Action").fill("token.revoke");
  await page.getByRole("button", { name: "Search" }).click();
  await page.locator("#audit-list td", { hasText: "token.revoke" }).first().waitFor();
  await audit("admin-audit");
  await shot("admin-audit");

  step("a member gets a 403 page on the admin pages");
  const bobContext = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await newPage(bobContext);
  await signIn("bob", "/tokens");
  await page.getByRole("heading", { name: "Tokens", exact: true }).waitFor();
  check((await page.getByRole("link", { name: "Admin" }).count()) === 0, "a member's navigation shows Admin");
  const forbidden = await page.goto(base + "/admin");
  check(forbidden.status() === 403, "member on /admin: " + forbidden.status());
  await page.getByRole("heading", { name: "Not allowed" }).waitFor();
  await audit("admin-forbidden");
  await shot("admin-forbidden");

  // A headless MCP client asks bob, signed in in this browser, to approve
  // it; the browser follows the authorization URL and answers.
  async function oauthClient(decision, port) {
    const redirectUrl = `http://127.0.0.1:${port}/callback`;
    let info, tokens, verifier, authURL;
    const provider = {
      get redirectUrl() { return redirectUrl; },
      get clientMetadata() {
        return { client_name: `Console test (${decision})`, redirect_uris: [redirectUrl], token_endpoint_auth_method: "none",
          grant_types: ["authorization_code", "refresh_token"], response_types: ["code"] };
      },
      clientInformation() { return info; },
      saveClientInformation(i) { info = i; },
      tokens() { return tokens; },
      saveTokens(x) { tokens = x; },
      saveCodeVerifier(v) { verifier = v; },
      codeVerifier() { return verifier; },
      redirectToAuthorization(u) { authURL = u; },
    };
    const transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
    try {
      await new Client({ name: "console-oauth", version: "1.0.0" }).connect(transport);
      throw new Error("connected without authorization");
    } catch (e) { if (!(e instanceof UnauthorizedError)) throw e; }
    check(authURL, "the client was not sent to authorize");
    // The redirect goes to the client's loopback listener, which the
    // browser here is not: catch it on the way.
    let answer;
    await page.route(`${redirectUrl}**`, (route) => { answer = new URL(route.request().url()); route.fulfill({ body: "done" }); });
    await page.goto(authURL.href);
    await page.getByRole("heading", { name: /Console test/ }).or(page.getByText(/Console test/).first()).waitFor();
    await audit("consent");
    await shot("consent");
    await page.getByRole("button", { name: decision === "approve" ? "Approve" : "Deny" }).click();
    await page.waitForURL(`${redirectUrl}**`);
    return { answer, transport, provider, tokens: () => tokens };
  }

  step("approve a headless MCP client on the consent page");
  const ok = await oauthClient("approve", 33461);
  const code = ok.answer.searchParams.get("code");
  check(code, "no code after approving: " + ok.answer);
  await ok.transport.finishAuth(code);
  const client = new Client({ name: "console-oauth", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(mcpURL, { authProvider: ok.provider }));
  const listed = await client.listTools();
  check(listed.tools.length > 0, "the approved client lists no tools");
  await client.close();

  step("deny another one");
  const no = await oauthClient("deny", 33462);
  check(no.answer.searchParams.get("error") === "access_denied", "denying answered " + no.answer);
  check(!no.tokens(), "the denied client got tokens");
});
