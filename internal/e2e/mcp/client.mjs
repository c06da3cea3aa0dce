// The official TypeScript MCP client against an aid service's /mcp: list
// the tools, call an agent that answers, call one whose run pauses for
// approval. With "elicit", the client answers the service's elicitation
// by approving. With "task", it calls the agent whose run pauses as a task
// (the protocol's experimental tasks), approves in the elicitation that
// tasks/result brings, and lists its tasks. Prints one JSON object of what
// it saw.
//
//   node client.mjs URL TOKEN [elicit|task]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token, mode] = process.argv.slice(2);
const elicit = mode === "elicit" || mode === "task";
const client = new Client(
  { name: "aid-e2e", version: "1.0.0" },
  { capabilities: elicit ? { elicitation: {} } : {} },
);
const asked = [];
if (elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push({ message: req.params.message, meta: req.params._meta ?? null });
    return { action: "accept", content: { decision: "approve" } };
  });
}
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
const out = { asked };
out.tools = (await client.listTools()).tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }));
if (mode === "task") {
  out.capabilities = client.getServerCapabilities();
  out.execution = (await client.listTools()).tools.map((t) => t.execution ?? null);
  out.stream = [];
  const refund = { name: "triage", arguments: { message: "I want a refund for order AB-123456", user_id: "customer-1" } };
  for await (const m of client.experimental.tasks.callToolStream(refund, undefined, { task: { ttl: 60000 } })) {
    out.stream.push(m.type === "error" ? { type: "error", message: m.error.message } : m);
  }
  const listed = await client.experimental.tasks.listTasks();
  out.tasks = listed.tasks;
  console.log(JSON.stringify(out));
  await client.close();
  process.exit(0);
}
out.tech = await client.callTool({ name: "tech", arguments: { message: "I cannot log in" } });
out.refund = await client.callTool({
  name: "triage",
  arguments: { message: "I want a refund for order AB-123456", user_id: "customer-1" },
});
out.bad = await client.callTool({ name: "tech", arguments: { text: "no message" } });
console.log(JSON.stringify(out));
await client.close();
