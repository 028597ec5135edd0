/**
 * What the app wires in to be seen from outside: Prometheus metrics (./metrics.ts) and OpenTelemetry traces
 * (./tracing.ts). `createObservation` wraps the stores and the sandbox (timings, outcomes, spans), gives the engine its
 * observer (a span per command), and `install` adds the request hooks and `GET /metrics`. With metrics and traces both
 * off, nothing is wrapped and no hook is added.
 *
 * `GET /metrics` (and HEAD) answers in the Prometheus text format. With a metrics key set, it takes exactly that key
 * (`Authorization: Bearer <key>`) and no other; without one, it follows the server's authentication like every other
 * route. Nothing in a metric or a span is a value: labels and attributes are route patterns, methods, statuses, store
 * names, rules and counts.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { CfguError, ValidationError } from '../core/errors.js';
import type { EngineObserver } from '../core/ports.js';
import type { EvalCommandInput } from '../core/types.js';
import type { ExpressionEvaluator, ExpressionJob, ExpressionResult, RunContext } from '../expressions/types.js';
import type { Config, ConfigQuery, ResolvedStore, StoreResolver } from '../stores/types.js';
import { createKeyChecker } from './auth.js';
import { ServerMetrics, useWorkerMetrics, type SandboxState, type StoreState } from './metrics.js';
import { PROBLEM_CONTENT_TYPE, PROBLEM_TYPES, httpProblem, problem } from './problem.js';
import type { ServerSettings } from './settings.js';
import { activeTracer, commandSpans, inSpan } from './tracing.js';

export interface ObservationInput {
  settings: ServerSettings;
  stores: StoreResolver;
  evaluator?: ExpressionEvaluator;
  bodyCache?: { hits: number; misses: number };
  /** Watch requests held open (SSE streams plus long polls). */
  watchers?: () => number;
}

export interface Observation {
  /** The stores as the engine should use them (wrapped when observed). */
  readonly stores: StoreResolver;
  readonly evaluator: ExpressionEvaluator | undefined;
  /** Given to the engine: a span per command (traces on only). */
  readonly observer: EngineObserver | undefined;
  /** Routes this module serves, with their methods (for 404/405). */
  readonly routes: Record<string, string[]>;
  /** True when `path` is served with its own key, so the server's bearer keys do not apply to it. */
  ownKey(path: string): boolean;
  /** Add the request hooks. Call before the app's own hooks, so every answer is counted and traced. */
  install(app: FastifyInstance): void;
  /** Add GET /metrics (with the other routes). */
  addRoutes(app: FastifyInstance): void;
  /** Evaluate one pipeline of `request`: counted and timed, and run inside the request's span. */
  evaluate<T>(request: FastifyRequest, commands: readonly EvalCommandInput[], run: () => Promise<T>): Promise<T>;
}

const now = (): number => performance.now();

/** `ok`, or the error code without its prefix (`validation_failed`, `store_unavailable`, ...), or `error`. */
const outcomeOf = (e: unknown): string => (e instanceof CfguError ? e.code.replace(/^CFGU_/, '').toLowerCase() : 'error');

function keysOf(commands: readonly EvalCommandInput[]): number {
  let n = 0;
  for (const c of commands) {
    const keys = (c as { schema?: { keys?: unknown } } | null)?.schema?.keys;
    if (keys && typeof keys === 'object') for (const _ in keys) n++;
  }
  return n;
}

