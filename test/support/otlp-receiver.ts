/**
 * An OTLP/HTTP trace receiver for the tests: a Bun.serve on loopback that takes what the
 * service's exporter POSTs to /v1/traces (protobuf, as @opentelemetry/exporter-trace-otlp-proto
 * sends it), decodes it with a small protobuf reader (the fields of opentelemetry-proto's
 * trace.proto the tests read), and keeps the spans.
 */

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number;
  /** The resource's attributes (service.name …). */
  resource: Record<string, string | number | boolean>;
}

type Field = bigint | Uint8Array;

/** One message's fields by number, each in the order met (varints as bigint, length-delimited as bytes). */
function fieldsOf(bytes: Uint8Array): Map<number, Field[]> {
  const fields = new Map<number, Field[]>();
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  const varint = () => {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = bytes[at++];
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
    }
  };
  while (at < bytes.length) {
    const key = Number(varint());
    const [number, wire] = [key >>> 3, key & 7];
    let value: Field;
    if (wire === 0) value = varint();
    else if (wire === 1) {
      value = view.getBigUint64(at, true);
      at += 8;
    } else if (wire === 5) {
      value = BigInt(view.getUint32(at, true));
      at += 4;
    } else if (wire === 2) {
      const length = Number(varint());
      value = bytes.subarray(at, at + length);
      at += length;
    } else throw new Error(`protobuf wire type ${wire} is not expected in OTLP traces`);
    fields.set(number, [...(fields.get(number) ?? []), value]);
  }
  return fields;
}

const text = (field: Field | undefined) => (field instanceof Uint8Array ? new TextDecoder().decode(field) : "");
const hex = (field: Field | undefined) => (field instanceof Uint8Array ? Buffer.from(field).toString("hex") : "");
const messages = (fields: Map<number, Field[]>, number: number) => (fields.get(number) ?? []).map((f) => fieldsOf(f as Uint8Array));

/** KeyValue list → object; AnyValue: 1 string, 2 bool, 3 int64, 4 double. */
function attributesOf(list: Map<number, Field[]>[]): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const kv of list) {
    const value = fieldsOf((kv.get(2)?.[0] as Uint8Array) ?? new Uint8Array());
    const key = text(kv.get(1)?.[0]);
    if (value.has(1)) out[key] = text(value.get(1)?.[0]);
    else if (value.has(2)) out[key] = value.get(2)?.[0] === 1n;
    else if (value.has(3)) out[key] = Number(BigInt.asIntN(64, value.get(3)?.[0] as bigint));
    else if (value.has(4)) out[key] = new DataView(new BigUint64Array([value.get(4)?.[0] as bigint]).buffer).getFloat64(0, true);
  }
  return out;
}

/** ExportTraceServiceRequest → its spans. */
export function decodeTraces(body: Uint8Array): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of messages(fieldsOf(body), 1)) {
    const resource = attributesOf(messages(messages(resourceSpans, 1)[0] ?? new Map(), 1));
    for (const scopeSpans of messages(resourceSpans, 2)) {
      for (const span of messages(scopeSpans, 2)) {
        const status = messages(span, 15)[0];
        spans.push({
          traceId: hex(span.get(1)?.[0]),
          spanId: hex(span.get(2)?.[0]),
          parentSpanId: hex(span.get(4)?.[0]),
          name: text(span.get(5)?.[0]),
          kind: Number(span.get(6)?.[0] ?? 0n),
          attributes: attributesOf(messages(span, 9)),
          statusCode: Number(status?.get(3)?.[0] ?? 0n),
          resource,
        });
      }
    }
  }
  return spans;
}

export function startOtlpReceiver() {
  const spans: ReceivedSpan[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      if (request.method !== "POST" || new URL(request.url).pathname !== "/v1/traces") return new Response("not found", { status: 404 });
      let body = new Uint8Array(await request.arrayBuffer());
      if (request.headers.get("content-encoding") === "gzip") body = Bun.gunzipSync(body);
      spans.push(...decodeTraces(body));
      return new Response(new Uint8Array(), { headers: { "content-type": "application/x-protobuf" } });
    },
  });
  return {
    /** OTEL_EXPORTER_OTLP_ENDPOINT for the service. */
    endpoint: `http://127.0.0.1:${server.port}`,
    spans,
    /**
     * The spans of one trace once `complete` holds for them (or throws after `timeoutMs`); `flush`:
     * the in-process service's exporter, flushed meanwhile (a server process sends every 5 s itself).
     */
    async trace(traceId: string, complete: (spans: ReceivedSpan[]) => boolean, { flush, timeoutMs = 10_000 }: { flush?: () => Promise<void>; timeoutMs?: number } = {}) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        await flush?.();
        const found = spans.filter((s) => s.traceId === traceId);
        if (complete(found)) return found;
        if (Date.now() > deadline) throw new Error(`trace ${traceId} incomplete after ${timeoutMs} ms: ${found.map((s) => s.name).join(", ")}`);
        await Bun.sleep(25);
      }
    },
    stop: () => server.stop(true),
  };
}
