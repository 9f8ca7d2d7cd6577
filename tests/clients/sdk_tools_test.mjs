// Agents through the official SDKs against a preface server with a tool-calling template (Qwen3's: Hermes
// <tool_call> format): PREFACE_TOOLS_URL and PREFACE_MODEL. A 5-turn tool loop (call -> tool result -> call ...)
// in each SDK, odd turns streamed through the SDKs' own stream helpers, and a structured-output request in each.
// A random-weight model cannot choose to call a tool, so the loops force the call (tool_choice required / any);
// every call must name the tool and carry arguments valid under its schema. After turn 1, each turn's cached
// tokens must cover the whole previous prompt less at most one KV block: the tools and the conversation render
// byte-identically turn after turn. Run by run.sh with `node --test`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const url = process.env.PREFACE_TOOLS_URL;
const model = process.env.PREFACE_MODEL;
assert.ok(url && model, 'set PREFACE_TOOLS_URL and PREFACE_MODEL');

const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: url, apiKey: 'unused', maxRetries: 0 });

const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const system = 'You are a travel agent. Check the weather of every city on the route before answering.';
const question = 'Plan a five-stop trip through Europe and tell me the weather at each stop.';

// The arguments of a get_weather call, checked against weatherSchema by hand.
function checkWeatherArgs(args) {
  assert.deepEqual(Object.keys(args).sort(), ['city', 'unit'], JSON.stringify(args));
  assert.equal(typeof args.city, 'string');
  assert.ok([...args.city].length <= 12, args.city);
  assert.ok(['celsius', 'fahrenheit'].includes(args.unit), args.unit);
}

async function blockSize() {
  const res = await fetch(`${url}/v1/models`);
  return (await res.json()).data[0].meta.kv_block_size;
}

test('OpenAI SDK: a 5-turn tool loop reads each previous prompt from the cache', async () => {
  const block = await blockSize();
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Current weather', parameters: weatherSchema } }];
  const messages = [{ role: 'system', content: system }, { role: 'user', content: question }];
  let previousPrompt = 0;
  for (let turn = 0; turn < 5; turn++) {
    const request = { model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 128 };
    let completion;
    if (turn % 2 === 1) {
      const stream = openai.chat.completions.stream({ ...request, stream_options: { include_usage: true } });
      completion = await stream.finalChatCompletion();
    } else {
      completion = await openai.chat.completions.create(request);
    }
    const choice = completion.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', `turn ${turn}`);
    const message = choice.message;
    assert.equal(message.tool_calls.length, 1);
    const call = message.tool_calls[0];
    assert.match(call.id, /^call_/);
    assert.equal(call.function.name, 'get_weather');
    checkWeatherArgs(JSON.parse(call.function.arguments));
    const usage = completion.usage;
    if (turn > 0) {
      const cached = usage.prompt_tokens_details.cached_tokens;
      assert.ok(cached >= previousPrompt - block, `turn ${turn}: cached ${cached} of the previous ${previousPrompt}`);
    }
    previousPrompt = usage.prompt_tokens;
    messages.push({ role: 'assistant', content: message.content, tool_calls: message.tool_calls });
    messages.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: 18 + turn }) });
  }
});

test('Anthropic SDK: a 5-turn tool loop reads each previous prompt from the cache', async () => {
  const block = await blockSize();
  const tools = [{ name: 'get_weather', description: 'Current weather', input_schema: weatherSchema }];
  const messages = [{ role: 'user', content: question }];
  let previousPrompt = 0;
  for (let turn = 0; turn < 5; turn++) {
    const request = {
      model, system, messages, tools, max_tokens: 128, tool_choice: { type: 'any', disable_parallel_tool_use: true },
    };
    const message = turn % 2 === 1 ? await anthropic.messages.stream(request).finalMessage()
                                   : await anthropic.messages.create(request);
    assert.equal(message.stop_reason, 'tool_use', `turn ${turn}`);
    const uses = message.content.filter((b) => b.type === 'tool_use');
    assert.equal(uses.length, 1);
    assert.match(uses[0].id, /^toolu_/);
    assert.equal(uses[0].name, 'get_weather');
    checkWeatherArgs(uses[0].input);
    const u = message.usage;
    if (turn > 0) {
      const cached = u.cache_read_input_tokens;
      assert.ok(cached >= previousPrompt - block, `turn ${turn}: cached ${cached} of the previous ${previousPrompt}`);
    }
    previousPrompt = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens;
    messages.push({ role: 'assistant', content: message.content });
    messages.push({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: uses[0].id, content: JSON.stringify({ temperature: 18 + turn }) }],
    });
  }
});

const tripSchema = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 10 },
    days: { enum: [1, 2, 3] },
    rail: { type: 'boolean' },
  },
  required: ['city', 'days', 'rail'],
  additionalProperties: false,
};

function checkTrip(value) {
  assert.deepEqual(Object.keys(value).sort(), ['city', 'days', 'rail'], JSON.stringify(value));
  assert.ok([...value.city].length <= 10);
  assert.ok([1, 2, 3].includes(value.days));
  assert.equal(typeof value.rail, 'boolean');
}

test('OpenAI SDK: structured output with a json_schema response_format', async () => {
  const completion = await openai.chat.completions.create({
    model, max_tokens: 96,
    messages: [{ role: 'user', content: 'Suggest one city for a short trip.' }],
    response_format: { type: 'json_schema', json_schema: { name: 'trip', strict: true, schema: tripSchema } },
  });
  assert.equal(completion.choices[0].finish_reason, 'stop');
  checkTrip(JSON.parse(completion.choices[0].message.content));
});

test('Anthropic SDK: structured output with output_format', async () => {
  const message = await anthropic.messages.create({
    model, max_tokens: 96,
    messages: [{ role: 'user', content: 'Suggest one city for a short trip.' }],
    output_format: { type: 'json_schema', schema: tripSchema },
  });
  assert.equal(message.stop_reason, 'end_turn');
  checkTrip(JSON.parse(message.content[0].text));
});
