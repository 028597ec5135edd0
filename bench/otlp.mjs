// Reading OTLP/HTTP trace export requests, for the tests' and the benchmarks' receivers: the JSON encoding is parsed
// as it is; the protobuf encoding (an ExportTraceServiceRequest of opentelemetry-proto) is walked field by field and
// given the shape of the JSON one (ids as lowercase hex, int64 values as decimal strings), so that both are checked by
// the same code. Only what a trace export carries is read: resource attributes, scopes, spans with their ids, name,
// kind, attributes and status; any other field is skipped by its wire type.

/** Protobuf wire types. */
const VARINT = 0;
const FIXED64 = 1;
const LENGTH = 2;
const FIXED32 = 5;

/**
 * The fields of one message, in order: `[field number, wire type, value]`; a varint is a BigInt, a length-delimited
 * field a Buffer, a fixed64 an 8-byte Buffer, a fixed32 a number.
 */
function fieldsOf(buf) {
  const out = [];
  let pos = 0;
  const varint = () => {
    let value = 0n;
    let shift = 0n;
    for (;;) {
      if (pos >= buf.length) throw new Error('truncated varint');
      const byte = buf[pos++];
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
      shift += 7n;
      if (shift > 63n) throw new Error('varint too long');
    }
  };
  const take = (n) => {
    if (pos + n > buf.length) throw new Error('truncated field');
    const part = buf.subarray(pos, pos + n);
    pos += n;
    return part;
  };
  while (pos < buf.length) {
    const key = Number(varint());
    const field = key >>> 3;
    const wire = key & 7;
    if (wire === VARINT) out.push([field, wire, varint()]);
    else if (wire === FIXED64) out.push([field, wire, take(8)]);
    else if (wire === LENGTH) out.push([field, wire, take(Number(varint()))]);
    else if (wire === FIXED32) out.push([field, wire, take(4).readUInt32LE(0)]);
    else throw new Error(`unsupported wire type ${wire}`);
  }
  return out;
}

const text = (b) => b.toString('utf8');
const hex = (b) => b.toString('hex');
const signed64 = (v) => BigInt.asIntN(64, v);

/** AnyValue: string 1, bool 2, int 3, double 4, array 5 (values 1), kvlist 6 (values 1), bytes 7. */
function anyValue(buf) {
  for (const [field, wire, v] of fieldsOf(buf)) {
    if (field === 1 && wire === LENGTH) return { stringValue: text(v) };
    if (field === 2 && wire === VARINT) return { boolValue: v !== 0n };
    if (field === 3 && wire === VARINT) return { intValue: String(signed64(v)) };
    if (field === 4 && wire === FIXED64) return { doubleValue: v.readDoubleLE(0) };
    if (field === 5 && wire === LENGTH) return { arrayValue: { values: fieldsOf(v).filter(([f]) => f === 1).map(([, , x]) => anyValue(x)) } };
    if (field === 6 && wire === LENGTH) return { kvlistValue: { values: fieldsOf(v).filter(([f]) => f === 1).map(([, , x]) => keyValue(x)) } };
    if (field === 7 && wire === LENGTH) return { bytesValue: v.toString('base64') };
  }
  return {};
}

/** KeyValue: key 1, value 2. */
function keyValue(buf) {
  const kv = { key: '', value: {} };
  for (const [field, wire, v] of fieldsOf(buf)) {
    if (field === 1 && wire === LENGTH) kv.key = text(v);
    else if (field === 2 && wire === LENGTH) kv.value = anyValue(v);
  }
  return kv;
}

/**
 * Span: trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5, kind 6, start 7, end 8, attributes 9,
 * status 15 (message 2, code 3), flags 16.
 */
