/**
 * What the app wires in to be seen from outside: Prometheus metrics (./metrics.ts) and OpenTelemetry traces
 * (./tracing.ts). `createObservation` wraps the stores and the sandbox once (timings and outcomes, for metrics), and
 * `install` adds the request hooks and `GET /metrics`. With metrics and traces both off, nothing is wrapped and no hook
 * is added.
 *
 * Traces pass their parent explicitly (no context manager): a sampled request gets its own engine (`evaluate` hands
 * it to the caller): the shared stores and sandbox wrapped once more for this request, each read and job a span under
 * the request's span or the running command's, and an observer that makes a span per command. A request its sampler
 * leaves out gets the shared engine: nothing is created for it beyond the sampler's answer. Watched pipelines
 * (./watch.ts) are evaluated through `watchEvaluation`: counted, and traced as `cfgu.watch.evaluation`.
 *
 * `GET /metrics` (and HEAD) answers in the Prometheus text format. With a metrics key set, it takes exactly that key
 * (`Authorization: Bearer <key>`) and no other; without one, it takes a preshared key, or a scoped credential or JWT
 * with a grant that says `metrics: true` (any other is 403: the metrics name every store, which a scope may hide),
 * and is open when authentication is off. Nothing in a metric or a span is a value: labels and attributes are route
 * patterns, methods, statuses, store names, rules and counts.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, propagation, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { CfguError, ErrorCodes, ValidationError } from '../../core/errors.js';
import { keyCount } from '../../core/frozen.js';
import type { CommandInfo, EngineObserver } from '../../core/ports.js';
import type { EvalCommandInput } from '../../core/types.js';
import type { ExpressionEvaluator, ExpressionJob, ExpressionResult, RunContext } from '../../expressions/types.js';
import type { Config, ConfigQuery, ResolvedStore, StoreResolver } from '../../stores/types.js';
import { mayReadMetrics } from '../access/scopes.js';
import { createKeyChecker } from '../access/credentials.js';
import { ServerMetrics, useWorkerMetrics, type CacheState, type SandboxState, type StoreState } from './metrics.js';
import { PROBLEM_CONTENT_TYPE, PROBLEM_TYPES, cfguProblem, httpProblem, problem } from '../http/problem.js';
import type { ServerSettings } from '../process/settings.js';
import { activeTracer, endWith, inSpan } from './tracing.js';

export interface ObservationInput {
  settings: ServerSettings;
  stores: StoreResolver;
  evaluator?: ExpressionEvaluator;
  bodyCache?: { hits: number; misses: number };
  /** The process's cache budget (core/cache-budget.ts): each cache's estimated bytes and entries, and the ceiling. */
  caches?: CacheState;
  /** Watch requests held open (SSE streams plus long polls). */
  watchers?: () => number;
}

/** What the engine is given to evaluate one pipeline. */
export interface Engine {
  stores: StoreResolver;
  expressions?: ExpressionEvaluator;
  /** A span per command (sampled requests only). */
  observer?: EngineObserver;
}

export interface Observation {
  /** The stores as the engine should use them (wrapped when observed). */
  readonly stores: StoreResolver;
  readonly evaluator: ExpressionEvaluator | undefined;
  /** Routes this module serves, with their methods (for 404/405). */
  readonly routes: Record<string, string[]>;
  /** True when `path` is served with its own key, so the server's bearer keys do not apply to it. */
  ownKey(path: string): boolean;
  /** Add the request hooks. Call before the app's own hooks, so every answer is counted and traced. */
  install(app: FastifyInstance): void;
  /** Add GET /metrics (with the other routes). */
  addRoutes(app: FastifyInstance): void;
  /** Evaluate one pipeline of `request` with the engine `run` is given: counted and timed, traced under the request's span. */
  evaluate<T>(request: FastifyRequest, commands: readonly EvalCommandInput[], run: (engine: Engine) => Promise<T>): Promise<T>;
  /** Evaluate a watched pipeline (first answer or re-evaluation after a change): counted, and a trace of its own. */
  watchEvaluation<T>(commands: readonly EvalCommandInput[], watchers: number, run: (engine: Engine) => Promise<T>): Promise<T>;
  /** An SSE stream ended (counted). */
  watchStreamEnded(reason: WatchEndReason): void;
}

/**
 * Why an SSE stream ended: the client went away, the server is shutting down, the client read too slowly, or its
 * credential ended it (the token expired, the credential is no longer accepted, its scope no longer covers the pipeline).
 */
export type WatchEndReason = 'client' | 'shutdown' | 'slow_client' | 'expired' | 'revoked' | 'scope';

const now = (): number => performance.now();

/** `ok`, or the error code without its prefix (`validation_failed`, `store_unavailable`, ...), or `error`. */
const outcomeOf = (e: unknown): string => (e instanceof CfguError ? e.code.replace(/^CFGU_/, '').toLowerCase() : 'error');