export function createObservation(input: ObservationInput): Observation {
  const { settings } = input;
  const tracer = activeTracer();
  const metrics = settings.metrics.enabled
    ? new ServerMetrics({
        sandbox: isSandbox(input.evaluator) ? input.evaluator : undefined,
        stores: hasStatus(input.stores) ? input.stores : undefined,
        bodyCache: input.bodyCache,
        ...(input.watchers ? { watchers: input.watchers } : {}),
      })
    : undefined;
  if (metrics) useWorkerMetrics(metrics);
  const metricsKey = settings.metrics.enabled && settings.metrics.key ? createKeyChecker([settings.metrics.key]) : undefined;

  const routes: Record<string, string[]> = metrics ? { '/metrics': ['GET', 'HEAD'] } : {};
  const observed = !!(metrics || tracer);
  const spans = new WeakMap<FastifyRequest, { span: Span; ctx: Context }>();

  const observation: Observation = {
    stores: observed ? observeStores(input.stores, metrics, tracer) : input.stores,
    evaluator: observed && input.evaluator ? observeEvaluator(input.evaluator, metrics, tracer) : input.evaluator,
    observer: tracer ? commandSpans(tracer) : undefined,
    routes,
    ownKey: (path) => !!metricsKey && path === '/metrics',

    install(app) {
      if (tracer) {
        app.addHook('onRequest', (request, _reply, done) => {
          const parent = propagation.extract(ROOT_CONTEXT, request.headers);
          const route = request.routeOptions.url;
          const span = tracer.startSpan(
            `${request.method} ${route ?? 'unmatched'}`,
            { kind: SpanKind.SERVER, attributes: { 'http.request.method': request.method, ...(route ? { 'http.route': route } : {}) } },
            parent,
          );
          spans.set(request, { span, ctx: trace.setSpan(parent, span) });
          done();
        });
        app.addHook('onRequestAbort', (request, done) => {
          const s = spans.get(request);
          if (s) {
            s.span.setStatus({ code: SpanStatusCode.ERROR, message: 'client aborted' });
            s.span.end();
            spans.delete(request);
          }
          done();
        });
      }
      app.addHook('onResponse', (request, reply, done) => {
        const status = reply.statusCode;
        metrics?.request(request.routeOptions.url ?? 'none', request.method, status, reply.elapsedTime / 1000);
        const s = spans.get(request);
        if (s) {
          s.span.setAttribute('http.response.status_code', status);
          if (status >= 500) s.span.setStatus({ code: SpanStatusCode.ERROR });
          s.span.end();
          spans.delete(request);
        }
        done();
      });
    },

    addRoutes(app) {
      if (!metrics) return;
      const unauthorized = JSON.stringify(
        problem(401, PROBLEM_TYPES.unauthorized, 'Unauthorized', 'a valid metrics key is required (Authorization: Bearer <key>)'),
      );
      const unavailable = JSON.stringify(httpProblem(503, 'the metrics of the other workers could not be collected; retry'));
      const scrape = async (request: FastifyRequest, reply: FastifyReply) => {
        reply.header('cache-control', 'no-store');
        if (metricsKey && !metricsKey.check(request.headers.authorization)) {
          return reply.code(401).header('www-authenticate', 'Bearer realm="cfgu-metrics"').type(PROBLEM_CONTENT_TYPE).send(unauthorized);
        }
        let text: string;
        try {
          text = await metrics.text();
        } catch {
          return reply.code(503).header('retry-after', '1').type(PROBLEM_CONTENT_TYPE).send(unavailable);
        }
        return reply.type(metrics.contentType).send(text);
      };
      app.get('/metrics', { schema: { hide: true } }, scrape);
    },

    evaluate(request, commands, run) {
      const s = spans.get(request);
      const go = s ? () => context.with(s.ctx, run) : run;
      if (!metrics) return go();
      const started = now();
      metrics.evaluationCommands.observe(commands.length);
      metrics.evaluationKeys.observe(keysOf(commands));
      return go().then(
        (v) => {
          metrics.evaluation('ok', (now() - started) / 1000);
          return v;
        },
        (e: unknown) => {
          metrics.evaluation(outcomeOf(e), (now() - started) / 1000);
          if (e instanceof ValidationError) for (const f of e.failures) metrics.failures.inc({ rule: f.rule });
          throw e;
        },
      );
    },
  };
  return observation;
}

const isSandbox = (e: unknown): e is SandboxState & ExpressionEvaluator =>
  !!e && typeof (e as SandboxState).pids === 'function' && typeof (e as SandboxState).replacements === 'function';

const hasStatus = (s: unknown): s is StoreResolver & StoreState => typeof (s as StoreState).status === 'function';

