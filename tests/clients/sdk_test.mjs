// The official SDKs against a preface server: PREFACE_URL (e.g. http://127.0.0.1:8080) and PREFACE_MODEL (the
// model id the server reports). Run by run.sh with `node --test`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const url = process.env.PREFACE_URL;
const model = process.env.PREFACE_MODEL;
assert.ok(url && model, 'set PREFACE_URL and PREFACE_MODEL');

const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: url, apiKey: 'unused', maxRetries: 0 });

// A prompt no other test uses, long enough to span several KV blocks.
const story = (tag) =>
  `Story ${tag}. Once upon a time, there was a little girl named Lily. She loved to play outside in the park ` +
  'with her friends. One day, she saw a big red ball under a tree. She wanted to play with it, but it was too ' +
  'high. Lily asked her mom for help, and they found a long stick and pushed the ball down.';

test('models.list reports the served model', async () => {
  const ids = [];
  for await (const m of openai.models.list()) ids.push(m.id);
  assert.deepEqual(ids, [model]);
});

test('chat completion, then the same request streamed gives the same text', async () => {
  const request = {
    model,
    messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: story('chat') }],
    max_tokens: 16,
    temperature: 0,
  };
  const full = await openai.chat.completions.create(request);
  assert.equal(full.object, 'chat.completion');
  assert.equal(full.choices[0].message.role, 'assistant');
  const text = full.choices[0].message.content;
  assert.ok(text.length > 0);
  assert.equal(full.choices[0].finish_reason, 'length');
  assert.equal(full.usage.completion_tokens, 16);
  assert.equal(full.usage.total_tokens, full.usage.prompt_tokens + 16);

  const stream = await openai.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  let streamed = '';
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices.length > 0) {
      streamed += chunk.choices[0].delta.content ?? '';
      finish = chunk.choices[0].finish_reason ?? finish;
    }
  }
  assert.equal(streamed, text);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 16);
  assert.equal(usage.prompt_tokens, full.usage.prompt_tokens);
  // The streamed request repeated the prompt: all of it but the last token or block came from the cache.
  assert.ok(usage.prompt_tokens_details.cached_tokens >= usage.prompt_tokens - 16, JSON.stringify(usage));
});

test('usage reports cached tokens for a repeated prefix', async () => {
  const prompt = story('completions');
  const first = await openai.completions.create({ model, prompt, max_tokens: 4, temperature: 0 });
  // Only a few leading tokens (BOS, ...) can be shared with earlier tests' prompts.
  assert.ok(first.usage.prompt_tokens_details.cached_tokens < 16);
  assert.ok(first.usage.prompt_tokens_details.cache_write_tokens > 0);
  const second = await openai.completions.create({ model, prompt: prompt + ' The end.', max_tokens: 4, temperature: 0 });
  const cached = second.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached >= first.usage.prompt_tokens - 16, `cached ${cached} of ${second.usage.prompt_tokens}`);
  assert.ok(cached < second.usage.prompt_tokens);
});

test('OpenAI errors surface as SDK errors with the status', async () => {
  await assert.rejects(
    openai.chat.completions.create({ model, temperature: 5, messages: [{ role: 'user', content: 'hi' }] }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400,
  );
});

test('a client-side model name such as gpt-4o reaches the one model, which reports its own name', async () => {
  const r = await openai.chat.completions.create({ model: 'gpt-4o', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(r.model, model);
});

test('Anthropic messages with cache_control: a cache write, then a cache read', async () => {
  const request = {
    model,
    max_tokens: 12,
    temperature: 0,
    system: [{ type: 'text', text: story('anthropic'), cache_control: { type: 'ephemeral', ttl: '5m' } }],
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Tell me what happened next.' }] }],
  };
  const first = await anthropic.messages.create(request);
  assert.equal(first.type, 'message');
  assert.equal(first.content[0].type, 'text');
  assert.equal(first.stop_reason, 'max_tokens');
  const u1 = first.usage;
  const n_prompt = u1.input_tokens + u1.cache_creation_input_tokens + u1.cache_read_input_tokens;
  assert.ok(u1.cache_creation_input_tokens > n_prompt / 2, JSON.stringify(u1));
  // Earlier tests' prompts can share the chat template's opening, nothing more.
  assert.ok(u1.cache_read_input_tokens < 32, JSON.stringify(u1));

  const second = await anthropic.messages.create(request);
  const u2 = second.usage;
  assert.equal(u2.input_tokens + u2.cache_creation_input_tokens + u2.cache_read_input_tokens, n_prompt);
  assert.ok(u2.cache_read_input_tokens >= u1.cache_read_input_tokens + u1.cache_creation_input_tokens, JSON.stringify(u2));
  assert.equal(u2.cache_creation_input_tokens, 0, JSON.stringify(u2));
  assert.equal(second.content[0].text, first.content[0].text);

  // Streamed through the SDK's MessageStream: same text, final usage from message_delta.
  const stream = anthropic.messages.stream(request);
  let streamed = '';
  stream.on('text', (t) => {
    streamed += t;
  });
  const final = await stream.finalMessage();
  assert.equal(streamed, first.content[0].text);
  assert.equal(final.content[0].text, first.content[0].text);
  assert.ok(final.usage.cache_read_input_tokens >= u1.cache_creation_input_tokens, JSON.stringify(final.usage));
  assert.equal(final.usage.output_tokens, 12);
});

test('Anthropic errors surface as SDK errors with the status', async () => {
  await assert.rejects(
    anthropic.messages.create({ model, max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'x' } }] }] }),
    (e) => e instanceof Anthropic.BadRequestError && e.status === 400,
  );
});
