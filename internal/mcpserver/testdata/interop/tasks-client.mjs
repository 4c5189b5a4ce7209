// Drives berth's MCP tasks (protocol 2025-11-25, experimental) with the
// official TypeScript SDK's tasks client and prints one JSON summary line
// on stdout for tasks_test.go to check. Any failure exits non-zero with
// the reason on stderr.
//
// node tasks-client.mjs flow      one user's task polled to its result, a
//                                 second task cancelled while it runs, and
//                                 a second user (BERTH_TOKEN2) refused both
// node tasks-client.mjs create    starts a server as a task and prints its id
// node tasks-client.mjs finish ID polls task ID to its end and its result
//
// Environment: BERTH_MCP_URL, BERTH_TOKEN, BERTH_TOKEN2 (flow only).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { callTool, refused, run, until } from "./tasks-helpers.mjs";

const url = process.env.BERTH_MCP_URL;

async function connect(token) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "berth-interop-ts-tasks", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

// startTask calls a tool as a task and returns the created task, without
// waiting for it.
async function startTask(client, name, args) {
  for await (const msg of client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, { task: { ttl: 600000 } })) {
    if (msg.type === "taskCreated") return msg.task;
    if (msg.type === "error") throw msg.error;
  }
  throw new Error(`${name}: no task created`);
}

async function flow() {
  const client = await connect(process.env.BERTH_TOKEN);
  const other = await connect(process.env.BERTH_TOKEN2);
  const summary = { capabilities: client.getServerCapabilities()?.tasks ?? null };
  const { tools } = await client.listTools();
  summary.taskSupport = Object.fromEntries(tools.filter((t) => t.execution?.taskSupport).map((t) => [t.name, t.execution.taskSupport]));

  const registered = await callTool(client, "register_client", { request: { name: "ts-tasks" } });
  const start = await callTool(client, "start_server", {
    request: { client_id: registered.id, image_tag: "base", server_name: "ts-tasks", wait_seconds: 120 },
  });
  const serverId = JSON.parse(start.result).server_id;
  const req = (command) => ({ request: { client_id: registered.id, server_id: serverId, command } });

  // A task polled to completion by the SDK's own stream.
  const statuses = [];
  let result;
  for await (const msg of client.experimental.tasks.callToolStream(
    { name: "run_bash_command", arguments: req("sleep 1; echo done") }, CallToolResultSchema, { task: { ttl: 600000 } })) {
    if (msg.type === "taskCreated") { summary.createdStatus = msg.task.status; summary.taskId = msg.task.taskId; }
    if (msg.type === "taskStatus") statuses.push(msg.task.status);
    if (msg.type === "result") result = msg.result;
    if (msg.type === "error") throw msg.error;
  }
  summary.statuses = statuses;
  summary.resultIsError = result.isError;
  summary.relatedTask = result._meta?.["io.modelcontextprotocol/related-task"]?.taskId;
  summary.resultStatus = result.structuredContent.status;
  summary.stdout = JSON.parse(JSON.parse(result.structuredContent.result).body).stdout;

  // A task cancelled while its command runs: the command would touch
  // late after 5 s; once cancelled its process must be gone and late
  // never appear.
  const t = await startTask(client, "run_bash_command", req("echo $$ > pid; sleep 5; touch late"));
  summary.cancelTaskId = t.taskId;
  await until("the command to start", async () => {
    const got = await client.experimental.tasks.getTask(t.taskId);
    if (got.status !== "working") throw new Error(`task ended before it was cancelled: ${JSON.stringify(got)}`);
    const r = await callTool(client, "bash", { server_id: serverId, command: "cat pid 2>/dev/null" });
    return r.stdout.trim() !== "";
  });
  summary.otherGet = await refused("another user's tasks/get", other.experimental.tasks.getTask(t.taskId));
  summary.otherCancel = await refused("another user's tasks/cancel", other.experimental.tasks.cancelTask(t.taskId));
  summary.otherListed = (await other.experimental.tasks.listTasks()).tasks.some((x) => x.taskId === t.taskId);
  const cancelled = await client.experimental.tasks.cancelTask(t.taskId);
  summary.cancelStatus = cancelled.status;
  summary.getAfterCancel = (await client.experimental.tasks.getTask(t.taskId)).status;
  await until("the cancelled command to stop", async () => {
    const r = await callTool(client, "bash", { server_id: serverId, command: "kill -0 $(cat pid) 2>/dev/null && echo alive || echo gone" });
    return r.stdout.trim() === "gone";
  });
  const late = await callTool(client, "bash", { server_id: serverId, command: "test -e late && echo yes || echo no" });
  summary.lateFile = late.stdout.trim();
  summary.cancelAgain = await refused("cancelling a cancelled task", client.experimental.tasks.cancelTask(t.taskId));
  const cancelledResult = await client.experimental.tasks.getTaskResult(t.taskId, CallToolResultSchema);
  summary.cancelledResultIsError = cancelledResult.isError;
  const listed = (await client.experimental.tasks.listTasks()).tasks.map((x) => x.taskId);
  summary.listed = [summary.taskId, t.taskId].every((id) => listed.includes(id));
  summary.missing = await refused("tasks/get of an unknown task", client.experimental.tasks.getTask("00000000-0000-0000-0000-000000000000"));

  await callTool(client, "stop_server", { request: { client_id: registered.id, server_id: serverId } });
  await client.close();
  await other.close();
  return summary;
}

async function create() {
  const client = await connect(process.env.BERTH_TOKEN);
  const registered = await callTool(client, "register_client", { request: { name: "ts-tasks-replica" } });
  const t = await startTask(client, "start_server", { request: { client_id: registered.id, image_tag: "base", server_name: "replica" } });
  await client.close();
  return { taskId: t.taskId, status: t.status };
}

async function finish(id) {
  const client = await connect(process.env.BERTH_TOKEN);
  const statuses = [];
  const task = await until("the task to end", async () => {
    const got = await client.experimental.tasks.getTask(id);
    statuses.push(got.status);
    return got.status === "working" ? null : got;
  }, 120);
  const result = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
  await client.close();
  return { status: task.status, statusMessage: task.statusMessage ?? "", resultIsError: result.isError, resultStatus: result.structuredContent?.status, sawWorking: statuses.includes("working") };
}

await run({ flow, create, finish });
