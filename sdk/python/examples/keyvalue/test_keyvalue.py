"""The keyvalue example natively: decoding, row errors and skips, encoding, options."""

import datetime
import decimal
import unittest

from wit_world.imports import types

from pulsar_connect_plugin import SKIPPED, ConfigError
from pulsar_connect_plugin.columns import fields_of, read_columns
from pulsar_connect_plugin.format import decode_batch, encode_batch, make

import app

ROW_TYPE = types.RowType(
    [
        types.TypeNode(types.DataType_Bigint(), False),
        types.TypeNode(types.DataType_Varchar(2147483647), True),
        types.TypeNode(types.DataType_Double(), True),
        types.TypeNode(types.DataType_Boolean(), True),
        types.TypeNode(types.DataType_Decimal(types.DecimalType(8, 2)), True),
        types.TypeNode(types.DataType_Timestamp(3), True),
    ],
    [
        types.Field("id", 0),
        types.Field("name", 1),
        types.Field("score", 2),
        types.Field("ok", 3),
        types.Field("price", 4),
        types.Field("at", 5),
    ],
)


def messages(*payloads):
    offsets = [0]
    for p in payloads:
        offsets.append(offsets[-1] + len(p))
    n = len(payloads)
    return types.MessageBatch(
        n, b"".join(payloads), offsets, types.KeyBatch(n, b"", [0] * (n + 1), bytes((n + 7) // 8)), None, None
    )


def rows(out):
    return read_columns(fields_of(ROW_TYPE), out.rows)


class KeyValueTest(unittest.TestCase):
    def test_decode_by_name(self):
        kv = make(app.KeyValue, [], ROW_TYPE)
        out = decode_batch(
            kv,
            messages(
                b"id=1,name=alice,score=9.5,ok=true,price=12.30,at=2024-02-29T01:02:03.456",
                b"name=bob, id=2 ,unknown=x",
                b"id=3,score=fast",
                b"id",
                b"name=carol",
                b"\xff",
            ),
        )
        self.assertEqual(
            rows(out),
            [
                (1, "alice", 9.5, True, decimal.Decimal("12.30"), datetime.datetime(2024, 2, 29, 1, 2, 3, 456000)),
                (2, "bob", None, None, None, None),
            ],
        )
        self.assertEqual(
            [(e.index, e.reason) for e in out.errors],
            [
                (2, "key `score`: `fast` is not a DOUBLE: could not convert string to float: 'fast'"),
                (3, "`id` has no `=`"),
                (4, "column `id` (BIGINT NOT NULL) is NOT NULL"),
                (5, "not UTF-8 at byte 0"),
            ],
        )

    def test_lenient_and_strict(self):
        kv = make(app.KeyValue, [("ignore-parse-errors", "true"), ("fail-on-unknown-key", "true")], ROW_TYPE)
        out = decode_batch(kv, messages(b"id=3,score=fast", b"id=4,color=red", b"id"))
        self.assertEqual(rows(out), [(3, None, None, None, None, None)])
        self.assertEqual(
            [(e.index, e.reason) for e in out.errors],
            [(1, SKIPPED + "unknown key `color`"), (2, SKIPPED + "`id` has no `=`")],
        )

    def test_other_delimiters_and_round_trip(self):
        kv = make(app.KeyValue, [("pair-delimiter", " "), ("key-value-separator", ":")], ROW_TYPE)
        out = decode_batch(kv, messages(b"id:5 name:eve price:-1.5", b"id:6"))
        encoded = encode_batch(kv, out.rows)
        self.assertEqual(encoded.payloads, b"id:5 name:eve price:-1.50id:6")
        self.assertEqual(encoded.errors, [])

    def test_options_are_checked(self):
        for options, option in [
            ([("pair-delimiter", ";;")], "pair-delimiter"),
            ([("key-value-separator", ",")], "key-value-separator"),
            ([("ignore-parse-errors", "yes")], "ignore-parse-errors"),
        ]:
            with self.assertRaises(ConfigError) as e:
                make(app.KeyValue, options, ROW_TYPE)
            self.assertEqual(e.exception.option, option)


if __name__ == "__main__":
    unittest.main()
