// Helpers the two tasks clients (tasks-client.mjs for 2025-11-25,
// tasks-ext-client.mjs for the 2026-07-28 extension) share.

// callTool calls a tool that must succeed and returns its structured
// answer.
export async function callTool(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) throw new Error(`${name}: tool error: ${JSON.stringify(res.content)}`);
  return res.structuredContent;
}

// until polls check every 100 ms until it answers a truthy value or the
// deadline passes.
export async function until(what, check, seconds = 60) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// refused awaits p, which must fail, and returns the error's code and
// message.
export async function refused(what, p) {
  try {
    await p;
  } catch (err) {
    return `${err?.code ?? ""} ${String(err?.message ?? err)}`.trim();
  }
  throw new Error(`${what} was not refused`);
}

// run calls the mode named by the first argument with the second and
// prints its summary as one JSON line; a failure exits non-zero with the
// reason on stderr.
export async function run(modes) {
  const [mode, arg] = process.argv.slice(2);
  try {
    if (!Object.hasOwn(modes, mode)) throw new Error(`mode ${mode}: want one of ${Object.keys(modes).join(", ")}`);
    console.log(JSON.stringify(await modes[mode](arg)));
  } catch (err) {
    console.error(err?.stack ?? String(err));
    process.exitCode = 1;
  }
}
