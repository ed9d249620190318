// Unit tests of the `{{name}}` router, run natively by Node.js: `node --test`.
import { test } from "node:test";
import assert from "node:assert/strict";

import { routeBatch } from "./pulsar-connect-plugin.js";
import { KeyHash, fnv1a32, routing } from "./app.js";

function keys(...ks) {
  const enc = new TextEncoder();
  const parts = ks.map((k) => (k === null ? new Uint8Array() : enc.encode(k)));
  const offsets = new Uint32Array(ks.length + 1);
  parts.forEach((p, i) => (offsets[i + 1] = offsets[i] + p.length));
  const data = new Uint8Array(offsets[ks.length]);
  parts.forEach((p, i) => data.set(p, offsets[i]));
  const present = new Uint8Array((ks.length + 7) >> 3);
  ks.forEach((k, i) => k !== null && (present[i >> 3] |= 1 << (i & 7)));
  return { count: ks.length, data, offsets, present };
}

test("fnv1a32", () => {
  assert.equal(fnv1a32(new Uint8Array()), 0x811c9dc5);
  assert.equal(fnv1a32(new TextEncoder().encode("a")), 0xe40c292c);
});

test("keyed by hash, unkeyed round-robin", () => {
  const got = routeBatch(new KeyHash({ "start-partition": "1" }), keys("a", null, null, "a"), undefined, 4);
  assert.deepEqual(Array.from(got), [0xe40c292c % 4, 1, 2, 0xe40c292c % 4]);
});

test("a bad option is refused by name", () => {
  assert.throws(() => routing.createRouter([["start-partition", "x"]]), { option: "start-partition" });
});
