// Plays the user's browser through berth's authorization pages with fetch:
// follows redirects inside berth keeping its cookies, signs in with the
// development login, approves the consent page, and returns the
// authorization code from the redirect back to the client.
const entities = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };
const unescapeHTML = (s) => s.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (m, e) =>
  e[0] !== "#" ? (entities[e.toLowerCase()] ?? m) : String.fromCodePoint(e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10)));
function hiddenFields(html) {
  const f = new URLSearchParams();
  for (const m of html.matchAll(/<input type="hidden" name="([a-z_]+)" value="([^"]*)">/g)) f.set(m[1], unescapeHTML(m[2]));
  return f;
}

// newBrowser returns authorize(authUrl) -> code for user on the berth at
// origin. Cookies persist across calls, as in one browser.
export function newBrowser(origin, user) {
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
  return async function authorize(authUrl) {
    let next = authUrl.toString();
    let init = {};
    for (let step = 0; step < 10; step++) {
      const res = await visit(next, init);
      init = {};
      if (res.status >= 300 && res.status < 400) {
        const loc = new URL(res.headers.get("location"), next);
        if (loc.origin !== origin) {
          const q = loc.searchParams;
          if (q.get("error")) throw new Error(`authorization error ${q.get("error")}: ${q.get("error_description")}`);
          if (q.get("iss") !== origin) throw new Error(`iss ${q.get("iss")}, want ${origin}`);
          return q.get("code");
        }
        next = loc.toString();
        continue;
      }
      const html = await res.text();
      if (res.status !== 200) throw new Error(`authorization page ${res.status}: ${html}`);
      const form = hiddenFields(html);
      if (html.includes('action="/oauth/login"')) {
        form.set("username", user);
        next = origin + "/oauth/login";
      } else if (html.includes('action="/oauth/authorize"')) {
        form.set("decision", "approve");
        next = origin + "/oauth/authorize";
      } else {
        throw new Error(`unexpected page: ${html}`);
      }
      init = { method: "POST", body: form };
    }
    throw new Error("too many steps in the authorization");
  };
}
