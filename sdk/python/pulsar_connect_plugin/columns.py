"""Plain Python values ⇄ the contract's columns (``column-batch``), for the top-level field types.

Values by SQL type (``None`` is NULL everywhere):

=====================================  ===============================================================
BOOLEAN                                ``bool``
TINYINT / SMALLINT / INT / BIGINT      ``int`` (range-checked)
FLOAT / DOUBLE                         ``float`` (an ``int`` is accepted)
DECIMAL(p, s)                          ``decimal.Decimal`` (or ``int``/``str``), rounded half-up to s
CHAR / VARCHAR / STRING                ``str``
BINARY / VARBINARY / BYTES             ``bytes`` (``bytearray``/``memoryview`` accepted)
DATE                                   ``datetime.date`` (or an ``int``: days since 1970-01-01)
TIME(p)                                ``datetime.time`` (or an ``int`` in the precision's unit)
TIMESTAMP(p)                           naive ``datetime.datetime`` (or an ``int`` in the unit)
TIMESTAMP_LTZ(p)                       aware ``datetime.datetime`` (naive is taken as UTC; or an ``int``)
=====================================  ===============================================================

The unit of an ``int`` time value follows the precision: p = 0 seconds, 1..3 milliseconds, 4..6
microseconds, 7..9 nanoseconds. ``datetime`` has microseconds, so reading a TIME/TIMESTAMP with p > 6
as a ``datetime`` drops the nanoseconds (``read_columns(..., raw_times=True)`` gives the ints).
ARRAY, MAP and ROW columns are not supported by this SDK (the factory refuses such a table).
"""

import datetime as _dt
import decimal as _decimal
import functools
from typing import Any, List, Optional, Sequence

from wit_world.imports import types

from . import Field

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MASK64 = (1 << 64) - 1

_SIMPLE = {
    "DataType_Boolean": "boolean",
    "DataType_Tinyint": "tinyint",
    "DataType_Smallint": "smallint",
    "DataType_Int": "int",
    "DataType_Bigint": "bigint",
    "DataType_Float": "float",
    "DataType_Double": "double",
    "DataType_Date": "date",
}
_LENGTH = {
    "DataType_Char": "char",
    "DataType_Varchar": "varchar",
    "DataType_Binary": "binary",
    "DataType_Varbinary": "varbinary",
}
_PRECISION = {
    "DataType_Time": "time",
    "DataType_Timestamp": "timestamp",
    "DataType_TimestampLtz": "timestamp_ltz",
}
_INT_RANGE = {
    "tinyint": 1 << 7,
    "smallint": 1 << 15,
    "int": 1 << 31,
    "bigint": 1 << 63,
}


class UnsupportedType(Exception):
    """A field whose type this SDK cannot handle (ARRAY, MAP, ROW)."""


def fields_of(row_type: "types.RowType") -> List[Field]:
    """The top-level fields of ``row_type``; raises :class:`UnsupportedType` for nested types."""
    out = []
    for f in row_type.fields:
        node = row_type.types[f.type_index]
        dt = node.data_type
        name = type(dt).__name__
        if name in _SIMPLE:
            out.append(Field(f.name, _SIMPLE[name], node.nullable))
        elif name in _LENGTH:
            out.append(Field(f.name, _LENGTH[name], node.nullable, length=dt.value))
        elif name in _PRECISION:
            out.append(Field(f.name, _PRECISION[name], node.nullable, precision=dt.value))
        elif name == "DataType_Decimal":
            out.append(
                Field(
                    f.name,
                    "decimal",
                    node.nullable,
                    precision=dt.value.precision,
                    scale=dt.value.scale,
                )
            )
        else:
            kind = name.removeprefix("DataType_").upper()
            raise UnsupportedType(
                f"column `{f.name}` is {kind}: ARRAY, MAP and ROW columns are not supported by the Python SDK"
            )
    return out


def _unit_per_second(precision: int) -> int:
    if precision == 0:
        return 1
    if precision <= 3:
        return 1_000
    if precision <= 6:
        return 1_000_000
    return 1_000_000_000