/** Each resolved store wrapped once (by identity): reads and writes timed, counted and traced. */
function observeStores(stores: StoreResolver, metrics: ServerMetrics | undefined, tracer: Tracer | undefined): StoreResolver {
  const wrapped = new Map<ResolvedStore, ResolvedStore>();
  const wrap = (store: ResolvedStore): ResolvedStore => {
    const attributes = { 'cfgu.store.name': store.name, 'cfgu.store.type': store.type };
    const recorder = metrics?.store(store.name);
    const finish = (operation: 'read' | 'write', outcome: 'ok' | 'backup' | 'error', started: number) => recorder?.(operation, outcome, (now() - started) / 1000);
    const read = async (queries: readonly ConfigQuery[], span?: Span) => {
      const started = now();
      try {
        const answer = await store.read(queries);
        finish('read', answer.fromBackup ? 'backup' : 'ok', started);
        span?.setAttribute('cfgu.store.from_backup', answer.fromBackup);
        return answer;
      } catch (e) {
        finish('read', 'error', started);
        throw e;
      }
    };
    const write = async (configs: readonly Config[]) => {
      const started = now();
      try {
        await store.write(configs);
        finish('write', 'ok', started);
      } catch (e) {
        finish('write', 'error', started);
        throw e;
      }
    };
    return {
      name: store.name,
      type: store.type,
      read: tracer
        ? (queries) => inSpan(tracer, 'cfgu.store.read', { ...attributes, 'cfgu.store.queries': queries.length }, (span) => read(queries, span))
        : (queries) => read(queries),
      write: tracer ? (configs) => inSpan(tracer, 'cfgu.store.write', { ...attributes, 'cfgu.store.configs': configs.length }, () => write(configs)) : write,
    };
  };
  return {
    names: () => stores.names(),
    resolve(name) {
      const store = stores.resolve(name);
      let w = wrapped.get(store);
      if (!w) {
        w = wrap(store);
        wrapped.set(store, w);
      }
      return w;
    },
  };
}

/** The sandbox with its jobs timed, counted and traced; everything else passes through. */
function observeEvaluator(evaluator: ExpressionEvaluator, metrics: ServerMetrics | undefined, tracer: Tracer | undefined): ExpressionEvaluator {
  const expressionsOf = (job: ExpressionJob) => {
    let n = job.consts.length;
    for (const t of job.tests) n += t.expressions.length;
    return n;
  };
  const record = (job: ExpressionJob, result: ExpressionResult | undefined, started: number) => {
    if (!metrics) return;
    metrics.sandboxJobDuration.observe((now() - started) / 1000);
    metrics.expressions.inc(expressionsOf(job));
    if (!result) return;
    for (const o of [...result.consts, ...result.tests]) {
      if (o.ok) continue;
      if (o.kind === 'time-limit') metrics.sandboxLimitKills.inc({ limit: 'time' });
      else if (o.kind === 'memory-limit') metrics.sandboxLimitKills.inc({ limit: 'memory' });
    }
  };
  const run = async (job: ExpressionJob, ctx: RunContext | undefined, span?: Span) => {
    const started = now();
    let result: ExpressionResult | undefined;
    try {
      result = await evaluator.run(job, ctx);
      if (span) {
        let failed = 0;
        for (const o of [...result.consts, ...result.tests]) if (!o.ok) failed++;
        span.setAttribute('cfgu.sandbox.failed', failed);
      }
      return result;
    } finally {
      record(job, result, started);
    }
  };
  return {
    run: tracer
      ? (job, ctx) =>
          inSpan(tracer, 'cfgu.sandbox.job', { 'cfgu.sandbox.consts': job.consts.length, 'cfgu.sandbox.checks': expressionsOf(job) - job.consts.length }, (span) =>
            run(job, ctx, span),
          )
      : (job, ctx) => run(job, ctx),
    renderTemplate: (template, ctx) => evaluator.renderTemplate(template, ctx),
    evaluateBoolean: (expression, ctx) => evaluator.evaluateBoolean(expression, ctx),
    renderTrusted: (template, variables) => evaluator.renderTrusted(template, variables),
    close: () => evaluator.close(),
  };
}
