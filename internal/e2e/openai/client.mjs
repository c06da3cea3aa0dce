// The official OpenAI Node client against an aid service, driven by the
// loop every client writes: while the answer asks for tool calls, run
// them and send their results. A paused run is the server's tool waiting
// for a person, so the loop must end at once with the message that says
// how to approve it. Prints one JSON object of what it saw.
//
//   node client.mjs BASE_URL TOKEN
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const ask = "I want a refund for order AB-123456";

const ran = [];
const messages = [{ role: "user", content: ask }];
let answer;
for (let turn = 0; turn < 3; turn++) {
  const cc = await client.chat.completions.create({ model: "triage", messages, user: "customer-1" });
  const choice = cc.choices[0];
  answer = { finish_reason: choice.finish_reason, content: choice.message.content, tool_calls: choice.message.tool_calls ?? [], aid: cc.aid };
  if (choice.finish_reason !== "tool_calls") break;
  messages.push(choice.message);
  for (const call of choice.message.tool_calls) {
    ran.push(call.function.name);
    messages.push({ role: "tool", tool_call_id: call.id, content: "done by the client" });
  }
}

const stream = await client.chat.completions.create({ model: "triage", messages: [{ role: "user", content: ask }], user: "customer-1", stream: true });
const streamed = { content: "", finish_reason: null, tool_calls: 0, aid: null };
for await (const chunk of stream) {
  for (const choice of chunk.choices) {
    streamed.content += choice.delta?.content ?? "";
    streamed.tool_calls += choice.delta?.tool_calls?.length ?? 0;
    if (choice.finish_reason) {
      streamed.finish_reason = choice.finish_reason;
      streamed.aid = chunk.aid ?? null;
    }
  }
}
console.log(JSON.stringify({ ran, answer, streamed }));
