// Unit tests of the `{{name}}` format, run natively by Node.js: `node --test`.
import { test } from "node:test";
import assert from "node:assert/strict";

import { decodeBatch, encodeBatch, fieldsOf } from "./pulsar-connect-plugin.js";
import { Delimited, codec } from "./app.js";

const rowType = {
  types: [
    { dataType: { tag: "int" }, nullable: false },
    { dataType: { tag: "varchar", val: 2147483647 }, nullable: true },
    { dataType: { tag: "boolean" }, nullable: true },
  ],
  fields: [
    { name: "id", typeIndex: 0 },
    { name: "name", typeIndex: 1 },
    { name: "active", typeIndex: 2 },
  ],
};

function messages(...lines) {
  const parts = lines.map((l) => new TextEncoder().encode(l));
  const payloadOffsets = new Uint32Array(parts.length + 1);
  parts.forEach((p, i) => (payloadOffsets[i + 1] = payloadOffsets[i] + p.length));
  const payloads = new Uint8Array(payloadOffsets[parts.length]);
  parts.forEach((p, i) => payloads.set(p, payloadOffsets[i]));
  return { count: parts.length, payloads, payloadOffsets };
}

const format = () => new Delimited({ delimiter: "," }, fieldsOf(rowType));

test("decode", () => {
  const out = decodeBatch(format(), messages("7,alice,true", "8,,", "x,bob,false", "9"));
  assert.equal(out.rows.rowCount, 2);
  assert.deepEqual(Array.from(out.rows.columns[0].data.val), [7, 8]);
  assert.deepEqual(out.errors, [
    { index: 2, reason: "`x` is not an integer" },
    { index: 3, reason: "1 fields, expected 3" },
  ]);
});

test("round trip", () => {
  const f = format();
  const encoded = encodeBatch(f, decodeBatch(f, messages("7,alice,true", "8,,")).rows);
  assert.equal(new TextDecoder().decode(encoded.payloads), "7,alice,true8,,");
  assert.deepEqual(Array.from(encoded.offsets), [0, 12, 15]);
});

test("options are checked", () => {
  assert.throws(() => codec.createDecoder([["delimiter", ";;"]], rowType, []), { option: "delimiter" });
});
