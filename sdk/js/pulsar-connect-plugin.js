// The JavaScript SDK for pulsar-connect plugins, built into components with componentize-js (jco).
//
// An author writes plain functions over plain values:
//   - a router: `route(keys, partitions) -> partitions` (keys: Uint8Array | null per message),
//     exported as `export const routing = exportRouter(MyRouter)` (WIT pulsar-connect:plugin/router@0.1.0);
//   - a format: `decode(payloads) -> rows` and `encode(rows) -> payloads`,
//     exported as `export const codec = exportFormat(MyFormat)` (WIT pulsar-connect:plugin/format@0.2.0).
// The SDK does the columnar work of the contract (flattened batches in, typed-array columns out).
// One ES module without dependencies: componentize-js bundles it with the plugin's own module.

/** The reason prefix that makes a row error a skip (Flink's ignore-parse-errors). */
export const SKIPPED = "skipped: ";

/** Thrown by a constructor to refuse its options; `option` names the offending one. */
export class ConfigError extends Error {
  constructor(message, option) {
    super(message);
    this.option = option;
  }
}

/** Returned (or thrown) for a message that is skipped rather than failed. */
export class Skip extends Error {}

function present(bitmap, i) {
  return bitmap === undefined || bitmap === null || ((bitmap[i >> 3] >> (i & 7)) & 1) === 1;
}

/** The key of each message of a key batch: a Uint8Array, or null for a message without a key. */
export function keysOf(batch) {
  const out = new Array(batch.count);
  for (let i = 0; i < batch.count; i++) {
    out[i] = present(batch.present, i) ? batch.data.subarray(batch.offsets[i], batch.offsets[i + 1]) : null;
  }
  return out;
}

const utf8 = new TextDecoder("utf-8");
const toUtf8 = new TextEncoder();

/** The properties of each message as a `{name: value}` object of strings. */
export function propertiesOf(batch, count) {
  const out = [];
  for (let i = 0; i < count; i++) {
    const props = {};
    if (batch) {
      for (let j = batch.messageOffsets[i]; j < batch.messageOffsets[i + 1]; j++) {
        const name = utf8.decode(batch.names.subarray(batch.nameOffsets[j], batch.nameOffsets[j + 1]));
        props[name] = utf8.decode(batch.values.subarray(batch.valueOffsets[j], batch.valueOffsets[j + 1]));
      }
    }
    out.push(props);
  }
  return out;
}

/** Base class of a router: `constructor(options)` (options: a plain object of strings). */
export class Router {
  constructor(options) {
    this.options = options;
  }
  route(_keys, _partitions, _properties) {
    throw new Error(`${this.constructor.name} does not route`);
  }
}

/** Runs `impl.route` over a key batch and checks its answer (used by the export and by tests). */
export function routeBatch(impl, keys, properties, partitions) {
  const ks = keysOf(keys);
  const out = impl.constructor.wantsProperties
    ? impl.route(ks, partitions, propertiesOf(properties, ks.length))
    : impl.route(ks, partitions);
  if (out.length !== ks.length) {
    throw new Error(`route returned ${out.length} partitions for ${ks.length} messages`);
  }
  const result = new Uint32Array(out.length);
  for (let i = 0; i < out.length; i++) {
    const p = out[i];
    if (!(p >= 0 && p < partitions && p === Math.floor(p))) {
      throw new Error(`route returned partition ${p} for message ${i}, not an integer in 0..${partitions - 1}`);
    }
    result[i] = p;
  }
  return result;
}

function optionsObject(options) {
  const o = {};
  for (const [k, v] of options) o[k] = v;
  return o;
}

function configError(e) {
  if (e instanceof ConfigError) return { option: e.option, message: e.message };
  return { option: undefined, message: `${e && e.name ? e.name : "Error"}: ${e && e.message !== undefined ? e.message : e}` };
}

/**
 * The `routing` export of a router class: `export const routing = exportRouter(MyRouter)`.
 * Set `static wantsProperties = true` (and `wants-properties = true` in plugin.toml) to get the message
 * properties as a third argument. route-batch has no error result: a router that throws traps, and the
 * host replaces the instance and fails the batch, so route every key.
 */
export function exportRouter(RouterClass) {
  class Instance {
    constructor(impl) {
      this.impl = impl;
    }
    routeBatch(keys, properties, partitions) {
      return routeBatch(this.impl, keys, properties, partitions);
    }
  }
  return {
    Router: Instance,
    createRouter(options) {
      try {
        return new Instance(new RouterClass(optionsObject(options)));
      } catch (e) {
        throw configError(e);
      }
    },
  };
}

// ---- formats ----------------------------------------------------------------------------------------

