"""The router half of the Python SDK, natively (generated router@0.1.0 bindings on the path)."""

import unittest

from componentize_py_types import Err
from wit_world.imports import types

from pulsar_connect_plugin import ConfigError
from pulsar_connect_plugin.router import Router, export_router


def key_batch(keys):
    data, offsets, present = b"", [0], bytearray((len(keys) + 7) // 8)
    for i, k in enumerate(keys):
        if k is not None:
            data += k
            present[i >> 3] |= 1 << (i & 7)
        offsets.append(len(data))
    return types.KeyBatch(len(keys), data, offsets, bytes(present))


class Length(Router):
    def route(self, keys, partitions):
        return [len(k) % partitions if k is not None else 0 for k in keys]


class ByProperty(Router):
    wants_properties = True

    def route(self, keys, partitions, properties):
        return [int(p.get("p", "0")) % partitions for p in properties]


class RouterTest(unittest.TestCase):
    def test_keys_and_missing_keys(self):
        r = export_router(Length)().create_router([])
        self.assertEqual(r.route_batch(key_batch([b"abc", None, b"", b"abcdef"]), None, 4), [3, 0, 0, 2])

    def test_properties(self):
        r = export_router(ByProperty)().create_router([])
        props = types.PropertyBatch([0, 1, 1], b"p", [0, 1], b"7", [0, 1])
        self.assertEqual(r.route_batch(key_batch([b"a", b"b"]), props, 4), [3, 0])

    def test_a_partition_out_of_range_is_a_bug(self):
        class Bad(Router):
            def route(self, keys, partitions):
                return [partitions for _ in keys]

        r = export_router(Bad)().create_router([])
        with self.assertRaisesRegex(ValueError, "route returned partition 2, not an int in 0..1"):
            r.route_batch(key_batch([b"a"]), None, 2)

    def test_config_error(self):
        class Picky(Router):
            def __init__(self, options):
                raise ConfigError("required", option="property")

        with self.assertRaises(Err) as e:
            export_router(Picky)().create_router([])
        self.assertEqual(e.exception.value, types.ConfigError("property", "required"))


if __name__ == "__main__":
    unittest.main()
