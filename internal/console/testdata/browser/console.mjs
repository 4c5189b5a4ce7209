// Drives berth's web console in headless Chromium as a person would, for
// internal/console/browser_test.go, which starts a real `berth serve` and
// passes BERTH_URL, BERTH_TOKEN (a session token of the user alice, for
// changes made "from another path"), CHROMIUM and ARTIFACTS (where the
// screenshots go). Each step prints one line; the first failure saves a
// screenshot of the page it happened on and exits non-zero.
import { base, run } from "./lib.mjs";

const token = process.env.BERTH_TOKEN;

await run(async (t) => {
  const { browser, step, check, shot, audit, signIn } = t;
  let page;
  const newPage = async (ctx) => { page = await t.newPage(ctx); t.page = page; return page; };
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await newPage(context);

  step("signed out home page");
  const resp = await page.goto(base + "/");
  check(resp.status() === 200, "home page status " + resp.status());
  const csp = resp.headers()["content-security-policy"] || "";
  check(csp.includes("script-src 'self'") && !csp.includes("unsafe-inline") && csp.includes("frame-ancestors 'none'"), "CSP " + csp);
  check(resp.headers()["x-frame-options"] === "DENY", "no X-Frame-Options DENY");
  await page.getByRole("heading", { name: /sandboxes for AI agents/ }).waitFor();
  await audit("home-signed-out");
  await shot("home-signed-out");

  step("development login from the sign-in button");
  await page.getByRole("link", { name: "Sign in" }).first().click();
  await page.getByLabel("Username").waitFor();
  await audit("login");
  await shot("login");
  await page.getByLabel("Username").fill("alice");
  await page.getByRole("button", { name: /Sign in/ }).click();
  await page.waitForURL(base + "/");
  await page.getByText("Signed in as").waitFor();
  const mcp = await page.locator("#mcp-url").textContent();
  check(mcp === base + "/mcp", "MCP URL shown: " + mcp);
  await audit("home");
  await shot("home");

  step("sandboxes page, empty");
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Sandboxes" }).click();
  await page.locator("#empty-state").waitFor();
  await audit("servers-empty");
  await shot("servers-empty");

  step("start a server from the console");
  await page.getByLabel("Image").fill("base");
  await page.getByLabel("Server name (optional)").fill("from-console");
  await page.getByRole("button", { name: "Start sandbox" }).click();
  await page.waitForURL(/\/servers\/[0-9a-f-]{36}$/);
  const serverID = page.url().split("/").pop();
  // Marked once: a reload would lose it, so a status change seen with the
  // mark still there arrived live.
  await page.evaluate(() => { window.berthNoReload = "still here"; });
  await page.locator("#server-status", { hasText: "RUNNING" }).waitFor();

  step("run a command and see its output");
  await page.getByLabel(/Command/).fill("echo hello from the console; echo '<b>not bold</b>'; exit 3");
  await page.getByRole("button", { name: "Run" }).click();
  await page.locator("#command-stdout", { hasText: "hello from the console" }).waitFor();
  check((await page.locator("#command-exit").textContent()) === "3", "exit code shown");
  check((await page.locator("#command-stdout b").count()) === 0, "command output became markup");
  check(await page.evaluate(() => window.berthNoReload) === "still here", "the command reloaded the page");
  await audit("server");
  await shot("server");

  step("a status change from another path arrives live");
  const finish = await fetch(`${base}/api/servers/${serverID}/finish`, {
    method: "POST", headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" }, body: "{}",
  });
  check(finish.ok, "REST finish: " + finish.status + " " + (await finish.text()));
  await page.locator("#server-status", { hasText: "FINISHED" }).waitFor();
  check(await page.evaluate(() => window.berthNoReload) === "still here", "the page reloaded to show the change");
  await shot("server-finished-live");

  step("a form without its CSRF token is refused");
  await page.locator("#command-form input[name=csrf]").evaluate((el) => el.remove());
  await page.evaluate(() => document.getElementById("command-form").submit());
  await page.getByRole("heading", { name: "Form refused" }).waitFor();
  check((await page.locator("[role=alert]").textContent()).includes("CSRF"), "refusal names the CSRF check");
  await audit("form-refused");
  await shot("form-refused");

  step("stop it from the console");
  await page.goto(`${base}/servers/${serverID}`);
  await page.evaluate(() => { window.berthNoReload = "still here"; });
  await page.getByRole("button", { name: "Stop and delete" }).click();
  await page.waitForURL(/done=stop/);
  await page.locator("#server-status", { hasText: "STOPPED" }).waitFor();

  step("sandboxes page lists it");
  await page.goto(base + "/servers");
  await page.getByRole("link", { name: "from-console" }).waitFor();
  await audit("servers");
  await shot("servers");

  step("operations page with filters");
  await page.goto(base + "/operations");
  await page.getByLabel("Type").selectOption("start_server");
  await page.getByLabel("Status").selectOption("SUCCEEDED");
  await page.getByRole("button", { name: "Filter" }).click();
  await page.waitForURL(/type=start_server/);
  await page.locator("td", { hasText: "start_server" }).first().waitFor();
  await page.getByLabel("Status").selectOption("FAILED");
  await page.getByRole("button", { name: "Filter" }).click();
  await page.locator("#empty-state").waitFor();
  await page.goto(base + "/operations");
  await audit("operations");
  await shot("operations");

  step("authorized apps, in the same navigation");
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Authorized apps" }).click();
  await page.getByRole("heading", { name: "Authorized apps" }).waitFor();
  check(await page.locator("nav a[aria-current=page]").textContent() === "Authorized apps", "apps page not marked in the navigation");
  await audit("apps");
  await shot("apps");

  step("unknown page");
  const missing = await page.goto(base + "/no/such/page");
  check(missing.status() === 404, "unknown page status " + missing.status());
  await audit("not-found");
  await shot("not-found");

  step("another user's server is not found");
  const other = await browser.newContext();
  await newPage(other);
  await signIn("bob", `/servers/${serverID}`);
  await page.getByRole("heading", { name: "Not found" }).waitFor();
  check(!(await page.content()).includes("from-console"), "bob saw alice's server");

  step("phone-sized sandboxes page");
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true });
  await newPage(phone);
  await signIn("alice", "/servers");
  await page.getByRole("link", { name: "from-console" }).waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  check(overflow <= 1, "the page scrolls sideways on a phone by " + overflow + "px");
  await audit("servers-phone");
  await shot("servers-phone");

});
