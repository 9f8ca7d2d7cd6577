// The official OpenAI SDK's Responses API and zod helpers against a preface server: responses.create, stream and
// parse, previous_response_id (the follow-up reads the whole previous conversation from the cache), a tool loop
// on the tool-calling server, and zodResponseFormat / zodFunction / zodTextFormat with .int(), .positive(),
// .email(), .uuid() and friends (no 400: each keyword is enforced or loosened with a warning). PREFACE_URL,
// PREFACE_TOOLS_URL and PREFACE_MODEL as for sdk_test.mjs. Run by run.sh with `node --test`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat, zodTextFormat } from 'openai/helpers/zod';
import { z } from 'zod';

const url = process.env.PREFACE_URL;
const toolsUrl = process.env.PREFACE_TOOLS_URL;
const model = process.env.PREFACE_MODEL;
assert.ok(url && toolsUrl && model, 'set PREFACE_URL, PREFACE_TOOLS_URL and PREFACE_MODEL');

const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
const tools = new OpenAI({ baseURL: `${toolsUrl}/v1`, apiKey: 'unused', maxRetries: 0 });

async function blockSize(base) {
  const res = await fetch(`${base}/v1/models`);
  return (await res.json()).data[0].meta.kv_block_size;
}

test('responses.create, then a follow-up with previous_response_id reads the conversation from the cache', async () => {
  const block = await blockSize(url);
  const first = await openai.responses.create({
    model,
    instructions: 'You tell stories.',
    input: 'Once upon a time, there was a little girl named Lily who loved the park.',
    max_output_tokens: 24,
    temperature: 0,
  });
  assert.equal(first.object, 'response');
  assert.ok(first.id.startsWith('resp_'));
  assert.ok(first.output_text.length > 0);  // the SDK's own accessor over the output items
  const { input_tokens: in1, output_tokens: out1 } = first.usage;
  const second = await openai.responses.create({
    model,
    instructions: 'You tell stories.',
    previous_response_id: first.id,
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'What happened next?' }] }],
    max_output_tokens: 8,
    temperature: 0,
  });
  assert.equal(second.previous_response_id, first.id);
  assert.ok(second.usage.input_tokens > in1 + out1 - 1, JSON.stringify(second.usage));
  assert.ok(second.usage.input_tokens_details.cached_tokens >= Math.floor((in1 + out1 - 1) / block) * block,
            JSON.stringify(second.usage));
  const retrieved = await openai.responses.retrieve(second.id);
  assert.equal(retrieved.output_text, second.output_text);
  const items = await openai.responses.inputItems.list(second.id);
  assert.equal(items.data.length, 1);
  await openai.responses.delete(first.id);
  await assert.rejects(openai.responses.retrieve(first.id), (e) => e.status === 404);
});

test('responses.stream gives the same text as responses.create', async () => {
  const request = { model, input: 'Tom had a red kite.', max_output_tokens: 20, temperature: 0 };
  const full = await openai.responses.create(request);
  const stream = openai.responses.stream(request);
  let deltas = '';
  stream.on('response.output_text.delta', (e) => { deltas += e.delta; });
  const final = await stream.finalResponse();
  assert.equal(deltas, full.output_text);
  assert.equal(final.output_text, full.output_text);
});

test('responses.parse with zodTextFormat returns a value zod accepts', async () => {
  const Order = z.object({
    count: z.number().int().min(1).max(9),
    price: z.number().positive().max(100),
    paid: z.boolean(),
    kind: z.enum(['book', 'toy']),
    id: z.string().uuid(),
    tags: z.array(z.string().max(4)).max(2),
  });
  const parsed = await openai.responses.parse({
    model,
    input: 'An order, please.',
    text: { format: zodTextFormat(Order, 'order') },
    max_output_tokens: 400,
    temperature: 0,
  });
  assert.ok(parsed.output_parsed, parsed.output_text);
  Order.parse(parsed.output_parsed);
});

test('zodResponseFormat with .email(), .url(), .datetime() and .int() is never a 400', async () => {
  const Contact = z.object({
    age: z.number().int(),
    email: z.string().email(),
    site: z.string().url(),
    seen: z.string().datetime(),
    score: z.number().nonnegative().multipleOf(0.5),
  });
  const res = await openai.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'A contact card.' }],
    response_format: zodResponseFormat(Contact, 'contact'),
    max_tokens: 40,
    temperature: 0,
  });
  assert.equal(res.object, 'chat.completion');
  assert.ok(res.choices[0].message.content.startsWith('{'), res.choices[0].message.content);
  // multipleOf cannot be enforced: the response says so.
  assert.ok(res.warnings.some((w) => w.includes("'multipleOf' is not enforced")), JSON.stringify(res.warnings));
});

test('a Responses tool loop and zodFunction on the tool-calling template', async () => {
  const Weather = z.object({ city: z.string().max(10), days: z.number().int().positive().max(7) });
  const fn = zodFunction({ name: 'get_weather', parameters: Weather });
  const tool = { type: 'function', name: fn.function.name, parameters: fn.function.parameters, strict: true };
  const first = await tools.responses.create({
    model,
    input: 'Weather in Paris for three days?',
    tools: [tool],
    tool_choice: 'required',
    parallel_tool_calls: false,
    max_output_tokens: 96,
    temperature: 0,
  });
  const call = first.output.find((item) => item.type === 'function_call');
  assert.ok(call, JSON.stringify(first.output));
  assert.equal(call.name, 'get_weather');
  Weather.parse(JSON.parse(call.arguments));
  const second = await tools.responses.create({
    model,
    previous_response_id: first.id,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temp_c": 21}' }],
    tools: [tool],
    max_output_tokens: 8,
    temperature: 0,
  });
  assert.ok(second.usage.input_tokens_details.cached_tokens > 0, JSON.stringify(second.usage));

  const chat = await tools.chat.completions.parse({
    model,
    messages: [{ role: 'user', content: 'Weather in Rome?' }],
    tools: [fn],
    tool_choice: 'required',
    parallel_tool_calls: false,
    max_tokens: 96,
    temperature: 0,
  });
  const parsed = chat.choices[0].message.tool_calls[0].function.parsed_arguments;
  Weather.parse(parsed);
});
