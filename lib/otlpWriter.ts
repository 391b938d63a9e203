// A protobuf writer for the fixed OTLP trace schema (opentelemetry/proto/trace/v1/trace.proto),
// growing one Buffer: the lean span recorder (lib/leanTracing.ts) encodes each ended span into
// it at once, so no span object lives until its batch is exported. Fields are written in the
// order the SDK's own serializer (@opentelemetry/otlp-transformer) writes them, so the bytes
// are the same (lib/otlpWriter.test.ts compares them).
import type { AttributeValue, Attributes } from "@opentelemetry/api";

/** Wire types. */
const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;
const FIXED32 = 5;

export class OtlpWriter {
  buf: Buffer;
  pos = 0;

  constructor(size = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(size);
  }

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const grown = Buffer.allocUnsafe(size);
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  /** A non-negative integer below 2^32, or any other safe integer (int64 two's complement). */
  varint(value: number): void {
    this.ensure(10);
    const b = this.buf;
    if (value >= 0 && value <= 0xffffffff) {
      let v = value >>> 0;
      while (v > 127) {
        b[this.pos++] = (v & 127) | 128;
        v >>>= 7;
      }
      b[this.pos++] = v;
      return;
    }
    let low: number;
    let high: number;
    const abs = Math.abs(value);
    low = abs >>> 0;
    high = (abs / 4294967296) >>> 0;
    if (value < 0) {
      low = ~low >>> 0;
      high = ~high >>> 0;
      low = (low + 1) >>> 0;
      if (low === 0) high = (high + 1) >>> 0;
    }
    while (high > 0 || low > 127) {
      b[this.pos++] = (low & 127) | 128;
      low = ((low >>> 7) | (high << 25)) >>> 0;
      high >>>= 7;
    }
    b[this.pos++] = low & 127;
  }

  fixed32(value: number): void {
    this.ensure(4);
    this.buf.writeUInt32LE(value >>> 0, this.pos);
    this.pos += 4;
  }

  /** Epoch milliseconds (fractional) as fixed64 nanoseconds, as the SDK rounds them. */
  fixed64Nanos(epochMs: number): void {
    const seconds = Math.floor(epochMs / 1000);
    let nanos = Math.round((epochMs - seconds * 1000) * 1e6);
    let s = seconds;
    if (nanos >= 1e9) {
      s += 1;
      nanos -= 1e9;
    }
    this.hrTime(s, nanos);
  }

  /** [seconds, nanoseconds] as fixed64 nanoseconds (exact; the SDK's arithmetic). */
  hrTime(seconds: number, nanos: number): void {
    const lowerBits = seconds & 65535;
    const upperBits = (seconds / 65536) >>> 0;
    const fromLower = lowerBits * 1e9;
    const fromUpper = upperBits * 1e9;
    const low32 = (fromLower >>> 0) + (((fromUpper & 65535) * 65536) >>> 0) + nanos;
    const high =
      (Math.floor(fromLower / 4294967296) + ((fromUpper / 65536) >>> 0) + Math.floor(low32 / 4294967296)) >>>
      0;
    this.ensure(8);
    this.buf.writeUInt32LE(low32 >>> 0, this.pos);
    this.buf.writeUInt32LE(high, this.pos + 4);
    this.pos += 8;
  }

  double(value: number): void {
    this.ensure(8);
    this.buf.writeDoubleLE(value, this.pos);
    this.pos += 8;
  }

  string(value: string): void {
    const n = Buffer.byteLength(value);
    this.varint(n);
    this.ensure(n);
    this.pos += this.buf.write(value, this.pos, n, "utf8");
  }

  /** A hex id (trace or span id) as bytes. */
  hexBytes(hex: string): void {
    const n = hex.length >>> 1;
    this.varint(n);
    this.ensure(n);
    this.pos += this.buf.write(hex, this.pos, n, "hex");
  }

  raw(bytes: Uint8Array): void {
    this.ensure(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  /** Start a length-delimited field: one byte reserved for its length, moved on if it needs more. */
  begin(field: number): number {
    this.tag(field, LEN);
    this.ensure(1);
    return this.pos++;
  }

  end(mark: number): void {
    const length = this.pos - mark - 1;
    const size = varintSize(length);
    if (size > 1) {
      this.ensure(size - 1);
      this.buf.copyWithin(mark + size, mark + 1, this.pos);
      this.pos += size - 1;
    }
    let at = mark;
    let v = length;
    while (v > 127) {
      this.buf[at++] = (v & 127) | 128;
      v >>>= 7;
    }
    this.buf[at] = v;
  }

  stringField(field: number, value: string): void {
    this.tag(field, LEN);
    this.string(value);
  }

  varintField(field: number, value: number): void {
    this.tag(field, VARINT);
    this.varint(value);
  }

  fixed32Field(field: number, value: number): void {
    this.tag(field, FIXED32);
    this.fixed32(value);
  }

  timeField(field: number, epochMs: number): void {
    this.tag(field, FIXED64);
    this.fixed64Nanos(epochMs);
  }

  /** KeyValue messages, one per attribute, in field `field`. */
  attributes(field: number, attributes: Attributes): void {
    for (const key in attributes) {
      if (!Object.prototype.hasOwnProperty.call(attributes, key)) continue;
      const value = attributes[key];
      if (value === undefined) continue;
      this.keyValue(field, key, value);
    }
  }

  keyValue(field: number, key: string, value: AttributeValue): void {
    const kv = this.begin(field);
    this.stringField(1, key);
    const any = this.begin(2);
    this.anyValue(value);
    this.end(any);
    this.end(kv);
  }

  anyValue(value: AttributeValue | null | undefined): void {
    if (typeof value === "string") this.stringField(1, value);
    else if (typeof value === "boolean") this.varintField(2, value ? 1 : 0);
    else if (typeof value === "number") {
      if (Number.isInteger(value) && value >= -(2 ** 63) && value < 2 ** 63) this.varintField(3, value);
      else {
        this.tag(4, FIXED64);
        this.double(value);
      }
    } else if (Array.isArray(value)) {
      const array = this.begin(5);
      for (const item of value) {
        const one = this.begin(1);
        this.anyValue(item);
        this.end(one);
      }
      this.end(array);
    }
  }
}

export function varintSize(v: number): number {
  return v < 128 ? 1 : v < 16384 ? 2 : v < 2097152 ? 3 : v < 268435456 ? 4 : 5;
}
