// Types of bench/otlp.mjs (OTLP/HTTP trace export requests, read in the JSON shape).
export interface OtlpAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string;
  doubleValue?: number;
  arrayValue?: { values: OtlpAnyValue[] };
  kvlistValue?: { values: OtlpKeyValue[] };
  bytesValue?: string;
}
export interface OtlpKeyValue {
  key: string;
  value: OtlpAnyValue;
}
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  traceState?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: OtlpKeyValue[];
  status?: { message?: string; code?: number };
  flags?: number;
}
export interface OtlpTraceRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: Array<{ scope?: { name?: string; version?: string }; spans?: OtlpSpan[] }>;
  }>;
}
export function decodeTraceRequest(buf: Buffer): OtlpTraceRequest;
export function readTraceRequest(body: Buffer, contentType: string | undefined): OtlpTraceRequest;
export function spanCount(request: OtlpTraceRequest): number;
export function countSpans(body: Buffer, contentType: string | undefined): number;
export function sinkHandler(
  count: (spans: number, path: string | undefined) => void,
): (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void;
