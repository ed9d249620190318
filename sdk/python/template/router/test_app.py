"""Unit tests of the `{{name}}` router, run natively by CPython (see README.md, "Test")."""

import unittest

from wit_world.imports import types

from pulsar_connect_plugin.router import route_batch

import app


def keys(*ks):
    data, offsets, present = b"", [0], bytearray((len(ks) + 7) // 8)
    for i, k in enumerate(ks):
        if k is not None:
            data += k
            present[i >> 3] |= 1 << (i & 7)
        offsets.append(len(data))
    return types.KeyBatch(len(ks), data, offsets, bytes(present))


class KeyHashTest(unittest.TestCase):
    def test_fnv(self):
        self.assertEqual(app.fnv1a32(b""), 0x811C9DC5)
        self.assertEqual(app.fnv1a32(b"a"), 0xE40C292C)

    def test_route(self):
        router = app.KeyHash({"start-partition": "1"})
        got = route_batch(router, keys(b"a", None, None, b"a"), None, 4)
        self.assertEqual(got, [0xE40C292C % 4, 1, 2, 0xE40C292C % 4])


if __name__ == "__main__":
    unittest.main()
