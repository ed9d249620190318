// The JavaScript SDK natively (`node --test` in sdk/js/tests): values -> columns -> values, row errors,
// routers' answers checked, factory errors as config-error records.
import { test } from "node:test";
import assert from "node:assert/strict";

import {
  ConfigError,
  Format,
  Router,
  SKIPPED,
  Skip,
  buildColumns,
  decodeBatch,
  encodeBatch,
  exportFormat,
  exportRouter,
  fieldsOf,
  keysOf,
  physicalRow,
  propertiesOf,
  readColumns,
  routeBatch,
} from "../pulsar-connect-plugin.js";

const node = (tag, val, nullable = true) => ({ dataType: val === undefined ? { tag } : { tag, val }, nullable });
const ALL = {
  types: [
    node("boolean"),
    node("tinyint"),
    node("smallint"),
    node("int", undefined, false),
    node("bigint"),
    node("float"),
    node("double"),
    node("decimal", { precision: 10, scale: 2 }),
    node("varchar", 2147483647),
    node("varbinary", 2147483647),
    node("date"),
    node("time", 3),
    node("timestamp", 6),
    node("timestamp-ltz", 3),
  ],
  fields: ["b", "t", "s", "i", "l", "f", "d", "m", "v", "y", "dt", "tm", "ts", "tz"].map((name, typeIndex) => ({ name, typeIndex })),
};

const ROW = [true, -5, 300, 7, -(2n ** 62n), 1.5, 2.25, "-12.34", "héllo", new Uint8Array([0, 255]), 19782, 47655123, 1709168523456789n, 1709168523456n];

test("every type round-trips", () => {
  const fields = fieldsOf(ALL);
  const nulls = fields.map((f) => (f.nullable ? null : 1));
  const batch = buildColumns(fields, [physicalRow(fields, ROW), physicalRow(fields, nulls)]);
  assert.equal(batch.rowCount, 2);
  assert.deepEqual(readColumns(fields, batch), [ROW, nulls]);
  const m = batch.columns[7].data;
  assert.equal(m.tag, "decimal128");
  assert.deepEqual(Array.from(m.val.slice(0, 2)), [2n ** 64n - 1234n, 2n ** 64n - 1n]);
  assert.equal(batch.columns[1].data.tag, "int8");
  assert.deepEqual(Array.from(batch.columns[0].validity), [1]);
  assert.equal(batch.columns[3].validity, undefined);
});

test("decimals round half-up and are range-checked; bad values name the column", () => {
  const fields = fieldsOf(ALL);
  const at = (i, v) => {
    const r = ROW.slice();
    r[i] = v;
    return r;
  };
  assert.equal(physicalRow(fields, at(7, "0.125"))[7], 13n);
  assert.equal(physicalRow(fields, at(7, "-0.125"))[7], -13n);
  assert.throws(() => physicalRow(fields, at(7, "123456789.1")), /does not fit DECIMAL\(10, 2\)/);
  assert.throws(() => physicalRow(fields, at(3, null)), /column `i` \(INT NOT NULL\) is NOT NULL/);
  assert.throws(() => physicalRow(fields, at(1, 200)), /column `t` \(TINYINT\): 200 is out of range/);
  assert.throws(() => physicalRow(fields, at(8, 5)), /expected a string/);
  assert.throws(() => physicalRow(fields, { nope: 1 }), /no column named `nope`/);
});

test("nested types are refused by name", () => {
  const rt = { types: [node("array", 1), node("int")], fields: [{ name: "tags", typeIndex: 0 }] };
  assert.throws(() => fieldsOf(rt), (e) => e instanceof ConfigError && /column `tags` is ARRAY/.test(e.message));
});

function messages(...lines) {
  const parts = lines.map((l) => new TextEncoder().encode(l));
  const payloadOffsets = new Uint32Array(parts.length + 1);
  parts.forEach((p, i) => (payloadOffsets[i + 1] = payloadOffsets[i] + p.length));
  const payloads = new Uint8Array(payloadOffsets[parts.length]);
  parts.forEach((p, i) => payloads.set(p, payloadOffsets[i]));
  return { count: parts.length, payloads, payloadOffsets };
}

const ID_NAME = {
  types: [node("int", undefined, false), node("varchar", 10)],
  fields: [{ name: "id", typeIndex: 0 }, { name: "name", typeIndex: 1 }],
};