const SIMPLE = ["boolean", "tinyint", "smallint", "int", "bigint", "float", "double", "date"];
const LENGTH = ["char", "varchar", "binary", "varbinary"];
const PRECISION = { time: "time", timestamp: "timestamp", "timestamp-ltz": "timestamp_ltz" };

/** The top-level fields of a row type: `{ name, kind, nullable, precision?, scale?, length? }`. */
export function fieldsOf(rowType) {
  return rowType.fields.map((f) => {
    const node = rowType.types[f.typeIndex];
    const dt = node.dataType;
    const field = { name: f.name, kind: dt.tag, nullable: node.nullable };
    if (SIMPLE.includes(dt.tag)) return field;
    if (LENGTH.includes(dt.tag)) return { ...field, length: dt.val };
    if (dt.tag in PRECISION) return { ...field, kind: PRECISION[dt.tag], precision: dt.val };
    if (dt.tag === "decimal") return { ...field, precision: dt.val.precision, scale: dt.val.scale };
    throw new ConfigError(`column \`${f.name}\` is ${dt.tag.toUpperCase()}: ARRAY, MAP and ROW columns are not supported by the JavaScript SDK`);
  });
}

/** Base class of a format: `constructor(options, fields)`, `decode(payloads)`, `encode(rows)`. */
export class Format {
  constructor(options, fields) {
    this.options = options;
    this.fields = fields;
  }
  decode(_payloads) {
    throw new Error(`${this.constructor.name} does not decode`);
  }
  encode(_rows) {
    throw new Error(`${this.constructor.name} does not encode`);
  }
}

const INT_BITS = { tinyint: 8, smallint: 16, int: 32 };

function unitPerSecond(p) {
  return p === 0 ? 1n : p <= 3 ? 1000n : p <= 6 ? 1000000n : 1000000000n;
}

// A value as the column's physical value; throws a message naming the problem.
function physical(f, v) {
  switch (f.kind) {
    case "boolean":
      if (typeof v !== "boolean") throw new Error(`expected a boolean, got ${typeof v}`);
      return v;
    case "tinyint":
    case "smallint":
    case "int": {
      if (!Number.isInteger(v)) throw new Error(`expected an integer, got ${v}`);
      const bound = 2 ** (INT_BITS[f.kind] - 1);
      if (v < -bound || v >= bound) throw new Error(`${v} is out of range for ${f.kind.toUpperCase()}`);
      return v;
    }
    case "bigint": {
      const b = typeof v === "bigint" ? v : Number.isInteger(v) ? BigInt(v) : null;
      if (b === null) throw new Error(`expected a BigInt or an integer, got ${v}`);
      if (b < -(2n ** 63n) || b >= 2n ** 63n) throw new Error(`${v} is out of range for BIGINT`);
      return b;
    }
    case "float":
    case "double":
      if (typeof v !== "number") throw new Error(`expected a number, got ${typeof v}`);
      return v;
    case "char":
    case "varchar":
      if (typeof v !== "string") throw new Error(`expected a string, got ${typeof v}`);
      return toUtf8.encode(v);
    case "binary":
    case "varbinary":
      if (!(v instanceof Uint8Array)) throw new Error(`expected a Uint8Array, got ${typeof v}`);
      return v;
    case "decimal":
      return unscaled(f, v);
    case "date":
      if (v instanceof Date) return Math.floor(v.getTime() / 86400000);
      if (!Number.isInteger(v)) throw new Error(`expected a Date or days since 1970-01-01, got ${v}`);
      return v;
    case "time":
      if (!Number.isInteger(v) && typeof v !== "bigint") throw new Error(`expected the time of day in the precision's unit, got ${v}`);
      return f.precision <= 3 ? Number(v) : BigInt(v);
    case "timestamp":
    case "timestamp_ltz": {
      if (v instanceof Date) {
        const ms = BigInt(v.getTime());
        const per = unitPerSecond(f.precision);
        return per >= 1000n ? ms * (per / 1000n) : ms / 1000n;
      }
      if (typeof v === "bigint") return v;
      if (Number.isInteger(v)) return BigInt(v);
      throw new Error(`expected a Date or an integer in the precision's unit, got ${v}`);
    }
    default:
      throw new Error(`unsupported column type ${f.kind}`);
  }
}

// "12.345" (or a number) as the unscaled BigInt of DECIMAL(p, s), rounded half-up.
function unscaled(f, v) {
  const text = typeof v === "bigint" ? v.toString() : typeof v === "number" ? String(v) : v;
  if (typeof text !== "string") throw new Error(`expected a decimal string, got ${typeof v}`);
  const m = /^([+-]?)(\d*)(?:\.(\d*))?$/.exec(text.trim());
  if (!m || (m[2] === "" && (m[3] === undefined || m[3] === ""))) throw new Error(`\`${text}\` is not a decimal number`);
  const frac = (m[3] || "").padEnd(f.scale + 1, "0");
  let u = BigInt((m[2] || "0") + frac.slice(0, f.scale));
  if (Number(frac[f.scale]) >= 5) u += 1n;
  if (u.toString().length > f.precision) throw new Error(`${text} does not fit DECIMAL(${f.precision}, ${f.scale})`);
  return m[1] === "-" ? -u : u;
}

