"""Unit tests of the `{{name}}` format, run natively by CPython (see README.md, "Test")."""

import unittest

from wit_world.imports import types

from pulsar_connect_plugin.format import decode_batch, encode_batch, make

import app

ROW_TYPE = types.RowType(
    [
        types.TypeNode(types.DataType_Int(), False),
        types.TypeNode(types.DataType_Varchar(2147483647), True),
        types.TypeNode(types.DataType_Boolean(), True),
    ],
    [types.Field("id", 0), types.Field("name", 1), types.Field("active", 2)],
)


def messages(*payloads):
    offsets = [0]
    for p in payloads:
        offsets.append(offsets[-1] + len(p))
    n = len(payloads)
    keys = types.KeyBatch(n, b"", [0] * (n + 1), bytes((n + 7) // 8))
    return types.MessageBatch(n, b"".join(payloads), offsets, keys, None, None)


class DelimitedTest(unittest.TestCase):
    def setUp(self):
        self.format = make(app.Delimited, [("delimiter", ",")], ROW_TYPE)

    def test_decode(self):
        out = decode_batch(self.format, messages(b"7,alice,true", b"8,,", b"x,bob,false", b"9"))
        self.assertEqual(out.rows.row_count, 2)
        self.assertEqual(out.rows.columns[0].data, types.ColumnData_Int32([7, 8]))
        self.assertEqual([(e.index, e.reason) for e in out.errors][1], (3, "1 fields, expected 3"))
        self.assertEqual(out.errors[0].index, 2)

    def test_round_trip(self):
        decoded = decode_batch(self.format, messages(b"7,alice,true", b"8,,"))
        encoded = encode_batch(self.format, decoded.rows)
        self.assertEqual(encoded.payloads, b"7,alice,true8,,")
        self.assertEqual(encoded.offsets, [0, 12, 15])

    def test_options_are_checked(self):
        from pulsar_connect_plugin import ConfigError

        with self.assertRaises(ConfigError) as e:
            make(app.Delimited, [("delimiter", "ab")], ROW_TYPE)
        self.assertEqual(e.exception.option, "delimiter")


if __name__ == "__main__":
    unittest.main()
