// Drives `peregrine serve` with the official `openai` npm package: completion, chat
// completion, streaming (equal to the non-streaming greedy text, ending in data: [DONE]),
// errors (400 BadRequestError naming the param, 404 NotFoundError), models.list().
// Usage: node openai_client.mjs PEREGRINE_BINARY NPM_PREFIX   (exit 0 = pass)
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
import path from 'node:path';

const [binary, npmPrefix] = process.argv.slice(2);
const OpenAI = createRequire(path.resolve(npmPrefix, 'noop.js'))('openai').default;

/** Starts the server on a free port; resolves with its base URL once it is listening. */
function startServer() {
  const child = spawn(binary, ['serve', '--port', '0', '--ctx', '256', '--api-key', 'test-key'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const url = new Promise((resolve, reject) => {
    child.stderr.on('data', (d) => {
      log += d;
      const m = /listening on (http:\/\/\S+)/.exec(log);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`serve exited (${code}) before listening:\n${log}`)));
    setTimeout(() => reject(new Error(`serve did not start in 60 s:\n${log}`)), 60000).unref();
  });
  return { child, url, log: () => log };
}

async function main() {
  const server = startServer();
  const baseURL = `${await server.url}/v1`;
  const client = new OpenAI({ baseURL, apiKey: 'test-key', maxRetries: 0 });
  const model = 'stories260K';
  try {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), [model]);

    const prompt = 'Once upon a time';
    const completion = await client.completions.create({ model, prompt, max_tokens: 32, temperature: 0 });
    assert.equal(completion.object, 'text_completion');
    const text = completion.choices[0].text;
    assert.ok(text.length > 0, 'empty completion');
    assert.ok(['stop', 'length'].includes(completion.choices[0].finish_reason));
    assert.equal(completion.usage.total_tokens, completion.usage.prompt_tokens + completion.usage.completion_tokens);

    let streamed = '';
    let finish = null;
    for await (const chunk of await client.completions.create({ model, prompt, max_tokens: 32, temperature: 0, stream: true })) {
      streamed += chunk.choices[0]?.text ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(streamed, text, 'streamed text differs from the non-streaming greedy text');
    assert.equal(finish, completion.choices[0].finish_reason);

    const raw = await fetch(`${baseURL}/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: 'Bearer test-key' },
      body: JSON.stringify({ model, prompt, max_tokens: 8, temperature: 0, stream: true }),
    });
    assert.equal(raw.headers.get('content-type').split(';')[0], 'text/event-stream');
    assert.ok((await raw.text()).endsWith('data: [DONE]\n\n'), 'the stream does not end with data: [DONE]');

    const messages = [
      { role: 'system', content: 'You tell short stories.' },
      { role: 'user', content: 'Tell me about a cat.' },
    ];
    const chat = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
    assert.equal(chat.object, 'chat.completion');
    assert.equal(chat.choices[0].message.role, 'assistant');
    assert.equal(typeof chat.choices[0].message.content, 'string');
    assert.ok(chat.usage.prompt_tokens > 10);

    let chatStreamed = '';
    let role = null;
    for await (const chunk of await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0, stream: true })) {
      role ??= chunk.choices[0]?.delta?.role ?? null;
      chatStreamed += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.equal(role, 'assistant');
    assert.equal(chatStreamed, chat.choices[0].message.content);

    await assert.rejects(client.completions.create({ model, prompt, temperature: 5 }), (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `expected BadRequestError, got ${err}`);
      assert.equal(err.status, 400);
      assert.equal(err.param, 'temperature');
      return true;
    });
    await assert.rejects(client.completions.create({ model: 'gpt-4', prompt }), (err) => {
      assert.ok(err instanceof OpenAI.NotFoundError, `expected NotFoundError, got ${err}`);
      assert.equal(err.code, 'model_not_found');
      return true;
    });
    const noKey = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(noKey.models.list(), OpenAI.AuthenticationError);
  } finally {
    const exited = new Promise((resolve) => server.child.on('exit', (code) => resolve(code)));
    server.child.kill('SIGTERM');
    assert.equal(await exited, 0, `serve did not exit 0 on SIGTERM:\n${server.log()}`);
  }
  console.log('openai client: all checks passed');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