function sqlName(f) {
  return f.kind.toUpperCase() + (f.nullable ? "" : " NOT NULL");
}

/** One row (an array in column order or an object by column name) as physical values. */
export function physicalRow(fields, row) {
  let values;
  if (Array.isArray(row)) {
    if (row.length !== fields.length) throw new Error(`${row.length} values, the table has ${fields.length} columns`);
    values = row;
  } else if (row !== null && typeof row === "object") {
    for (const k of Object.keys(row)) {
      if (!fields.some((f) => f.name === k)) throw new Error(`no column named \`${k}\``);
    }
    values = fields.map((f) => row[f.name]);
  } else {
    throw new Error(`a row is an array or an object, got ${row === null ? "null" : typeof row}`);
  }
  return fields.map((f, i) => {
    const v = values[i];
    if (v === null || v === undefined) {
      if (!f.nullable) throw new Error(`column \`${f.name}\` (${sqlName(f)}) is NOT NULL`);
      return null;
    }
    try {
      return physical(f, v);
    } catch (e) {
      throw new Error(`column \`${f.name}\` (${sqlName(f)}): ${e.message}`);
    }
  });
}

function bitmap(n, bit) {
  const out = new Uint8Array((n + 7) >> 3);
  for (let i = 0; i < n; i++) if (bit(i)) out[i >> 3] |= 1 << (i & 7);
  return out;
}

function column(f, values) {
  const n = values.length;
  const validity = values.every((v) => v !== null) ? undefined : bitmap(n, (i) => values[i] !== null);
  const fill = (Arr, zero) => {
    const a = new Arr(n);
    for (let i = 0; i < n; i++) a[i] = values[i] === null ? zero : values[i];
    return a;
  };
  let data;
  switch (f.kind) {
    case "boolean":
      data = { tag: "bits", val: bitmap(n, (i) => values[i] === true) };
      break;
    case "tinyint":
      data = { tag: "int8", val: fill(Int8Array, 0) };
      break;
    case "smallint":
      data = { tag: "int16", val: fill(Int16Array, 0) };
      break;
    case "int":
    case "date":
      data = { tag: "int32", val: fill(Int32Array, 0) };
      break;
    case "time":
      data = f.precision <= 3 ? { tag: "int32", val: fill(Int32Array, 0) } : { tag: "int64", val: fill(BigInt64Array, 0n) };
      break;
    case "bigint":
    case "timestamp":
    case "timestamp_ltz":
      data = { tag: "int64", val: fill(BigInt64Array, 0n) };
      break;
    case "float":
      data = { tag: "float32", val: fill(Float32Array, 0) };
      break;
    case "double":
      data = { tag: "float64", val: fill(Float64Array, 0) };
      break;
    case "decimal": {
      const words = new BigUint64Array(2 * n);
      for (let i = 0; i < n; i++) {
        const u = BigInt.asUintN(128, values[i] === null ? 0n : values[i]);
        words[2 * i] = BigInt.asUintN(64, u);
        words[2 * i + 1] = u >> 64n;
      }
      data = { tag: "decimal128", val: words };
      break;
    }
    default: {
      const offsets = new Uint32Array(n + 1);
      let total = 0;
      for (let i = 0; i < n; i++) {
        total += values[i] === null ? 0 : values[i].length;
        offsets[i + 1] = total;
      }
      const bytes = new Uint8Array(total);
      for (let i = 0; i < n; i++) if (values[i] !== null) bytes.set(values[i], offsets[i]);
      data = { tag: "bytes", val: { data: bytes, offsets } };
    }
  }
  return { validity, data };
}

/** A column-batch of rows made physical by `physicalRow`. */
export function buildColumns(fields, rows) {
  return { rowCount: rows.length, columns: fields.map((f, i) => column(f, rows.map((r) => r[i]))) };
}

/** The rows of a column batch as arrays of plain values in column order (BIGINT/TIMESTAMP as BigInt,
 * DECIMAL as a string, CHAR/VARCHAR as strings, BINARY as Uint8Array, DATE/TIME as numbers). */
