// The agent frameworks people build on, against a preface server: the AI SDK's default OpenAI provider (which
// speaks the Responses API) for generateText, streamText and a forced tool call, its chat provider, and
// LangChain's ChatOpenAI with useResponsesApi and with bindTools. Each asserts content, usage and the cache
// fields the framework surfaces. PREFACE_URL, PREFACE_TOOLS_URL and PREFACE_MODEL as for sdk_test.mjs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, streamText, tool } from 'ai';
import { z } from 'zod';

const url = process.env.PREFACE_URL;
const toolsUrl = process.env.PREFACE_TOOLS_URL;
const model = process.env.PREFACE_MODEL;
assert.ok(url && toolsUrl && model, 'set PREFACE_URL, PREFACE_TOOLS_URL and PREFACE_MODEL');

const provider = createOpenAI({ baseURL: `${url}/v1`, apiKey: 'unused' });
const toolsProvider = createOpenAI({ baseURL: `${toolsUrl}/v1`, apiKey: 'unused' });
const prompt = 'Once upon a time, there was a little girl named Lily who liked to play in the garden.';

test('AI SDK: generateText then streamText on the default (Responses) provider, the second read from the cache', async () => {
  const first = await generateText({ model: provider(model), prompt, maxOutputTokens: 12, temperature: 0 });
  assert.ok(first.text.length > 0);
  assert.ok(first.response.id.startsWith('resp_'), first.response.id);  // the Responses API
  assert.equal(first.usage.outputTokens, 12);
  const streamed = streamText({ model: provider(model), prompt, maxOutputTokens: 12, temperature: 0 });
  let text = '';
  for await (const piece of streamed.textStream) text += piece;
  assert.equal(text, first.text);
  const usage = await streamed.usage;
  assert.equal(usage.inputTokens, first.usage.inputTokens);
  assert.ok(usage.inputTokenDetails.cacheReadTokens >= usage.inputTokens - 16, JSON.stringify(usage));
});

test('AI SDK: a forced tool call comes back typed and valid', async () => {
  const result = await generateText({
    model: toolsProvider(model),
    prompt: 'What is the weather in Paris?',
    maxOutputTokens: 120,
    tools: { get_weather: tool({ description: 'Weather in a city', inputSchema: z.object({ city: z.string().max(10) }) }) },
    toolChoice: { type: 'tool', toolName: 'get_weather' },
  });
  assert.ok(result.toolCalls.length >= 1, JSON.stringify(result));
  for (const call of result.toolCalls) {
    assert.equal(call.toolName, 'get_weather');
    assert.equal(typeof call.input.city, 'string');
    assert.ok(call.input.city.length <= 10);
  }
});

test('AI SDK: the chat completions provider', async () => {
  const result = await generateText({ model: provider.chat(model), prompt, maxOutputTokens: 8, temperature: 0 });
  assert.ok(result.text.length > 0);
  assert.equal(result.usage.outputTokens, 8);
  assert.ok(result.usage.inputTokenDetails.cacheReadTokens > 0, JSON.stringify(result.usage));
});

test('LangChain: ChatOpenAI with useResponsesApi, and bindTools with a forced tool', async () => {
  const chat = new ChatOpenAI({ model, apiKey: 'unused', configuration: { baseURL: `${url}/v1` }, useResponsesApi: true,
                                maxTokens: 12, temperature: 0 });
  const reply = await chat.invoke(prompt);
  const text = typeof reply.content === 'string' ? reply.content : reply.content.map((p) => p.text ?? '').join('');
  assert.ok(text.length > 0);
  assert.equal(reply.usage_metadata.output_tokens, 12);
  assert.ok(reply.usage_metadata.input_token_details.cache_read > 0, JSON.stringify(reply.usage_metadata));

  const tools = new ChatOpenAI({ model, apiKey: 'unused', configuration: { baseURL: `${toolsUrl}/v1` }, maxTokens: 120 });
  const bound = tools.bindTools([{ name: 'get_weather', description: 'Weather in a city',
                                   schema: z.object({ city: z.string().max(10) }) }], { tool_choice: 'any' });
  const called = await bound.invoke('What is the weather in Paris?');
  assert.ok(called.tool_calls.length >= 1, JSON.stringify(called));
  assert.equal(called.tool_calls[0].name, 'get_weather');
  assert.equal(typeof called.tool_calls[0].args.city, 'string');
});