function keysOf(commands: readonly EvalCommandInput[]): number {
  let n = 0;
  for (const c of commands) {
    const keys = (c as { schema?: { keys?: unknown } } | null)?.schema?.keys;
    if (keys && typeof keys === 'object') n += keyCount(keys);
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
        ...(input.caches ? { caches: input.caches } : {}),
        ...(input.watchers ? { watchers: input.watchers } : {}),
      })
    : undefined;
  if (metrics) useWorkerMetrics(metrics);
  const metricsKey = settings.metrics.enabled && settings.metrics.key ? createKeyChecker([settings.metrics.key]) : undefined;

  const routes: Record<string, string[]> = metrics ? { '/metrics': ['GET', 'HEAD'] } : {};
  const observed = !!(metrics || tracer);
  const stores = observed ? observeStores(input.stores, metrics) : input.stores;
  const evaluator = observed && input.evaluator ? observeEvaluator(input.evaluator, metrics) : input.evaluator;
  const shared: Engine = { stores, ...(evaluator ? { expressions: evaluator } : {}) };
  /** The engine of one sampled evaluation: spans under `parent`. */
  const tracedEngine = (parent: Context): Engine => tracedRun(tracer!, parent, stores, evaluator);

  const observation: Observation = {
    stores,
    evaluator,
    routes,
    ownKey: (path) => !!metricsKey && path === '/metrics',

    install(app) {
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
        const s = (request as TracedRequest).cfguTrace;
        if (s) {
          s.span.setAttribute('http.response.status_code', status);
          if (status >= 500) s.span.setStatus({ code: SpanStatusCode.ERROR });
          s.span.end();
          (request as TracedRequest).cfguTrace = null;
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
      const forbidden = JSON.stringify(
        cfguProblem(ErrorCodes.FORBIDDEN, 'reading /metrics needs the metrics key, a preshared key, or a scope with metrics: true'),
      );
      const scrape = async (request: FastifyRequest, reply: FastifyReply) => {
        reply.header('cache-control', 'no-store');
        if (metricsKey && !metricsKey.check(request.headers.authorization)) {
          return reply.code(401).header('www-authenticate', 'Bearer realm="cfgu-metrics"').type(PROBLEM_CONTENT_TYPE).send(unauthorized);
        }
        // Without a metrics key: authenticated by the server's credentials (app.ts), and only a scope that says so reads.
        const principal = metricsKey ? null : request.cfguPrincipal;
        if (principal && !mayReadMetrics(principal)) return reply.code(403).type(PROBLEM_CONTENT_TYPE).send(forbidden);
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
      const s = tracer ? (request as TracedRequest).cfguTrace : null;
      const engine = s ? tracedEngine(s.ctx) : shared;
      if (!metrics) return run(engine);
      const started = now();
      metrics.pipeline(commands.length, keysOf(commands));
      return run(engine).then(
        (v) => {
          metrics.evaluation('ok', (now() - started) / 1000);
          return v;
        },
        (e: unknown) => {
          metrics.evaluation(outcomeOf(e), (now() - started) / 1000);
          if (e instanceof ValidationError) for (const f of e.failures) metrics.failure(f.rule);
          throw e;
        },
      );
    },

    watchEvaluation(commands, watchers, run) {
      const count = metrics
        ? <T>(p: Promise<T>): Promise<T> =>
            p.then(
              (v) => {
                metrics.watchEvaluation('ok');
                return v;
              },
              (e: unknown) => {
                metrics.watchEvaluation(outcomeOf(e));
                throw e;
              },
            )
        : <T>(p: Promise<T>) => p;
      if (!tracer) return count(run(shared));
      const span = tracer.startSpan('cfgu.watch.evaluation', {
        kind: SpanKind.INTERNAL,
        attributes: { 'cfgu.watch.commands': commands.length, 'cfgu.watch.watchers': watchers },
      });
      if (!span.isRecording()) {
        span.end();
        return count(run(shared));
      }
      return endWith(span, count(run(tracedEngine(trace.setSpan(ROOT_CONTEXT, span)))));
    },

    watchStreamEnded(reason) {
      metrics?.watchStreamEnded(reason);
    },
  };
  return observation;
}

/** A request whose trace is kept (install's hooks decorate every request with `cfguTrace`). */
type TracedRequest = FastifyRequest & { cfguTrace: { span: Span; ctx: Context } | null };

/**
 * The engine of one sampled evaluation: store reads and sandbox jobs as spans under the running command's span (or
 * `root`, outside any command: the engine starts every store read before the first command), a span per command.
 * The engine runs a pipeline's commands one after the other, so "the running command" is one value.
 */
function tracedRun(tracer: Tracer, root: Context, stores: StoreResolver, evaluator: ExpressionEvaluator | undefined): Engine {
  let current = root;
  const observer: EngineObserver = {
    command<T>(info: CommandInfo, run: () => Promise<T>): Promise<T> {
      const attributes = { 'cfgu.command.index': info.index, 'cfgu.command.keys': info.keys, ...(info.store !== undefined ? { 'cfgu.store.name': info.store } : {}) };
      return inSpan(tracer, 'cfgu.command', attributes, root, (span) => {
        current = trace.setSpan(root, span);
        return run().finally(() => {
          current = root;
        });
      });
    },
  };
  const traced: StoreResolver = {
    names: () => stores.names(),
    resolve(name) {
      const store = stores.resolve(name);
      const attributes = { 'cfgu.store.name': store.name, 'cfgu.store.type': store.type };
      return {
        name: store.name,
        type: store.type,
        read: (queries) =>
          inSpan(tracer, 'cfgu.store.read', { ...attributes, 'cfgu.store.queries': queries.length }, current, (span) =>
            store.read(queries).then((answer) => {
              span.setAttribute('cfgu.store.from_backup', answer.fromBackup);
              return answer;
            }),
          ),
        write: (configs) => inSpan(tracer, 'cfgu.store.write', { ...attributes, 'cfgu.store.configs': configs.length }, current, () => store.write(configs)),
        ...(store.watch ? { watch: store.watch.bind(store) } : {}),
      };
    },
  };
  const engine: Engine = { stores: traced, observer };
  if (evaluator) {
    engine.expressions = {
      run: (job, ctx) =>
        inSpan(tracer, 'cfgu.sandbox.job', { 'cfgu.sandbox.consts': job.consts.length, 'cfgu.sandbox.checks': expressionsOf(job) - job.consts.length }, current, (span) =>
          evaluator.run(job, ctx).then((result) => {
            let failed = 0;
            for (const o of result.consts) if (!o.ok) failed++;
            for (const o of result.tests) if (!o.ok) failed++;
            span.setAttribute('cfgu.sandbox.failed', failed);
            return result;
          }),
        ),
      renderTemplate: (template, ctx) => evaluator.renderTemplate(template, ctx),
      evaluateBoolean: (expression, ctx) => evaluator.evaluateBoolean(expression, ctx),
      renderTrusted: (template, variables) => evaluator.renderTrusted(template, variables),
      close: () => evaluator.close(),
    };
  }
  return engine;
}

const expressionsOf = (job: ExpressionJob): number => {
  let n = job.consts.length;
  for (const t of job.tests) n += t.expressions.length;
  return n;
};

const isSandbox = (e: unknown): e is SandboxState & ExpressionEvaluator =>
  !!e && typeof (e as SandboxState).pids === 'function' && typeof (e as SandboxState).replacements === 'function';

const hasStatus = (s: unknown): s is StoreResolver & StoreState => typeof (s as StoreState).status === 'function';

/** Each resolved store wrapped once (by identity): reads and writes timed and counted. */
function observeStores(stores: StoreResolver, metrics: ServerMetrics | undefined): StoreResolver {
  if (!metrics) return stores;
  const wrapped = new Map<ResolvedStore, ResolvedStore>();
  const wrap = (store: ResolvedStore): ResolvedStore => {
    const record = metrics.store(store.name);
    return {
      name: store.name,
      type: store.type,
      read: async (queries: readonly ConfigQuery[]) => {
        const started = now();
        try {
          const answer = await store.read(queries);
          record('read', answer.fromBackup ? 'backup' : 'ok', (now() - started) / 1000);
          return answer;
        } catch (e) {
          record('read', 'error', (now() - started) / 1000);
          throw e;
        }
      },
      write: async (configs: readonly Config[]) => {
        const started = now();
        try {
          await store.write(configs);
          record('write', 'ok', (now() - started) / 1000);
        } catch (e) {
          record('write', 'error', (now() - started) / 1000);
          throw e;
        }
      },
      ...(store.watch ? { watch: store.watch.bind(store) } : {}),
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

/** The sandbox with its jobs timed and counted; everything else passes through. */
function observeEvaluator(evaluator: ExpressionEvaluator, metrics: ServerMetrics | undefined): ExpressionEvaluator {
  if (!metrics) return evaluator;
  const record = (job: ExpressionJob, result: ExpressionResult | undefined, started: number) => {
    let time = 0;
    let memory = 0;
    if (result) {
      for (const o of result.consts) if (!o.ok) o.kind === 'time-limit' ? time++ : o.kind === 'memory-limit' && memory++;
      for (const o of result.tests) if (!o.ok) o.kind === 'time-limit' ? time++ : o.kind === 'memory-limit' && memory++;
    }
    metrics.sandboxJob((now() - started) / 1000, expressionsOf(job), time, memory);
  };
  return {
    run: async (job: ExpressionJob, ctx: RunContext | undefined) => {
      const started = now();
      let result: ExpressionResult | undefined;
      try {
        result = await evaluator.run(job, ctx);
        return result;
      } finally {
        record(job, result, started);
      }
    },
    renderTemplate: (template, ctx) => evaluator.renderTemplate(template, ctx),
    evaluateBoolean: (expression, ctx) => evaluator.evaluateBoolean(expression, ctx),
    renderTrusted: (template, variables) => evaluator.renderTrusted(template, variables),
    close: () => evaluator.close(),
  };
}
