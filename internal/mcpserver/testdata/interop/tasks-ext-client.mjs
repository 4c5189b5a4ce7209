// Drives berth's MCP tasks in the form of the 2026-07-28 extension
// io.modelcontextprotocol/tasks (SEP-2663) with the extension's own
// client, @modelcontextprotocol/ext-tasks, and prints one JSON summary
// line on stdout for tasks_test.go to check. Any failure exits non-zero
// with the reason on stderr.
//
// The MCP client is the TypeScript SDK 2 (@modelcontextprotocol/client),
// which negotiates 2026-07-28 with server/discover; the session is
// ext-tasks' own adapter for it (createTaskSessionFromClient), which
// finds the extension in the server's capabilities and frames each task
// request itself. The SDK cannot carry a result of resultType "task", so
// ext-tasks asks its host for a raw dispatch: here a plain POST with the
// headers of the Streamable HTTP transport of 2026-07-28.
//
// node tasks-ext-client.mjs flow      one user's task polled to its result,
//                                     a second task cancelled while it
//                                     runs, a second user (BERTH_TOKEN2)
//                                     refused
// node tasks-ext-client.mjs create    starts a server as a task and prints
//                                     its id
// node tasks-ext-client.mjs finish ID resumes task ID and settles it
//
// Environment: BERTH_MCP_URL, BERTH_TOKEN, BERTH_TOKEN2 (flow only).
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as LegacyTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { DispatchError, createTaskSessionEndpointId, createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";
import { callTool, refused, run, until } from "./tasks-helpers.mjs";

const url = process.env.BERTH_MCP_URL;
const endpointId = await createTaskSessionEndpointId("berth-interop", { url });
const clientInfo = { name: "berth-interop-ext-tasks", version: "1.0.0" };

// rawDispatch POSTs one request ext-tasks framed; seen collects every
// answer by method, for the summary.
function rawDispatch(token, seen) {
  let id = 0;
  return async (request, options = {}) => {
    const name = request.method === "tools/call" ? request.params.name : undefined;
    let res;
    try {
      res = await fetch(url, {
        method: "POST",
        headers: {
          Authorization: `Bearer ${token}`,
          "Content-Type": "application/json",
          Accept: "application/json, text/event-stream",
          "Mcp-Protocol-Version": request.params._meta["io.modelcontextprotocol/protocolVersion"],
          "Mcp-Method": request.method,
          ...(name === undefined ? {} : { "Mcp-Name": name }),
          ...(options.context?.headers ?? {}),
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: `raw-${++id}`, ...request }),
        signal: options.signal,
      });
    } catch (err) {
      throw new DispatchError(`POST ${request.method}: ${err.message}`, false, { cause: err });
    }
    const text = await res.text();
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      throw new DispatchError(`${request.method}: HTTP ${res.status}: ${text}`);
    }
    (seen[request.method] ??= []).push(msg.error ? { error: msg.error } : msg.result);
    return msg.error ? { kind: "error", error: msg.error } : { kind: "result", result: msg.result };
  };
}

