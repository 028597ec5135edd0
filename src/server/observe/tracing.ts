/**
 * OpenTelemetry traces: off unless the operator sets an OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keep them off anyway.
 * The SDK reads the other standard variables itself (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`,
 * `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_BSP_*`, ...); `OTEL_SERVICE_NAME` names the service (default `cfgu`), and
 * `OTEL_RESOURCE_ATTRIBUTES` adds to the resource. Spans go out in batches over OTLP/HTTP, encoded as protobuf (the
 * specification's default) or as JSON, as `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL` say.
 *
 * Spans: the request (its parent is the caller's W3C `traceparent`, when given), one per command of a pipeline, one
 * per store read and one per sandbox job; a watched pipeline's evaluation (SSE, long polls) is a trace of its own
 * (`cfgu.watch.evaluation`, with the same children). Attributes are names and counts only: never a value, an
 * override, a key name, a header or a client address.
 *
 * No context manager is installed: the parent of every span is passed explicitly down the request path
 * (./observation.ts), which costs nothing per request beyond the spans themselves, and a request its sampler leaves out
 * gets no child span, wrapper or context at all.
 */
import { SpanKind, SpanStatusCode, propagation, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';
import type * as CoreModule from '@opentelemetry/core';
import type * as JsonExporterModule from '@opentelemetry/exporter-trace-otlp-http';
import type * as ProtobufExporterModule from '@opentelemetry/exporter-trace-otlp-proto';
import type * as ResourcesModule from '@opentelemetry/resources';
import type * as SdkModule from '@opentelemetry/sdk-trace';
import type * as ConventionsModule from '@opentelemetry/semantic-conventions';
import type { Sampler, SpanExporter } from '@opentelemetry/sdk-trace';
import { createRequire } from 'node:module';
import { version } from '../process/version.js';

/**
 * The SDK, the exporter and their dependencies (about 200 modules, 60-80 ms to load) are loaded when tracing starts,
 * not with the server: a server without an OTLP endpoint never loads them. Only the exporter of the chosen protocol
 * is loaded.
 */
const load = createRequire(import.meta.url);
let sdkModules:
  | { sdk: typeof SdkModule; core: typeof CoreModule; resources: typeof ResourcesModule; conventions: typeof ConventionsModule }
  | undefined;
const otel = () =>
  (sdkModules ??= {
    sdk: load('@opentelemetry/sdk-trace') as typeof SdkModule,
    core: load('@opentelemetry/core') as typeof CoreModule,
    resources: load('@opentelemetry/resources') as typeof ResourcesModule,
    conventions: load('@opentelemetry/semantic-conventions') as typeof ConventionsModule,
  });

/** The OTLP encodings cfgu sends: both over HTTP. */
export type TracesProtocol = 'http/protobuf' | 'http/json';
const PROTOCOLS: readonly TracesProtocol[] = ['http/protobuf', 'http/json'];

/**
 * The protocol named by `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`; default
 * `http/protobuf`, the specification's default. A name cfgu does not send (`grpc`, or a misspelling) falls back to the
 * default with a warning, as the SDK does for its other variables: telemetry settings never stop the server.
 */
export function tracesProtocol(env: NodeJS.ProcessEnv): { protocol: TracesProtocol; warning?: string } {
  const own = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim();
  const variable = own ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const given = own || env.OTEL_EXPORTER_OTLP_PROTOCOL?.trim();
  if (!given) return { protocol: 'http/protobuf' };
  const protocol = PROTOCOLS.find((p) => p === given.toLowerCase());
  if (protocol) return { protocol };
  const shown = JSON.stringify(given.length > 40 ? `${given.slice(0, 40)}...` : given);
  return {
    protocol: 'http/protobuf',
    warning: `${variable}=${shown} is not a protocol cfgu sends traces with (http/protobuf or http/json); traces go out as http/protobuf`,
  };
}

/** The exporter of `protocol`, sending to `url`; the exporter reads its headers, timeout and compression itself. */
function exporterFor(protocol: TracesProtocol, url: string): SpanExporter {
  if (protocol === 'http/json') {
    const { OTLPTraceExporter } = load('@opentelemetry/exporter-trace-otlp-http') as typeof JsonExporterModule;
    return new OTLPTraceExporter({ url });
  }
  const { OTLPTraceExporter } = load('@opentelemetry/exporter-trace-otlp-proto') as typeof ProtobufExporterModule;
  return new OTLPTraceExporter({ url });
}

export interface Tracing {
  readonly tracer: Tracer;
  /** How spans are encoded. */
  readonly protocol: TracesProtocol;
  /** What the operator should hear about the settings (logged once at start-up). */
  readonly warnings: readonly string[];
  /** Send what is still buffered and stop. */
  shutdown(): Promise<void>;
}

let active: Tracing | undefined;

/** Whether the environment asks for traces (see the module comment). */
export function tracingRequested(env: NodeJS.ProcessEnv): boolean {
  if (/^\s*true\s*$/i.test(env.OTEL_SDK_DISABLED ?? '')) return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? 'otlp').split(',').map((s) => s.trim().toLowerCase());
  if (!exporters.includes('otlp')) return false;
  return !!(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/**
 * The sampler named by `OTEL_TRACES_SAMPLER` (with `OTEL_TRACES_SAMPLER_ARG` for the ratio ones), as the
 * specification lists them; default `parentbased_always_on`. An unknown name falls back to the default.
 */
export function samplerFromEnv(env: NodeJS.ProcessEnv): Sampler {
  const { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler } = otel().sdk;
  const name = (env.OTEL_TRACES_SAMPLER ?? '').trim().toLowerCase();
  const raw = Number((env.OTEL_TRACES_SAMPLER_ARG ?? '').trim() || 1);
  const ratio = Number.isFinite(raw) && raw >= 0 && raw <= 1 ? raw : 1;
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** The batch processor's `OTEL_BSP_*` settings (positive integers; others are ignored). */
function batchOptions(env: NodeJS.ProcessEnv) {
  const int = (name: string): number | undefined => {
    const v = Number(env[name]);
    return Number.isInteger(v) && v > 0 ? v : undefined;
  };
  const options = {
    scheduledDelayMillis: int('OTEL_BSP_SCHEDULE_DELAY'),
    exportTimeoutMillis: int('OTEL_BSP_EXPORT_TIMEOUT'),
    maxQueueSize: int('OTEL_BSP_MAX_QUEUE_SIZE'),
    maxExportBatchSize: int('OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
  };
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
}

/** The traces URL: the signal's own endpoint as given, else the general one with `/v1/traces` added. */
export function tracesUrl(env: NodeJS.ProcessEnv): string {
  const own = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (own) return own;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() ?? '';
  return `${base.replace(/\/+$/, '')}/v1/traces`;
}

/** Start tracing for this process when the environment asks for it (once; later calls return the same). */
export function startTracing(env: NodeJS.ProcessEnv = process.env): Tracing | undefined {
  if (active || !tracingRequested(env)) return active;
  const { sdk, core, resources, conventions } = otel();
  const { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } = conventions;
  const { BatchSpanProcessor, TracerProvider } = sdk;
  const { detectResources, envDetector, resourceFromAttributes } = resources;
  const { W3CTraceContextPropagator } = core;
  const service = env.OTEL_SERVICE_NAME?.trim();
  const resource = resourceFromAttributes({ [ATTR_SERVICE_NAME]: 'cfgu', [ATTR_SERVICE_VERSION]: version })
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(service ? resourceFromAttributes({ [ATTR_SERVICE_NAME]: service }) : null);
  const { protocol, warning } = tracesProtocol(env);
  const provider = new TracerProvider({
    resource,
    sampler: samplerFromEnv(env),
    spanProcessors: [new BatchSpanProcessor({ exporter: exporterFor(protocol, tracesUrl(env)), ...batchOptions(env) })],
  });
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  const tracing: Tracing = {
    tracer: provider.getTracer('cfgu', version),
    protocol,
    warnings: warning ? [warning] : [],
    shutdown: async () => {
      if (active !== tracing) return;
      active = undefined;
      await provider.shutdown().catch(() => undefined);
      trace.disable();
      propagation.disable();
    },
  };
  active = tracing;
  return tracing;
}

/** The tracer of this process when tracing is on. */
export function activeTracer(): Tracer | undefined {
  return active?.tracer;
}

/**
 * Run `fn` in a new span under `parent`; the span ends when `fn` settles (an error marks it, by type only). `fn` gets
 * the span; a caller that starts children under it makes their parent with `trace.setSpan(parent, span)`.
 */
export function inSpan<T>(tracer: Tracer, name: string, attributes: Record<string, string | number | boolean>, parent: Context, fn: (span: Span) => Promise<T>): Promise<T> {
  const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, parent);
  let running: Promise<T>;
  try {
    running = fn(span);
  } catch (e) {
    running = Promise.reject(e);
  }
  return endWith(span, running);
}

/** End `span` when `running` settles (marked as failed, by type only, when it rejects); settles as `running` does. */
export function endWith<T>(span: Span, running: Promise<T>): Promise<T> {
  return running.then(
    (v) => {
      span.end();
      return v;
    },
    (e: unknown) => {
      markError(span, e);
      span.end();
      throw e;
    },
  );
}

/** Error status with the error's class and stable code only (messages may quote what a client sent). */
export function markError(span: Span, e: unknown): void {
  const code = (e as { code?: unknown })?.code;
  span.setStatus({ code: SpanStatusCode.ERROR, message: typeof code === 'string' ? code : (e as Error)?.name ?? 'error' });
  span.setAttribute('error.type', typeof code === 'string' ? code : (e as Error)?.name ?? 'error');
}

export type { Context, Span, Tracer };