def _micros_to_unit(micros: int, precision: int) -> int:
    per = _unit_per_second(precision)
    if per >= 1_000_000:
        return micros * (per // 1_000_000)
    return micros // (1_000_000 // per)


def _unit_to_micros(value: int, precision: int) -> int:
    per = _unit_per_second(precision)
    if per >= 1_000_000:
        return value // (per // 1_000_000)
    return value * (1_000_000 // per)


def _physical(field: Field, value: Any) -> Any:
    """``value`` as the column's physical value (int, float, bool, bytes); raises ValueError/TypeError."""
    k = field.kind
    if k == "boolean":
        if not isinstance(value, bool):
            raise TypeError(f"expected bool, got {type(value).__name__}")
        return value
    if k in _INT_RANGE:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected int, got {type(value).__name__}")
        bound = _INT_RANGE[k]
        if not -bound <= value < bound:
            raise ValueError(f"{value} is out of range for {k.upper()}")
        return value
    if k in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"expected float, got {type(value).__name__}")
        return float(value)
    if k in ("char", "varchar"):
        if not isinstance(value, str):
            raise TypeError(f"expected str, got {type(value).__name__}")
        return value.encode("utf-8")
    if k in ("binary", "varbinary"):
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"expected bytes, got {type(value).__name__}")
        return bytes(value)
    if k == "decimal":
        if isinstance(value, (bool, float)):
            raise TypeError(f"expected Decimal, got {type(value).__name__} (floats are inexact)")
        d = _decimal.Decimal(value)
        if not d.is_finite():
            raise ValueError(f"{value} is not a finite number")
        unscaled = int(d.scaleb(field.scale).quantize(_decimal.Decimal(1), rounding=_decimal.ROUND_HALF_UP))
        if len(str(abs(unscaled))) > field.precision:
            raise ValueError(f"{value} does not fit DECIMAL({field.precision}, {field.scale})")
        return unscaled
    if k == "date":
        if isinstance(value, _dt.datetime):
            raise TypeError("expected date, got datetime")
        if isinstance(value, _dt.date):
            return (value - _EPOCH_DATE).days
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError(f"expected date, got {type(value).__name__}")
    if k == "time":
        if isinstance(value, _dt.time):
            micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
            return _micros_to_unit(micros, field.precision)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError(f"expected time, got {type(value).__name__}")
    if k in ("timestamp", "timestamp_ltz"):
        if isinstance(value, _dt.datetime):
            if k == "timestamp_ltz" and value.tzinfo is not None:
                delta = value - _EPOCH_UTC
            else:
                delta = value.replace(tzinfo=None) - _EPOCH
            micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
            return _micros_to_unit(micros, field.precision)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError(f"expected datetime, got {type(value).__name__}")
    raise TypeError(f"unsupported column type {k}")


def _converter(field: Field):
    """A function turning one non-NULL value of ``field`` into its physical value (the common types
    inlined, the others through :func:`_physical`)."""
    k = field.kind
    if k in _INT_RANGE:
        lo, hi = -_INT_RANGE[k], _INT_RANGE[k]

        def integer(v):
            if type(v) is int and lo <= v < hi:
                return v
            return _physical(field, v)

        return integer
    if k in ("char", "varchar"):

        def text(v):
            if type(v) is str:
                return v.encode("utf-8")
            return _physical(field, v)

        return text
    if k in ("float", "double"):

        def number(v):
            if type(v) is float:
                return v
            return _physical(field, v)

        return number
    return functools.partial(_physical, field)


def row_converter(fields: Sequence[Field]):
    """The :func:`physical_row` of one table, with the per-column work (name lookup, converters) done
    once: ``convert = row_converter(fields); convert(row)``."""
    fields = tuple(fields)
    names = {f.name: i for i, f in enumerate(fields)}
    converters = [_converter(f) for f in fields]
    width = len(fields)

    def convert(row: Any) -> List[Any]:
        if isinstance(row, dict):
            values = [None] * width
            for name, v in row.items():
                i = names.get(name)
                if i is None:
                    unknown = [k for k in row if k not in names]
                    raise ValueError(f"no column named {', '.join(map(repr, unknown))}")
                values[i] = v
        else:
            values = list(row)
            if len(values) != width:
                raise ValueError(f"{len(values)} values, the table has {width} columns")
        for i, v in enumerate(values):
            if v is None:
                f = fields[i]
                if not f.nullable:
                    raise ValueError(f"column `{f.name}` ({f.sql}) is NOT NULL")
                continue
            try:
                values[i] = converters[i](v)
            except (TypeError, ValueError, ArithmeticError) as e:
                f = fields[i]
                raise ValueError(f"column `{f.name}` ({f.sql}): {e}") from None
        return values

    return convert


def physical_row(fields: Sequence[Field], row: Any) -> List[Any]:
    """One row (a sequence in field order, or a dict by field name) as physical values.

    Raises ValueError naming the column for a value that does not fit its type, a NULL in a NOT NULL
    column or a row of the wrong width. For many rows of one table use :func:`row_converter`."""
    return row_converter(fields)(row)


