// Runs berth's documented agent flow with the official TypeScript SDK
// client over streamable HTTP and prints one JSON summary line on stdout
// for interop_test.go to check. Any failure exits non-zero with the reason
// on stderr.
//
// Environment: BERTH_MCP_URL (the /mcp endpoint), BERTH_TOKEN (a session
// token; passed by environment so it never shows in a process listing).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

const url = process.env.BERTH_MCP_URL;
const token = process.env.BERTH_TOKEN;
if (!url || !token) {
  console.error("BERTH_MCP_URL and BERTH_TOKEN must be set");
  process.exit(2);
}

// callTool calls a tool and returns its structured content, failing on a
// tool error so the summary never hides one.
async function callTool(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) {
    const text = (res.content ?? []).map((c) => c.text ?? "").join("\n");
    throw new Error(`${name}: tool error: ${text}`);
  }
  if (!res.structuredContent) {
    throw new Error(`${name}: no structuredContent in ${JSON.stringify(res)}`);
  }
  return res.structuredContent;
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "berth-interop-ts-sdk", version: "1.0.0" });

try {
  await client.connect(transport);
  const summary = {
    protocolVersion: transport.protocolVersion,
    sdkLatestProtocolVersion: LATEST_PROTOCOL_VERSION,
    serverName: client.getServerVersion()?.name,
  };

  const { tools } = await client.listTools();
  summary.tools = tools.map((t) => t.name).sort();

  const registered = await callTool(client, "register_client", { request: { name: "ts-sdk-interop" } });
  const clientId = registered.id;

  const start = await callTool(client, "start_server", {
    request: { client_id: clientId, image_tag: "base", server_name: "ts-sdk", wait_seconds: 120 },
  });
  summary.startStatus = start.status;
  const serverId = JSON.parse(start.result).server_id;

  const run = await callTool(client, "run_bash_command", {
    request: { client_id: clientId, server_id: serverId, command: "echo hello", wait_seconds: 60 },
  });
  summary.runStatus = run.status;
  const forwarded = JSON.parse(run.result);
  summary.runStdout = JSON.parse(forwarded.body).stdout;

  const bash = await callTool(client, "bash", { server_id: serverId, command: "echo hi" });
  summary.bashStdout = bash.stdout;
  summary.bashExitCode = bash.exit_code;

  const stopped = await callTool(client, "stop_server", { request: { client_id: clientId, server_id: serverId } });
  summary.stoppedStatus = stopped.status;
  await callTool(client, "stop_client", { request: { client_id: clientId } });

  console.log(JSON.stringify(summary));
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exitCode = 1;
} finally {
  await client.close().catch(() => {});
}
