"""The format half of the Python SDK, natively (CPython with componentize-py's generated bindings on
the path: see sdk/python/README.md, "Testing"): values → columns → values, row errors, the factory."""

import datetime
import decimal
import unittest

from componentize_py_types import Err
from wit_world.imports import types

from pulsar_connect_plugin import SKIPPED, ConfigError, Skip
from pulsar_connect_plugin import columns
from pulsar_connect_plugin.format import Columns, Format, decode_batch, encode_batch, export_format


def node(dt, nullable=True):
    return types.TypeNode(dt, nullable)


def row_type(*cols):
    """cols: (name, data-type, nullable)"""
    return types.RowType(
        [node(dt, n) for _, dt, n in cols], [types.Field(name, i) for i, (name, _, _) in enumerate(cols)]
    )


def message_batch(payloads):
    offsets = [0]
    for p in payloads:
        offsets.append(offsets[-1] + len(p))
    keys = types.KeyBatch(len(payloads), b"", [0] * (len(payloads) + 1), bytes((len(payloads) + 7) // 8))
    return types.MessageBatch(len(payloads), b"".join(payloads), offsets, keys, None, None)


ALL = row_type(
    ("b", types.DataType_Boolean(), True),
    ("t", types.DataType_Tinyint(), True),
    ("s", types.DataType_Smallint(), True),
    ("i", types.DataType_Int(), False),
    ("l", types.DataType_Bigint(), True),
    ("f", types.DataType_Float(), True),
    ("d", types.DataType_Double(), True),
    ("m", types.DataType_Decimal(types.DecimalType(10, 2)), True),
    ("v", types.DataType_Varchar(2147483647), True),
    ("y", types.DataType_Varbinary(2147483647), True),
    ("dt", types.DataType_Date(), True),
    ("tm", types.DataType_Time(3), True),
    ("ts", types.DataType_Timestamp(6), True),
    ("tz", types.DataType_TimestampLtz(3), True),
)

ROW = (
    True,
    -5,
    300,
    7,
    -(1 << 62),
    1.5,
    2.25,
    decimal.Decimal("-12.34"),
    "héllo",
    b"\x00\xff",
    datetime.date(2024, 2, 29),
    datetime.time(13, 14, 15, 123000),
    datetime.datetime(2024, 2, 29, 1, 2, 3, 456789),
    datetime.datetime(2024, 2, 29, 1, 2, 3, 456000, tzinfo=datetime.timezone.utc),
)


class Echo(Format):
    """Decodes `repr`-free test rows from an index into a table of rows."""

    rows = []

    def decode(self, payloads):
        return [self.rows[int(p)] for p in payloads]

    def encode(self, rows):
        self.seen = rows
        return [b"row" for _ in rows]


class ColumnsTest(unittest.TestCase):
    def fields(self):
        return columns.fields_of(ALL)

    def test_every_type_round_trips(self):
        fields = self.fields()
        nulls = tuple(None if f.nullable else 1 for f in fields)
        batch = columns.build_columns(fields, [columns.physical_row(fields, r) for r in (ROW, nulls)])
        self.assertEqual(batch.row_count, 2)
        self.assertEqual(columns.read_columns(fields, batch), [ROW, nulls])

    def test_physical_layout_is_the_contracts(self):
        fields = self.fields()
        batch = columns.build_columns(fields, [columns.physical_row(fields, ROW)])
        by_name = dict(zip([f.name for f in fields], batch.columns))
        self.assertEqual(by_name["b"].data, types.ColumnData_Bits(b"\x01"))
        self.assertEqual(by_name["t"].data, types.ColumnData_Int8(bytes([251])))
        self.assertEqual(by_name["m"].data, types.ColumnData_Decimal128([(1 << 64) - 1234, (1 << 64) - 1]))
        self.assertEqual(by_name["v"].data.value.data, "héllo".encode())
        self.assertEqual(by_name["dt"].data, types.ColumnData_Int32([19782]))
        self.assertEqual(by_name["tm"].data, types.ColumnData_Int32([47655123]))
        self.assertEqual(by_name["ts"].data, types.ColumnData_Int64([1709168523456789]))
        self.assertEqual(by_name["tz"].data, types.ColumnData_Int64([1709168523456]))
        self.assertIsNone(by_name["i"].validity)

    def test_bad_values_name_the_column(self):
        fields = self.fields()
        for index, value, text in [
            (3, None, "column `i` (INT NOT NULL) is NOT NULL"),
            (1, 200, "column `t` (TINYINT): 200 is out of range for TINYINT"),
            (7, decimal.Decimal("123456789.1"), "does not fit DECIMAL(10, 2)"),
            (8, 5, "column `v` (STRING): expected str, got int"),
            (0, 1, "expected bool, got int"),
        ]:
            row = list(ROW)
            row[index] = value
            with self.assertRaises(ValueError) as e:
                columns.physical_row(fields, row)
            self.assertIn(text, str(e.exception))
        with self.assertRaisesRegex(ValueError, "no column named 'nope'"):
            columns.physical_row(fields, {"nope": 1})
        with self.assertRaisesRegex(ValueError, "2 values, the table has 14 columns"):
            columns.physical_row(fields, [1, 2])

    def test_nested_types_are_refused_by_name(self):
        rt = types.RowType(
            [node(types.DataType_Array(1)), node(types.DataType_Int())], [types.Field("tags", 0)]
        )
        with self.assertRaisesRegex(columns.UnsupportedType, "column `tags` is ARRAY"):
            columns.fields_of(rt)


class FormatTest(unittest.TestCase):
    def setUp(self):
        self.rt = row_type(("id", types.DataType_Int(), False), ("name", types.DataType_Varchar(10), True))
        self.codec = export_format(Echo)()

    def test_rows_errors_and_skips_by_message(self):
        Echo.rows = [(1, "a"), ValueError("broken"), {"id": 3}, Skip("empty"), ("x", "y")]
        decoder = self.codec.create_decoder([], self.rt, [])
        out = decoder.decode_batch(message_batch([b"0", b"1", b"2", b"3", b"4"]))
        self.assertEqual(out.rows.row_count, 2)
        self.assertEqual(out.rows.columns[0].data, types.ColumnData_Int32([1, 3]))
        self.assertEqual(out.rows.columns[1].validity, b"\x01")
        self.assertEqual(
            [(e.index, e.reason) for e in out.errors],
            [(1, "broken"), (3, SKIPPED + "empty"), (4, "column `id` (INT NOT NULL): expected int, got str")],
        )
        self.assertIsNone(out.messages)
        self.assertIsNone(out.kinds)

    def test_columns_are_accepted(self):
        class Cols(Format):
            def decode(self, payloads):
                return Columns({"id": [len(p) for p in payloads], "name": [p.decode() for p in payloads]})

        d = make_decoder(Cols, self.rt)
        out = decode_batch(d, message_batch([b"ab", b"c"]))
        self.assertEqual(out.rows.columns[0].data, types.ColumnData_Int32([2, 1]))
        self.assertEqual(out.errors, [])

    def test_a_raised_exception_refuses_the_batch(self):
        class Boom(Format):
            def decode(self, payloads):
                raise RuntimeError("no")

        decoder = export_format(Boom)().create_decoder([], self.rt, [])
        with self.assertRaises(Err) as e:
            decoder.decode_batch(message_batch([b"1"]))
        self.assertEqual(e.exception.value, "RuntimeError: no")

    def test_wrong_count_refuses_the_batch(self):
        class Short(Format):
            def decode(self, payloads):
                return []

        decoder = export_format(Short)().create_decoder([], self.rt, [])
        with self.assertRaises(Err) as e:
            decoder.decode_batch(message_batch([b"1"]))
        self.assertIn("decode returned 0 entries for 1 payloads", e.exception.value)

    def test_config_errors_name_the_option(self):
        class Picky(Format):
            def __init__(self, options, fields):
                raise ConfigError("must be one character", option="delimiter")

        with self.assertRaises(Err) as e:
            export_format(Picky)().create_decoder([("delimiter", "ab")], self.rt, [])
        self.assertEqual(e.exception.value, types.ConfigError("delimiter", "must be one character"))

    def test_encode_reads_rows_and_reports_errors(self):
        class Enc(Format):
            def encode(self, rows):
                return [f"{r[0]}:{r[1]}".encode() if r[1] else ValueError("no name") for r in rows]

        encoder = export_format(Enc)().create_encoder([], self.rt)
        fields = columns.fields_of(self.rt)
        batch = columns.build_columns(fields, [columns.physical_row(fields, r) for r in [(1, "a"), (2, None)]])
        out = encoder.encode_batch(batch, None)
        self.assertEqual(out.payloads, b"1:a")
        self.assertEqual(out.offsets, [0, 3, 3])
        self.assertEqual([(e.index, e.reason) for e in out.errors], [(1, "no name")])


def make_decoder(cls, rt):
    from pulsar_connect_plugin.format import make

    return make(cls, [], rt)


if __name__ == "__main__":
    unittest.main()
