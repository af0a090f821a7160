// The official Node SDKs pointed at Ebbtide's proxy, as a Node application would use them.
// Run by tests/api/test_node_sdks.py with EBBTIDE_URL set; prints one JSON object of what
// each call gave back, for the test to check against what the scripted upstream saw.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

const base = process.env.EBBTIDE_URL;
const session = (name) => ({ "X-Ebbtide-Session": name });
const openai = (name) =>
  new OpenAI({ baseURL: `${base}/v1`, apiKey: "sk-node-client", defaultHeaders: session(name), maxRetries: 0 });
const anthropic = (name) =>
  new Anthropic({ baseURL: base, apiKey: "sk-node-client", defaultHeaders: session(name), maxRetries: 0 });

async function refusal(call) {
  try {
    await call();
    return { raised: null };
  } catch (error) {
    return { raised: error.constructor.name, status: error.status, message: String(error.message) };
  }
}

const out = {};

// Chat Completions: a reply, then the same history with it and a new question, streamed.
const history = [{ role: "user", content: "Name a prime." }];
const first = await openai("node-chat").chat.completions.create({ model: "gpt-4o", messages: history });
out.chat = first.choices[0].message.content;
history.push(first.choices[0].message, { role: "user", content: "Another." });
const stream = await openai("node-chat").chat.completions.create({ model: "gpt-4o", messages: history, stream: true });
let streamed = "";
for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? "";
out.chat_streamed = streamed;

// Responses: the output goes back in the input, as a stateless loop does.
const question = { role: "user", content: "Name a colour." };
const response = await openai("node-responses").responses.create({ model: "gpt-4o", instructions: "Be brief.", input: [question] });
out.responses = response.output_text;
const events = await openai("node-responses").responses.create({
  model: "gpt-4o",
  instructions: "Be brief.",
  input: [question, ...response.output, { role: "user", content: "Another." }],
  stream: true,
});
out.responses_events = [];
for await (const event of events) out.responses_events.push(event.type);

// Messages: a reply and a streamed one; the token count and the model list pass through.
const said = await anthropic("node-messages").messages.create({
  model: "claude-sonnet-4-5", max_tokens: 64, messages: [{ role: "user", content: "Name a river." }],
});
out.messages = said.content[0].text;
const messageStream = anthropic("node-messages").messages.stream({
  model: "claude-sonnet-4-5",
  max_tokens: 64,
  messages: [{ role: "user", content: "Name a river." }, { role: "assistant", content: said.content }, { role: "user", content: "Another." }],
});
out.messages_streamed = (await messageStream.finalMessage()).content[0].text;
out.count_tokens = (await anthropic("node-messages").messages.countTokens({
  model: "claude-sonnet-4-5", messages: [{ role: "user", content: "How long is this?" }],
})).input_tokens;
out.openai_models = [];
for await (const model of openai("none").models.list()) out.openai_models.push(model.id);
out.anthropic_models = [];
for await (const model of anthropic("none").models.list()) out.anthropic_models.push(model.id);

// Ebbtide's refusals, raised as each SDK's own typed errors.
out.openai_refusal = await refusal(() =>
  openai("node-bad").chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "x" }], n: 2 }));
out.anthropic_refusal = await refusal(() =>
  new Anthropic({ baseURL: base, apiKey: "sk-node-client", maxRetries: 0 }).messages.create({
    model: "claude-sonnet-4-5", max_tokens: 8, messages: [{ role: "user", content: "no session" }],
  }));

console.log(JSON.stringify(out));
