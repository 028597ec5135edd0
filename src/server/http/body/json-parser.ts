/**
 * Request bodies: JSON only (anything else is 415), in UTF-8 (a body declared in another charset is 415), nesting
 * at most MAX_BODY_NESTING levels (./body-depth.ts, checked before anything is parsed), parsed by Fastify's own
 * JSON parser with its prototype-poisoning guard (`__proto__`, `constructor.prototype`: 400 saying so), and kept
 * deep-frozen in the body cache (./body-cache.ts) so that the same text sent again is not parsed again.
 */
import { errorCodes } from 'fastify';
import fp from 'fastify-plugin';
import { BodyRefusedError, ErrorCodes, LimitError } from '../../../core/errors.js';
import type { BodyCache } from './body-cache.js';
import { MAX_BODY_NESTING, nestsDeeperThan } from './body-depth.js';
import { BodyParseError, LARGE_BODY, parseLargeBody } from './body-parse.js';

export const jsonBodies = fp<{ bodies: BodyCache }>(async (app, { bodies }) => {
  // JSON only: drop the built-in text/plain parser so anything but JSON is 415. The default JSON parser keeps its
  // prototype-poisoning protection.
  app.removeAllContentTypeParsers();
  const defaultJsonParser = app.getDefaultJsonParser('error', 'error');
  app.addHook('onClose', async () => bodies.unregister());
  // Fastify reports every parser failure as "invalid JSON". When the text is valid JSON after all, the failure was the
  // prototype-poisoning guard (`__proto__`, `constructor.prototype`): say so (only this error path pays the re-parse).
  const jsonParser: typeof defaultJsonParser = (request, body, done) => {
    // JSON is UTF-8 (RFC 8259); a body declared in another charset would be misread, so it is refused.
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(request.headers['content-type'] ?? '')?.[1]?.toLowerCase();
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      return done(new BodyRefusedError(ErrorCodes.UNSUPPORTED_CHARSET), undefined);
    }
    const cached = typeof body === 'string' ? bodies.get(body) : undefined;
    if (cached !== undefined) return done(null, cached);
    // Refused before any object is made: parsing, checking and freezing grow with the nesting (body-depth.ts).
    if (typeof body === 'string' && nestsDeeperThan(body, MAX_BODY_NESTING)) {
      return done(new LimitError(`the request body nests more than ${MAX_BODY_NESTING} arrays or objects inside one another; the limit is ${MAX_BODY_NESTING}`), undefined);
    }
    if (typeof body === 'string' && body.length > LARGE_BODY) {
      // Parsed and frozen in slices of the event loop, so that no other request waits for it (body-parse.ts).
      parseLargeBody(body, defaultJsonParser, request)
        .then((value) => bodies.addInSlices(body, value))
        .then(
          (value) => done(null, value),
          (e) =>
            done(
              e instanceof BodyParseError
                ? e.kind === 'forbidden'
                  ? new BodyRefusedError(ErrorCodes.FORBIDDEN_PROPERTY)
                  : new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY()
                : e,
              undefined,
            ),
        );
      return;
    }
    defaultJsonParser(request, body, (error, value) => {
      if (error && typeof body === 'string' && isJson(body)) {
        return done(new BodyRefusedError(ErrorCodes.FORBIDDEN_PROPERTY), undefined);
      }
      done(error, error || typeof body !== 'string' ? value : bodies.add(body, value));
    });
  };
  app.addContentTypeParser('application/json', { parseAs: 'string' }, jsonParser);
  app.addContentTypeParser(/^application\/[a-z0-9.+-]+\+json\s*(;|$)/i, { parseAs: 'string' }, jsonParser);
});

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false; // really malformed
  }
}