def _bitmap(flags: Sequence[bool]) -> bytes:
    out = bytearray((len(flags) + 7) // 8)
    for i, f in enumerate(flags):
        if f:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def _column(field: Field, values: List[Any]) -> "types.Column":
    present = [v is not None for v in values]
    validity = None if all(present) else _bitmap(present)
    k = field.kind
    if k == "boolean":
        data = types.ColumnData_Bits(_bitmap([bool(v) for v in values]))
    elif k == "tinyint":
        data = types.ColumnData_Int8(bytes((v or 0) & 0xFF for v in values))
    elif k == "smallint":
        data = types.ColumnData_Int16([v or 0 for v in values])
    elif k in ("int", "date") or (k == "time" and field.precision <= 3):
        data = types.ColumnData_Int32([v or 0 for v in values])
    elif k in ("bigint", "time", "timestamp", "timestamp_ltz"):
        data = types.ColumnData_Int64([v or 0 for v in values])
    elif k == "float":
        data = types.ColumnData_Float32([v or 0.0 for v in values])
    elif k == "double":
        data = types.ColumnData_Float64([v or 0.0 for v in values])
    elif k == "decimal":
        words = []
        for v in values:
            u = v or 0
            words.append(u & _MASK64)
            words.append((u >> 64) & _MASK64)
        data = types.ColumnData_Decimal128(words)
    else:
        offsets = [0]
        for v in values:
            offsets.append(offsets[-1] + (len(v) if v is not None else 0))
        data = types.ColumnData_Bytes(types.ByteColumn(b"".join(v for v in values if v is not None), offsets))
    return types.Column(validity, data)


def build_columns(fields: Sequence[Field], rows: Sequence[List[Any]]) -> "types.ColumnBatch":
    """A ``column-batch`` of rows already made physical by :func:`physical_row`."""
    columns = [_column(f, [r[i] for r in rows]) for i, f in enumerate(fields)]
    return types.ColumnBatch(len(rows), columns)


def _present(validity: Optional[bytes], i: int) -> bool:
    return validity is None or bool(validity[i >> 3] >> (i & 7) & 1)


def _read(field: Field, col: "types.Column", n: int, raw_times: bool) -> List[Any]:
    d = col.data
    k = field.kind
    if k == "boolean":
        bits = d.value
        vals: List[Any] = [bool(bits[i >> 3] >> (i & 7) & 1) for i in range(n)]
    elif k == "tinyint":
        vals = [b - 256 if b > 127 else b for b in d.value[:n]]
    elif k == "decimal":
        w = d.value
        scale = _decimal.Decimal(1).scaleb(-field.scale)
        vals = []
        for i in range(n):
            u = w[2 * i] | (w[2 * i + 1] << 64)
            if u >> 127:
                u -= 1 << 128
            vals.append(_decimal.Decimal(u) * scale if field.scale else _decimal.Decimal(u))
    elif k in ("char", "varchar", "binary", "varbinary"):
        data, offs = d.value.data, d.value.offsets
        vals = [data[offs[i] : offs[i + 1]] for i in range(n)]
        if k in ("char", "varchar"):
            vals = [v.decode("utf-8") for v in vals]
    else:
        vals = list(d.value[:n])
        if not raw_times:
            if k == "date":
                vals = [_EPOCH_DATE + _dt.timedelta(days=v) for v in vals]
            elif k == "time":
                vals = [
                    (_EPOCH + _dt.timedelta(microseconds=_unit_to_micros(v, field.precision))).time()
                    for v in vals
                ]
            elif k == "timestamp":
                vals = [_EPOCH + _dt.timedelta(microseconds=_unit_to_micros(v, field.precision)) for v in vals]
            elif k == "timestamp_ltz":
                vals = [
                    _EPOCH_UTC + _dt.timedelta(microseconds=_unit_to_micros(v, field.precision)) for v in vals
                ]
    if col.validity is not None:
        vals = [v if _present(col.validity, i) else None for i, v in enumerate(vals)]
    return vals


def read_columns(fields: Sequence[Field], batch: "types.ColumnBatch", raw_times: bool = False) -> List[tuple]:
    """The rows of ``batch`` as tuples of plain values in field order (see the module's table)."""
    n = batch.row_count
    cols = [_read(f, batch.columns[i], n, raw_times) for i, f in enumerate(fields)]
    return list(zip(*cols)) if cols else [() for _ in range(n)]


def payloads(messages: "types.MessageBatch") -> List[bytes]:
    """The payload of each message of ``messages``."""
    data, offs = messages.payloads, messages.payload_offsets
    return [data[offs[i] : offs[i + 1]] for i in range(messages.count)]


def keys(batch: "types.KeyBatch") -> List[Optional[bytes]]:
    """The key of each message of ``batch`` (``None`` for a message without a key)."""
    data, offs, present = batch.data, batch.offsets, batch.present
    return [data[offs[i] : offs[i + 1]] if _present(present, i) else None for i in range(batch.count)]


def properties(batch: Optional["types.PropertyBatch"], count: int) -> List[dict]:
    """The properties of each message as a ``{name: value}`` dict of strings (bytes decoded as UTF-8,
    invalid sequences replaced)."""
    if batch is None:
        return [{} for _ in range(count)]
    out = []
    for i in range(count):
        props = {}
        for j in range(batch.message_offsets[i], batch.message_offsets[i + 1]):
            name = batch.names[batch.name_offsets[j] : batch.name_offsets[j + 1]].decode("utf-8", "replace")
            value = batch.values[batch.value_offsets[j] : batch.value_offsets[j + 1]].decode("utf-8", "replace")
            props[name] = value
        out.append(props)
    return out
