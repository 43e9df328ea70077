// Drives a running `ENGINE serve` with the official OpenAI Node.js SDK (npm "openai", installed by setup.sh into
// .cache/node_modules), unchanged: the SDK's own request building, response parsing, SSE stream reader and error
// classes. Usage: node openai_sdk_client.cjs <path to the openai package> <base URL, e.g. http://127.0.0.1:PORT/v1> <model>
// Prints one JSON line of what it saw; exits 1 with a message on the first expectation that fails.
'use strict';
const [sdkPath, baseURL, model] = process.argv.slice(2);
const OpenAI = require(sdkPath);

function expect(cond, what) {
  if (!cond) {
    console.error('openai_sdk_client: expectation failed: ' + what);
    process.exit(1);
  }
}

(async () => {
  const client = new OpenAI({ baseURL, apiKey: 'not-needed', maxRetries: 0, timeout: 120000 });
  const seen = {};

  const models = await client.models.list();
  expect(models.data.some((m) => m.id === model), 'models.list() contains ' + model);
  seen.models = models.data.map((m) => m.id);

  const completion = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 8, temperature: 0 });
  expect(completion.object === 'text_completion', 'completion object');
  expect(typeof completion.choices[0].text === 'string', 'completion text');
  expect(completion.usage.completion_tokens >= 1 && completion.usage.completion_tokens <= 8, 'completion usage');
  seen.completion = completion.choices[0].text;

  const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hello.' }];
  const chat = await client.chat.completions.create({ model, messages, max_completion_tokens: 12, temperature: 0 });
  expect(chat.object === 'chat.completion', 'chat object');
  expect(chat.choices[0].message.role === 'assistant', 'assistant role');
  expect(['stop', 'length'].includes(chat.choices[0].finish_reason), 'finish_reason');
  seen.chat = chat.choices[0].message.content;

  // The same greedy request streamed: the deltas concatenate to the same content; the usage chunk comes last.
  const stream = await client.chat.completions.create({
    model, messages, max_completion_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let content = '';
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta && choice.delta.content) content += choice.delta.content;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  expect(content === chat.choices[0].message.content, 'streamed content equals the non-streamed content');
  expect(usage && usage.completion_tokens === chat.usage.completion_tokens, 'usage chunk');
  expect(finish === chat.choices[0].finish_reason, 'streamed finish_reason');
  seen.streamed = content;

  // Errors arrive as the SDK's error classes with the HTTP status.
  try {
    await client.chat.completions.create({ model: 'no-such-model', messages, max_tokens: 2 });
    expect(false, 'unknown model refused');
  } catch (e) {
    expect(e instanceof OpenAI.NotFoundError, 'unknown model -> NotFoundError, got ' + e);
  }
  try {
    await client.completions.create({ model, prompt: 'x', max_tokens: 2, temperature: 7 });
    expect(false, 'bad temperature refused');
  } catch (e) {
    expect(e instanceof OpenAI.BadRequestError, 'bad temperature -> BadRequestError, got ' + e);
    expect(e.param === 'temperature' || (e.error && e.error.param === 'temperature'), 'error names the field');
  }
  console.log(JSON.stringify(seen));
})().catch((e) => {
  console.error('openai_sdk_client: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
