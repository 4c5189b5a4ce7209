// What the console's browser scripts share: Chromium launched as the
// tests need it, steps, checks, screenshots, an axe-core audit, pages that
// record content-security-policy refusals and script errors, and the
// development login. Environment: BERTH_URL, CHROMIUM, ARTIFACTS.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { chromium } from "playwright-core";

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
export const base = process.env.BERTH_URL;
const artifacts = process.env.ARTIFACTS;
const timeout = 30_000;

// run launches Chromium and calls script(t) with the test's helpers. The
// first failure saves a screenshot of the page it happened on and makes
// the process exit non-zero.
export async function run(script) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const problems = [];
  const t = {
    browser,
    page: null,
    step(name) { console.log("step: " + name); },
    check(ok, what) { if (!ok) throw new Error(what); },
    async shot(name) { await t.page.screenshot({ path: `${artifacts}/${name}.png`, fullPage: true }); },
    // An axe-core audit of the page: no serious or critical violation.
    // axe is evaluated through DevTools, so the page's content security
    // policy (no inline script) stays on.
    async audit(name) {
      await t.page.evaluate(axeSource);
      const res = await t.page.evaluate(() => axe.run(document, { resultTypes: ["violations"] }));
      const bad = res.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
      for (const v of bad) {
        problems.push(`${name}: ${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join(", ")})`);
      }
      console.log(`audit ${name}: ${res.violations.length} violations, ${bad.length} serious or critical`);
    },
    async newPage(context) {
      const p = await context.newPage();
      p.setDefaultTimeout(timeout);
      p.on("console", (m) => {
        // A refused script, style or connection would show up here.
        if (/Content Security Policy|Refused to/.test(m.text())) problems.push("CSP: " + m.text());
      });
      p.on("pageerror", (e) => problems.push("script error: " + e.message));
      return p;
    },
    async signIn(username, returnTo) {
      await t.page.goto(`${base}/oauth/login/start?return_to=${encodeURIComponent(returnTo)}`);
      await t.page.getByLabel("Username").fill(username);
      await t.page.getByRole("button", { name: /Sign in/ }).click();
    },
  };
  try {
    await script(t);
    if (problems.length) throw new Error("problems:\n" + problems.join("\n"));
    console.log("ok");
  } catch (err) {
    console.error("FAILED at " + (t.page ? t.page.url() : "start") + ": " + (err.stack || err));
    if (problems.length) console.error(problems.join("\n"));
    if (t.page) await t.page.screenshot({ path: `${artifacts}/failure.png`, fullPage: true }).catch(() => {});
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}