class Table extends Format {
  decode(payloads) {
    return payloads.map((p) => Table.rows[Number(new TextDecoder().decode(p))]);
  }
}

test("rows, errors and skips by message", () => {
  Table.rows = [[1, "a"], new Error("broken"), { id: 3 }, new Skip("empty"), ["x", "y"]];
  const decoder = exportFormat(Table).createDecoder([], ID_NAME, []);
  const out = decoder.decodeBatch(messages("0", "1", "2", "3", "4"));
  assert.equal(out.rows.rowCount, 2);
  assert.deepEqual(Array.from(out.rows.columns[0].data.val), [1, 3]);
  assert.deepEqual(Array.from(out.rows.columns[1].validity), [1]);
  assert.deepEqual(out.errors, [
    { index: 1, reason: "broken" },
    { index: 3, reason: SKIPPED + "empty" },
    { index: 4, reason: "column `id` (INT NOT NULL): expected an integer, got x" },
  ]);
  assert.equal(out.messages, undefined);
});

test("a throw refuses the batch; a config error names its option", () => {
  class Boom extends Format {
    decode() {
      throw new Error("no");
    }
  }
  assert.throws(() => exportFormat(Boom).createDecoder([], ID_NAME, []).decodeBatch(messages("1")), (e) => e === "Error: no");
  class Picky extends Format {
    constructor() {
      throw new ConfigError("must be one character", "delimiter");
    }
  }
  assert.throws(() => exportFormat(Picky).createDecoder([], ID_NAME, []), (e) => e.option === "delimiter" && e.message === "must be one character");
});

test("encode reads rows and reports errors", () => {
  class Enc extends Format {
    encode(rows) {
      return rows.map((r) => (r[1] === null ? new Error("no name") : `${r[0]}:${r[1]}`));
    }
  }
  const fields = fieldsOf(ID_NAME);
  const batch = buildColumns(fields, [physicalRow(fields, [1, "a"]), physicalRow(fields, [2, null])]);
  const out = encodeBatch(new Enc({}, fields), batch);
  assert.equal(new TextDecoder().decode(out.payloads), "1:a");
  assert.deepEqual(Array.from(out.offsets), [0, 3, 3]);
  assert.deepEqual(out.errors, [{ index: 1, reason: "no name" }]);
  assert.throws(() => exportFormat(Enc).createDecoder([], ID_NAME, []).decodeBatch(messages("1")), (e) => e === "Error: Enc does not decode");
});

function keyBatch(ks) {
  const parts = ks.map((k) => (k === null ? new Uint8Array() : new TextEncoder().encode(k)));
  const offsets = new Uint32Array(ks.length + 1);
  parts.forEach((p, i) => (offsets[i + 1] = offsets[i] + p.length));
  const data = new Uint8Array(offsets[ks.length]);
  parts.forEach((p, i) => data.set(p, offsets[i]));
  const present = new Uint8Array((ks.length + 7) >> 3);
  ks.forEach((k, i) => k !== null && (present[i >> 3] |= 1 << (i & 7)));
  return { count: ks.length, data, offsets, present };
}

test("keys, properties, routers' answers checked", () => {
  assert.deepEqual(keysOf(keyBatch(["ab", null])).map((k) => k && Array.from(k)), [[97, 98], null]);
  const props = { messageOffsets: new Uint32Array([0, 1, 1]), names: new TextEncoder().encode("p"), nameOffsets: new Uint32Array([0, 1]), values: new TextEncoder().encode("7"), valueOffsets: new Uint32Array([0, 1]) };
  assert.deepEqual(propertiesOf(props, 2), [{ p: "7" }, {}]);
  class ByProperty extends Router {
    static wantsProperties = true;
    route(keys, n, properties) {
      return properties.map((p) => Number(p.p ?? 0) % n);
    }
  }
  assert.deepEqual(Array.from(exportRouter(ByProperty).createRouter([]).routeBatch(keyBatch(["a", "b"]), props, 4)), [3, 0]);
  class Bad extends Router {
    route(keys, n) {
      return keys.map(() => n);
    }
  }
  assert.throws(() => routeBatch(new Bad({}), keyBatch(["a"]), undefined, 2), /route returned partition 2 for message 0, not an integer in 0..1/);
  class Short extends Router {
    route() {
      return [];
    }
  }
  assert.throws(() => routeBatch(new Short({}), keyBatch(["a"]), undefined, 2), /route returned 0 partitions for 1 messages/);
});
