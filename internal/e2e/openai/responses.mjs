// The official OpenAI Node client's Responses API against an aid service:
// a plain response, a streamed one, a client function tool round trip
// continued with previous_response_id, and a response paused for
// approval. Prints one JSON object of what it saw.
//
//   node responses.mjs BASE_URL TOKEN CLIENT_TOOL CLIENT_TOOL_RESULT
import OpenAI from "openai";

const [baseURL, apiKey, clientTool, clientToolResult] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });

const plain = await client.responses.create({ model: "tech", input: "I cannot log in", user: "customer-1" });

const stream = await client.responses.create({ model: "tech", input: "I cannot log in", user: "customer-1", stream: true });
const streamed = { types: [], text: "", status: null, seq: [] };
for await (const ev of stream) {
  if (streamed.types.at(-1) !== ev.type) streamed.types.push(ev.type);
  streamed.seq.push(ev.sequence_number);
  if (ev.type === "response.output_text.delta") streamed.text += ev.delta;
  if (ev.type === "response.completed") streamed.status = ev.response.status;
}

const tools = [{ type: "function", name: clientTool, description: "Tell the customer something.", strict: false,
  parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } }];
const first = await client.responses.create({ model: "concierge", input: "How long do I have to return order AB-123456?", tools });
const calls = first.output.filter((it) => it.type === "function_call");
const ran = calls.map((c) => c.name);
const second = await client.responses.create({ model: "concierge", previous_response_id: first.id, tools,
  input: calls.map((c) => ({ type: "function_call_output", call_id: c.call_id, output: clientToolResult })) });

const paused = await client.responses.create({ model: "triage", input: "I want a refund for order AB-123456", user: "customer-1" });

console.log(JSON.stringify({
  plain: { status: plain.status, text: plain.output_text, usage: plain.usage },
  streamed,
  roundTrip: { firstStatus: first.status, ran, serverCalls: first.output.filter((it) => it.type === "mcp_call").map((c) => c.name),
    secondStatus: second.status, text: second.output_text, previous: second.previous_response_id, firstID: first.id },
  paused: { status: paused.status, last: paused.output.at(-1) },
}));
