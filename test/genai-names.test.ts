// The GenAI semantic-convention names the metrics and traces label with.
import t from 'tap';
import { operationName, providerName } from '../src/genai-names.js';

t.test('built-in families and endpoints get the conventions\' names', async (t) => {
  t.equal(providerName('google'), 'gcp.gemini');
  t.equal(providerName('bedrock'), 'aws.bedrock');
  t.equal(providerName('azure'), 'azure.ai.openai');
  t.equal(operationName('chat_completions'), 'chat');
  t.equal(operationName('images_generations'), 'generate_content');
});

t.test('any other name is its own, Object.prototype members included', async (t) => {
  for (const name of ['cohere', 'constructor', 'toString', '__proto__', 'hasOwnProperty', '']) {
    t.equal(providerName(name), name, `family ${JSON.stringify(name)}`);
    t.equal(operationName(name), name, `endpoint ${JSON.stringify(name)}`);
  }
});