export function readColumns(fields, batch) {
  const n = batch.rowCount;
  const cols = fields.map((f, c) => {
    const col = batch.columns[c];
    const d = col.data;
    const out = new Array(n);
    for (let i = 0; i < n; i++) {
      if (!present(col.validity, i)) {
        out[i] = null;
      } else if (d.tag === "bits") {
        out[i] = ((d.val[i >> 3] >> (i & 7)) & 1) === 1;
      } else if (d.tag === "bytes") {
        const b = d.val.data.subarray(d.val.offsets[i], d.val.offsets[i + 1]);
        out[i] = f.kind === "char" || f.kind === "varchar" ? utf8.decode(b) : b;
      } else if (d.tag === "decimal128") {
        const u = BigInt.asIntN(128, d.val[2 * i] | (d.val[2 * i + 1] << 64n));
        const digits = (u < 0n ? -u : u).toString().padStart(f.scale + 1, "0");
        const text = f.scale ? `${digits.slice(0, -f.scale)}.${digits.slice(-f.scale)}` : digits;
        out[i] = u < 0n ? `-${text}` : text;
      } else {
        out[i] = d.val[i];
      }
    }
    return out;
  });
  const rows = new Array(n);
  for (let i = 0; i < n; i++) rows[i] = cols.map((c) => c[i]);
  return rows;
}

function reason(e) {
  const text = e && e.message ? e.message : String(e);
  return e instanceof Skip ? SKIPPED + text : text;
}

/** Runs `impl.decode` over a message batch and builds the decoded batch. */
export function decodeBatch(impl, messages) {
  const payloads = new Array(messages.count);
  for (let i = 0; i < messages.count; i++) {
    payloads[i] = messages.payloads.subarray(messages.payloadOffsets[i], messages.payloadOffsets[i + 1]);
  }
  const result = impl.decode(payloads);
  if (result.length !== payloads.length) {
    throw new Error(`decode returned ${result.length} entries for ${payloads.length} payloads`);
  }
  const rows = [];
  const errors = [];
  result.forEach((entry, i) => {
    if (entry instanceof Error) {
      errors.push({ index: i, reason: reason(entry) });
      return;
    }
    try {
      rows.push(physicalRow(impl.fields, entry));
    } catch (e) {
      errors.push({ index: i, reason: e.message });
    }
  });
  return { rows: buildColumns(impl.fields, rows), messages: undefined, kinds: undefined, errors };
}

/** Runs `impl.encode` over a column batch and builds the encoded batch. */
export function encodeBatch(impl, batch) {
  const rows = readColumns(impl.fields, batch);
  const result = impl.encode(rows);
  if (result.length !== rows.length) throw new Error(`encode returned ${result.length} entries for ${rows.length} rows`);
  const offsets = new Uint32Array(rows.length + 1);
  const errors = [];
  let total = 0;
  result.forEach((entry, i) => {
    if (entry instanceof Uint8Array) total += entry.length;
    else if (typeof entry === "string") result[i] = toUtf8.encode(entry), (total += result[i].length);
    else errors.push({ index: i, reason: entry instanceof Error ? entry.message : `encode returned ${typeof entry}, not bytes` });
    offsets[i + 1] = total;
  });
  const payloads = new Uint8Array(total);
  result.forEach((entry, i) => {
    if (entry instanceof Uint8Array) payloads.set(entry, offsets[i]);
  });
  return { payloads, offsets, absent: undefined, errors };
}

function make(FormatClass, options, rowType) {
  return new FormatClass(optionsObject(options), fieldsOf(rowType));
}

function batchError(e) {
  return `${e && e.name ? e.name : "Error"}: ${e && e.message !== undefined ? e.message : e}`;
}

/** The `codec` export of a format class: `export const codec = exportFormat(MyFormat)`. */
export function exportFormat(FormatClass) {
  class Decoder {
    constructor(impl) {
      this.impl = impl;
    }
    decodeBatch(messages) {
      try {
        return decodeBatch(this.impl, messages);
      } catch (e) {
        throw batchError(e);
      }
    }
  }
  class Encoder {
    constructor(impl) {
      this.impl = impl;
    }
    encodeBatch(rows, kinds) {
      if (kinds && kinds.some((k) => k !== "insert")) throw "this format writes inserts only";
      try {
        return encodeBatch(this.impl, rows);
      } catch (e) {
        throw batchError(e);
      }
    }
  }
  return {
    Decoder,
    Encoder,
    createDecoder(options, rowType, metadata) {
      if (metadata.length) throw { option: undefined, message: `no metadata keys are readable, asked for ${metadata.join(", ")}` };
      try {
        return new Decoder(make(FormatClass, options, rowType));
      } catch (e) {
        throw configError(e);
      }
    },
    createEncoder(options, rowType) {
      try {
        return new Encoder(make(FormatClass, options, rowType));
      } catch (e) {
        throw configError(e);
      }
    },
  };
}