function span(buf) {
  const s = { traceId: '', spanId: '', name: '', kind: 0, startTimeUnixNano: '0', endTimeUnixNano: '0', attributes: [] };
  for (const [field, wire, v] of fieldsOf(buf)) {
    if (field === 1 && wire === LENGTH) s.traceId = hex(v);
    else if (field === 2 && wire === LENGTH) s.spanId = hex(v);
    else if (field === 3 && wire === LENGTH) s.traceState = text(v);
    else if (field === 4 && wire === LENGTH) {
      if (v.length) s.parentSpanId = hex(v);
    } else if (field === 5 && wire === LENGTH) s.name = text(v);
    else if (field === 6 && wire === VARINT) s.kind = Number(v);
    else if (field === 7 && wire === FIXED64) s.startTimeUnixNano = String(v.readBigUInt64LE(0));
    else if (field === 8 && wire === FIXED64) s.endTimeUnixNano = String(v.readBigUInt64LE(0));
    else if (field === 9 && wire === LENGTH) s.attributes.push(keyValue(v));
    else if (field === 15 && wire === LENGTH) {
      s.status = {};
      for (const [f, w, x] of fieldsOf(v)) {
        if (f === 2 && w === LENGTH) s.status.message = text(x);
        else if (f === 3 && w === VARINT) s.status.code = Number(x);
      }
    } else if (field === 16 && wire === FIXED32) s.flags = v;
  }
  return s;
}

/** ExportTraceServiceRequest (resource_spans 1) > ResourceSpans (resource 1, scope_spans 2) > ScopeSpans (scope 1, spans 2). */
export function decodeTraceRequest(buf) {
  const resourceSpans = [];
  for (const [field, wire, rsBuf] of fieldsOf(buf)) {
    if (field !== 1 || wire !== LENGTH) continue;
    const rs = { resource: { attributes: [] }, scopeSpans: [] };
    for (const [f, w, v] of fieldsOf(rsBuf)) {
      if (f === 1 && w === LENGTH) {
        for (const [rf, rw, a] of fieldsOf(v)) if (rf === 1 && rw === LENGTH) rs.resource.attributes.push(keyValue(a));
      } else if (f === 2 && w === LENGTH) {
        const ss = { scope: {}, spans: [] };
        for (const [sf, sw, x] of fieldsOf(v)) {
          if (sf === 1 && sw === LENGTH) {
            for (const [qf, qw, q] of fieldsOf(x)) {
              if (qf === 1 && qw === LENGTH) ss.scope.name = text(q);
              else if (qf === 2 && qw === LENGTH) ss.scope.version = text(q);
            }
          } else if (sf === 2 && sw === LENGTH) ss.spans.push(span(x));
        }
        rs.scopeSpans.push(ss);
      }
    }
    resourceSpans.push(rs);
  }
  return { resourceSpans };
}

/** An export request's body as the JSON shape, by its content type: `application/x-protobuf` or `application/json`. */
export function readTraceRequest(body, contentType) {
  return /protobuf/i.test(contentType ?? '') ? decodeTraceRequest(body) : JSON.parse(body.toString('utf8'));
}

/** How many spans an export request (in the JSON shape) carries. */
export function spanCount(request) {
  let n = 0;
  for (const rs of request.resourceSpans ?? []) for (const ss of rs.scopeSpans ?? []) n += (ss.spans ?? []).length;
  return n;
}

/**
 * How many spans an export request carries, read from its body without decoding the spans: for protobuf only the
 * two outer levels are walked and the span fields of each ScopeSpans counted. A benchmark's sink shares the machine
 * with the server it measures, so what it spends per span is taken from the server (the full decode cost as much as a
 * third of what the server spends on tracing).
 */
export function countSpans(body, contentType) {
  if (!/protobuf/i.test(contentType ?? '')) return spanCount(JSON.parse(body.toString('utf8')));
  let n = 0;
  for (const [field, wire, rs] of fieldsOf(body)) {
    if (field !== 1 || wire !== LENGTH) continue;
    for (const [f, w, ss] of fieldsOf(rs)) {
      if (f !== 2 || w !== LENGTH) continue;
      for (const [sf, sw] of fieldsOf(ss)) if (sf === 2 && sw === LENGTH) n++;
    }
  }
  return n;
}

/**
 * The request handler of an OTLP/HTTP traces sink: answers every export as its encoding expects (an empty protobuf
 * message, or `{}`) and hands `count` the number of spans it carried (countSpans) and the path it was sent to.
 */
export function sinkHandler(count) {
  return (req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const type = req.headers['content-type'] ?? '';
      try {
        count(countSpans(Buffer.concat(chunks), type), req.url);
      } catch {
        /* not an export request */
      }
      if (/protobuf/.test(type)) res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  };
}
