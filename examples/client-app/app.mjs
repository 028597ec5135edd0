// An application that takes its settings from a cfgu server with cfgu/client (docs/clients.md, "A complete example").
// It reads its settings once at start (from the last good answer file when the server cannot be reached), then
// follows their changes until SIGTERM or SIGINT, printing one line per state it runs with. Run it beside the quick
// start's server (`npm start` in the repository, or `npx cfgu serve` in a copy of the package's examples folder):
//
//   node examples/client-app/app.mjs
//
// Environment: CFGU_URL (default http://localhost:8080), CFGU_TOKEN (when the server asks for one), APP_SET (default
// production/eu), APP_CACHE_FILE (default .app-settings.json in the working folder).
import { createClient, CfguClientError } from 'cfgu/client';

/** The settings this application needs, checked before it uses them (a generated validator does the same job). */
function checkSettings(values) {
  const problems = [];
  if (typeof values !== 'object' || values === null) throw new TypeError('the settings are not an object');
  for (const key of ['API_HOST', 'REGION', 'LOG_LEVEL']) if (typeof values[key] !== 'string') problems.push(`${key} is not a string`);
  if (problems.length) throw new TypeError(problems.join('; '));
  return { apiHost: values.API_HOST, region: values.REGION, logLevel: values.LOG_LEVEL };
}

const client = createClient({
  url: process.env.CFGU_URL ?? 'http://localhost:8080',
  ...(process.env.CFGU_TOKEN ? { token: process.env.CFGU_TOKEN } : {}),
  pipeline: [
    {
      store: 'example',
      set: process.env.APP_SET ?? 'production/eu',
      schema: { keys: { API_HOST: { required: true }, REGION: { default: 'us-east-1' }, LOG_LEVEL: { default: 'info' } } },
    },
  ],
  cacheFile: process.env.APP_CACHE_FILE ?? '.app-settings.json',
  validate: checkSettings,
  reconnect: { initialDelayMs: 200, maxDelayMs: 5000 },
});

/** What the application does with its settings: here, say which ones it runs with. */
function run(answer, why) {
  const s = answer.values;
  console.log(`${why}: api ${s.apiHost}, region ${s.region}, log level ${s.logLevel}${answer.stale ? ' (stale: the server could not be reached)' : ''}`);
}

try {
  run(await client.get(), 'started');
} catch (error) {
  // No answer from the server and none kept in the file, or a refusal (401, 403, 422): say why, in one line.
  if (!(error instanceof CfguClientError)) throw error;
  console.error(`cannot start: ${error.title} (${error.status}, ${error.type}): ${error.detail}`);
  process.exit(1);
}

const subscription = client.subscribe(
  (answer) => run(answer, 'changed'),
  (error) => console.error(`cfgu: ${error.title} (${error.status}): ${error.detail}`),
);
for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => subscription.close());
const ended = await subscription.closed;
if (ended) console.error(`stopped following the settings: ${ended.detail}`);
console.log('stopped');
process.exit(ended ? 1 : 0);
