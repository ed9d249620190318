// The key-prefix example natively (`node --test`, with the SDK staged next to app.js).
import { test } from "node:test";
import assert from "node:assert/strict";

import { fnv1a32, routing } from "./app.js";

const enc = new TextEncoder();

function keys(...ks) {
  const parts = ks.map((k) => (k === null ? new Uint8Array() : enc.encode(k)));
  const offsets = new Uint32Array(ks.length + 1);
  parts.forEach((p, i) => (offsets[i + 1] = offsets[i] + p.length));
  const data = new Uint8Array(offsets[ks.length]);
  parts.forEach((p, i) => data.set(p, offsets[i]));
  const present = new Uint8Array((ks.length + 7) >> 3);
  ks.forEach((k, i) => k !== null && (present[i >> 3] |= 1 << (i & 7)));
  return { count: ks.length, data, offsets, present };
}

test("FNV-1a 32 reference values", () => {
  assert.equal(fnv1a32(enc.encode("")), 0x811c9dc5);
  assert.equal(fnv1a32(enc.encode("a")), 0xe40c292c);
  assert.equal(fnv1a32(enc.encode("foobar")), 0xbf9cf968);
});

test("keys sharing a prefix share a partition; unkeyed round-robin", () => {
  const router = routing.createRouter([["start-partition", "2"]]);
  const got = Array.from(router.routeBatch(keys("t1:a", "t1:b", "t2", null, null, "t2:x", ""), undefined, 5));
  const t1 = fnv1a32(enc.encode("t1")) % 5;
  const t2 = fnv1a32(enc.encode("t2")) % 5;
  assert.deepEqual(got, [t1, t1, t2, 2, 3, t2, 0x811c9dc5 % 5]);
});

test("another separator", () => {
  const router = routing.createRouter([["separator", "/"]]);
  const got = Array.from(router.routeBatch(keys("a/1", "a:1"), undefined, 7));
  assert.deepEqual(got, [fnv1a32(enc.encode("a")) % 7, fnv1a32(enc.encode("a:1")) % 7]);
});

test("options are refused by name", () => {
  assert.throws(() => routing.createRouter([["separator", "::"]]), { option: "separator" });
  assert.throws(() => routing.createRouter([["start-partition", "-1"]]), { option: "start-partition" });
});