// connect opens a 2026-07-28 client with token and an ext-tasks session
// over it.
async function connect(token, seen = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client(clientInfo, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
  await client.connect(transport);
  const session = createTaskSessionFromClient(client, {
    endpointId,
    rawDispatch: rawDispatch(token, seen),
    v2RequestFraming: { protocolVersion: client.getNegotiatedProtocolVersion?.() ?? "2026-07-28", clientInfo, clientCapabilities: {} },
    onError: (e) => console.error(e),
  });
  return { client, session, seen };
}

const statuses = (seen) => (seen["tasks/get"] ?? []).map((r) => r.status ?? "error");

// legacyStatus reads a task in the 2025-11-25 form, with the SDK 1's
// experimental tasks client.
async function legacyStatus(token, id) {
  const client = new LegacyClient({ name: "berth-interop-legacy", version: "1.0.0" });
  await client.connect(new LegacyTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  try {
    return (await client.experimental.tasks.getTask(id)).status;
  } finally {
    await client.close();
  }
}

async function flow() {
  const { client, session, seen } = await connect(process.env.BERTH_TOKEN);
  const other = await connect(process.env.BERTH_TOKEN2);
  const summary = { era: client.getProtocolEra(), version: client.getNegotiatedProtocolVersion(), extensions: client.getServerCapabilities()?.extensions ?? null };

  const registered = await callTool(client, "register_client", { request: { name: "ext-tasks" } });
  const start = await callTool(client, "start_server", {
    request: { client_id: registered.id, image_tag: "base", server_name: "ext-tasks", wait_seconds: 120 },
  });
  const serverId = JSON.parse(start.result).server_id;
  const req = (command) => ({ request: { client_id: registered.id, server_id: serverId, command } });

  // An ordinary tool through the session answers at once.
  const plain = await session.callTool("bash", { server_id: serverId, command: "echo plain" });
  summary.plainKind = plain.kind;
  summary.plainStdout = (await plain.settle()).outcome.result?.structuredContent?.stdout;

  // A task the server chose to create, polled by ext-tasks to its result.
  const run = await session.callTool("run_bash_command", req("sleep 1; echo done"));
  summary.kind = run.kind;
  summary.taskId = run.handle?.taskId;
  const created = seen["tools/call"].at(-1);
  summary.createdResultType = created.resultType;
  summary.createdStatus = created.status;
  const { outcome } = await run.settle();
  summary.outcome = outcome.status;
  summary.statuses = statuses(seen);
  summary.resultIsError = outcome.result?.isError;
  summary.resultStatus = outcome.result?.structuredContent?.status;
  summary.stdout = JSON.parse(JSON.parse(outcome.result.structuredContent.result).body).stdout;
  // The same durable operation, read in the 2025-11-25 form.
  summary.legacyStatus = await legacyStatus(process.env.BERTH_TOKEN, summary.taskId);
  await session.task(summary.taskId).update({});
  summary.updateAck = "ack";

  // A task cancelled while its command runs: the command would touch
  // late after 5 s; once cancelled its process must be gone and late
  // never appear.
  const t = await session.callTool("run_bash_command", req("echo $$ > pid; sleep 5; touch late"));
  const id = t.handle.taskId;
  await until("the command to start", async () => {
    const got = await session.task(id).snapshot();
    if (got.status !== "working") throw new Error(`task ended before it was cancelled: ${JSON.stringify(got)}`);
    const r = await callTool(client, "bash", { server_id: serverId, command: "cat pid 2>/dev/null" });
    return r.stdout.trim() !== "";
  });
  summary.otherGet = await refused("another user's tasks/get", other.session.task(id).snapshot());
  summary.otherCancel = await refused("another user's tasks/cancel", other.session.cancelTask(id));
  summary.otherUpdate = await refused("another user's tasks/update", other.session.task(id).update({}));
  await t.cancel();
  summary.cancelOutcome = (await t.settle()).outcome.status;
  summary.afterCancel = (await session.task(id).snapshot()).status;
  await until("the cancelled command to stop", async () => {
    const r = await callTool(client, "bash", { server_id: serverId, command: "kill -0 $(cat pid) 2>/dev/null && echo alive || echo gone" });
    return r.stdout.trim() === "gone";
  });
  const late = await callTool(client, "bash", { server_id: serverId, command: "test -e late && echo yes || echo no" });
  summary.lateFile = late.stdout.trim();
  await session.cancelTask(id);
  summary.cancelAgain = "ack";

  // What the extension dropped, framed as ext-tasks frames task requests.
  const framed = (method, params) => ({
    method,
    params: {
      ...params,
      _meta: {
        "io.modelcontextprotocol/protocolVersion": summary.version,
        "io.modelcontextprotocol/clientInfo": clientInfo,
        "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } },
      },
    },
  });
  const raw = rawDispatch(process.env.BERTH_TOKEN, {});
  // tasks/list answers the caller's tasks (the extension leaves it to the
  // server); another user's list has none of them.
  const listed = await raw(framed("tasks/list", {}));
  summary.listError = listed.error?.code ?? 0;
  summary.listed = Object.fromEntries((listed.result?.tasks ?? []).filter((x) => [summary.taskId, id].includes(x.taskId)).map((x) => [x.taskId, x.status]));
  const otherListed = await rawDispatch(process.env.BERTH_TOKEN2, {})(framed("tasks/list", {}));
  summary.otherListed = (otherListed.result?.tasks ?? []).some((x) => [summary.taskId, id].includes(x.taskId)) || otherListed.kind !== "result";
  summary.resultError = (await raw(framed("tasks/result", { taskId: id }))).error?.code;
  summary.missing = await refused("tasks/get of an unknown task", session.task("00000000-0000-0000-0000-000000000000").snapshot());

  await callTool(client, "stop_server", { request: { client_id: registered.id, server_id: serverId } });
  await session.close();
  await other.session.close();
  await client.close();
  await other.client.close();
  return summary;
}

async function create() {
  const { client, session, seen } = await connect(process.env.BERTH_TOKEN);
  const registered = await callTool(client, "register_client", { request: { name: "ext-tasks-replica" } });
  const run = await session.callTool("start_server", { request: { client_id: registered.id, image_tag: "base", server_name: "replica" } });
  const created = seen["tools/call"].at(-1);
  // Detached and the session left open: closing an ext-tasks session
  // cancels the tasks it still tracks, detached or not, and this one
  // must outlive this process and replica A.
  await run.detach();
  await client.close();
  return { taskId: run.handle.taskId, status: created.status, kind: run.kind };
}

async function finish(id) {
  const { client, session, seen } = await connect(process.env.BERTH_TOKEN);
  const run = await session.resumeTask({ endpointId, generation: "v2", taskId: id, originalOperation: "tools/call" });
  const { outcome } = await run.settle();
  await session.close();
  await client.close();
  const all = statuses(seen);
  return {
    status: all.at(-1) ?? "",
    resultIsError: outcome.result?.isError ?? true,
    resultStatus: outcome.result?.structuredContent?.status ?? JSON.stringify(outcome),
    sawWorking: all.includes("working"),
  };
}

await run({ flow, create, finish });
