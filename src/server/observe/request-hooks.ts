/**
 * The request hooks of metrics and traces. Registered before the app's other hooks, so that every answer is counted
 * and traced, refusals included. Traced: a SERVER span per request the sampler keeps, named by method and route
 * pattern, under the parent the request's `traceparent` names; ended when the answer is sent (with its status), or
 * when the client aborts. Counted: every answer, by route pattern (never the raw path), method and status.
 */
import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, propagation, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';
import type { ServerMetrics } from './metrics.js';

/** A request whose trace is kept (the hooks decorate every request with `cfguTrace` when traces are on). */
export type TracedRequest = FastifyRequest & { cfguTrace: { span: Span; ctx: Context } | null };

export interface RequestHooksOptions {
  tracer: Tracer | undefined;
  metrics: ServerMetrics | undefined;
}

export const observeRequests = fp<RequestHooksOptions>(async (app, { tracer, metrics }) => {
  if (tracer) {
    app.decorateRequest('cfguTrace', null);
    app.addHook('onRequest', (request, _reply, done) => {
      const parent = propagation.extract(ROOT_CONTEXT, request.headers);
      const route = request.routeOptions.url;
      const span = tracer.startSpan(
        `${request.method} ${route ?? 'unmatched'}`,
        { kind: SpanKind.SERVER, attributes: { 'http.request.method': request.method, ...(route ? { 'http.route': route } : {}) } },
        parent,
      );
      // Left out by the sampler: nothing is kept, and the request runs on the shared engine.
      if (span.isRecording()) (request as TracedRequest).cfguTrace = { span, ctx: trace.setSpan(parent, span) };
      done();
    });
    app.addHook('onRequestAbort', (request, done) => {
      const s = (request as TracedRequest).cfguTrace;
      if (s) {
        s.span.setStatus({ code: SpanStatusCode.ERROR, message: 'client aborted' });
        s.span.end();
        (request as TracedRequest).cfguTrace = null;
      }
      done();
    });
  }
  if (!metrics && !tracer) return;
  app.addHook('onResponse', (request, reply, done) => {
    const status = reply.statusCode;
    metrics?.request(request.routeOptions.url ?? 'none', request.method, status, reply.elapsedTime / 1000);
    if (metrics && request.cfguWrite) metrics.write(request.cfguWrite.route, request.cfguWrite.outcome);
    const s = (request as TracedRequest).cfguTrace;
    if (s) {
      s.span.setAttribute('http.response.status_code', status);
      if (status >= 500) s.span.setStatus({ code: SpanStatusCode.ERROR });
      s.span.end();
      (request as TracedRequest).cfguTrace = null;
    }
    done();
  });
});
