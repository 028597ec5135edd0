/**
 * The /docs page (@fastify/swagger-ui): its Content-Security-Policy, title, logo and favicon.
 *
 * The CSP is the plugin's strict default less `upgrade-insecure-requests`: the proxy is often opened over plain
 * HTTP on an address that is not localhost (the default bind is 0.0.0.0), and with that directive the browser fetches
 * every asset of the page over https and renders nothing. Everything the page loads comes from this server, so
 * `'self'` is the only source allowed (plus `data:` for the logo and fonts, and one hashed style, below).
 */
import { exportBodyExamples } from './schemas.js';
import { explainResponseExample } from './explain-example.js';
import { version } from '../process/version.js';

export const DOCS_CSP: Record<string, string> = {
  'default-src': "'self'",
  'base-uri': "'self'",
  'connect-src': "'self'",
  'font-src': "'self' data:",
  'form-action': "'self'",
  'frame-ancestors': "'self'",
  'img-src': "'self' data:",
  'object-src': "'none'",
  'script-src': "'self'",
  'script-src-attr': "'none'",
  // Plus the one <style> element Swagger UI renders itself, by the hash of its text (the browser test fails on any
  // CSP violation, so an update of @fastify/swagger-ui that changes it is caught).
  'style-src': "'self' 'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='",
};

export const DOCS_TITLE = 'cfgu API reference';

// The word "cfgu" on a dark plate, the height of Swagger UI's top bar.
const LOGO = Buffer.from(
  '<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40" viewBox="0 0 120 40">' +
    '<title>cfgu</title><rect width="120" height="40" rx="6" fill="#1f2933"/>' +
    '<text x="60" y="28" text-anchor="middle" font-family="Menlo,Consolas,monospace" font-size="24" font-weight="700" fill="#f5f7fa">cfgu</text>' +
    '</svg>',
);

const FAVICON = Buffer.from(
  '<svg xmlns="http://www.w3.org/2000/svg" width="32" height="32" viewBox="0 0 32 32">' +
    '<rect width="32" height="32" rx="6" fill="#1f2933"/>' +
    '<text x="16" y="23" text-anchor="middle" font-family="Menlo,Consolas,monospace" font-size="20" font-weight="700" fill="#f5f7fa">c</text>' +
    '</svg>',
);

/** The options of @fastify/swagger-ui for /docs. */
export function docsUiOptions() {
  return {
    routePrefix: '/docs',
    staticCSP: DOCS_CSP,
    theme: {
      title: DOCS_TITLE,
      favicon: [{ filename: 'favicon.svg', rel: 'icon', sizes: 'any', type: 'image/svg+xml', content: FAVICON }],
    },
    logo: { type: 'image/svg+xml', content: LOGO },
    uiConfig: { deepLinking: true, tryItOutEnabled: false, displayRequestDuration: true },
  };
}

/** The `info` object of the OpenAPI document. */
export const openapiInfo = {
  title: 'cfgu configuration proxy',
  version,
  description:
    'Evaluates Cfgu v1 configuration pipelines against the stores declared in the server\'s `.configu` and returns the resulting key-value object. Errors are RFC 9457 problem details (`application/problem+json`).',
  license: { name: 'Apache License 2.0', identifier: 'Apache-2.0' },
};

/**
 * The last touch on the generated OpenAPI document: the server is the one that serves it (a relative URL, so "Try it
 * out" calls the address /docs was opened on), and the request bodies of POST /export and POST /explain get their
 * named examples (a JSON Schema keyword of that name would trip the strict validator, so they are added here, to the
 * document only), and the explanation of POST /explain its example.
 */
export function finishOpenapi({ openapiObject }: { openapiObject: Record<string, any> }): Record<string, any> {
  openapiObject.servers = [{ url: '/', description: 'This server' }];
  for (const path of ['/export', '/explain']) {
    const media = openapiObject.paths?.[path]?.post?.requestBody?.content?.['application/json'];
    if (media) {
      delete media.example;
      media.examples = exportBodyExamples;
    }
  }
  // Added here too: the generator turns every `const` key below a schema into `enum` (OpenAPI 3.0's spelling), the
  // `const` members of an explanation included.
  const explained = openapiObject.paths?.['/explain']?.post?.responses?.['200']?.content?.['application/json']?.schema;
  if (explained) explained.examples = [explainResponseExample];
  return openapiObject;
}
