// The `ollama` npm client against a preface server (Ollama's /api/*): chat and generate, streamed and not,
// list, show, ps, version, an error surfacing as the client's ResponseError with the server's message, and a
// tool call on the tool-calling server. PREFACE_URL, PREFACE_TOOLS_URL and PREFACE_MODEL as for sdk_test.mjs.
// Run by run.sh with `node --test`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Ollama } from 'ollama';

const url = process.env.PREFACE_URL;
const toolsUrl = process.env.PREFACE_TOOLS_URL;
const model = process.env.PREFACE_MODEL;
assert.ok(url && toolsUrl && model, 'set PREFACE_URL, PREFACE_TOOLS_URL and PREFACE_MODEL');

const ollama = new Ollama({ host: url });

test('ollama chat, streamed and not, give the same text; the repeat reads the prompt from the cache', async () => {
  const request = {
    model,
    messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'A story about a kite.' }],
    options: { num_predict: 12, temperature: 0 },
  };
  const whole = await ollama.chat({ ...request, stream: false });
  assert.equal(whole.done, true);
  assert.equal(whole.done_reason, 'length');
  assert.equal(whole.eval_count, 12);
  assert.ok(whole.message.content.length > 0);
  let streamed = '';
  let last = null;
  for await (const part of await ollama.chat({ ...request, stream: true })) {
    streamed += part.message.content;
    last = part;
  }
  assert.equal(streamed, whole.message.content);
  assert.equal(last.done, true);
  assert.ok(last.prompt_cached_count > 0, JSON.stringify(last));
});

test('ollama generate, list, show, ps and version', async () => {
  const gen = await ollama.generate({ model, prompt: 'Once upon a time', raw: true, stream: false,
                                      options: { num_predict: 6, temperature: 0 } });
  assert.equal(gen.done, true);
  assert.ok(gen.response.length > 0);
  const list = await ollama.list();
  assert.equal(list.models.length, 1);
  const show = await ollama.show({ model: list.models[0].name });
  assert.ok(show.capabilities.includes('completion'));
  const ps = await ollama.ps();
  assert.ok(ps.models[0].context_length > 0);
  const version = await ollama.version();
  assert.ok(version.version.length > 0);
});

test('an ollama error carries the server message', async () => {
  await assert.rejects(
    ollama.chat({ model, messages: [{ role: 'user', content: 'x' }], options: { mirostat: 2 } }),
    (e) => e.name === 'ResponseError' && e.status_code === 400 && e.error.includes('options.mirostat'));
});

test('ollama tools on the tool-calling template', async () => {
  const tools = new Ollama({ host: toolsUrl });
  const res = await tools.chat({
    model,
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
    tools: [{ type: 'function', function: { name: 'get_weather', description: 'The weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 10 } }, required: ['city'] } } }],
    options: { num_predict: 48, temperature: 0 },
    stream: false,
  });
  assert.equal(res.done, true);
  // A random-weight model need not call; when it does, the call is read back as Ollama writes it.
  for (const call of res.message.tool_calls ?? []) {
    assert.equal(call.function.name, 'get_weather');
    assert.equal(typeof call.function.arguments, 'object');
  }
});
