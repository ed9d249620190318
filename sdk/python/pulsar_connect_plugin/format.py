"""Format plugins (WIT world ``pulsar-connect:plugin/format@0.2.0``) as plain Python.

::

    from pulsar_connect_plugin import ConfigError
    from pulsar_connect_plugin.format import Format, export_format

    class Upper(Format):
        def __init__(self, options, fields):
            super().__init__(options, fields)        # self.options: dict, self.fields: [Field]
        def decode(self, payloads):                   # list[bytes] -> one entry per payload
            return [(p.decode().upper(),) for p in payloads]
        def encode(self, rows):                       # list[tuple] -> one entry per row
            return [r[0].encode() for r in rows]

    Codec = export_format(Upper)                      # the app module must define `Codec`

``decode`` returns one entry per payload: a row (a tuple/list in column order, or a dict by column
name; ``None`` values are NULL), or an exception instance for a message that failed (its text is
the reason the host reports; a :class:`~pulsar_connect_plugin.Skip` is a skip). It may instead return
:class:`Columns` (one list of values per column, every message a row). ``encode`` returns one entry
per row: ``bytes`` or an exception instance. An exception *raised* by either refuses the whole batch
(the host keeps the instance and applies the job's failure policy); the plugin never traps on data.
"""

from typing import Any, Dict, List, Sequence

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import codec
from wit_world.imports import types

from . import SKIPPED, ConfigError, Field, Skip
from . import columns as _columns


class Columns:
    """Decoded rows given column by column: ``Columns([[1, 2], ["a", None]])`` (lists in field
    order) or ``Columns({"id": [1, 2], "name": ["a", None]})``. Every list has one value per payload."""

    def __init__(self, values):
        self.values = values

    def rows(self, fields: Sequence[Field], count: int) -> List[list]:
        if isinstance(self.values, dict):
            unknown = [k for k in self.values if all(f.name != k for f in fields)]
            if unknown:
                raise ValueError(f"Columns: no column named {', '.join(map(repr, unknown))}")
            lists = [self.values.get(f.name, [None] * count) for f in fields]
        else:
            lists = list(self.values)
            if len(lists) != len(fields):
                raise ValueError(f"Columns: {len(lists)} lists, the table has {len(fields)} columns")
        for f, values in zip(fields, lists):
            if len(values) != count:
                raise ValueError(f"Columns: column `{f.name}` has {len(values)} values for {count} payloads")
        return [list(r) for r in zip(*lists)] if lists else [[] for _ in range(count)]


class Format:
    """Base class of a format: one instance per configured decoder or encoder of a table."""

    def __init__(self, options: Dict[str, str], fields: List[Field]):
        self.options = options
        self.fields = fields

    def decode(self, payloads: List[bytes]) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not decode")

    def encode(self, rows: List[tuple]) -> List[Any]:
        raise NotImplementedError(f"{type(self).__name__} does not encode")


def _reason(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return SKIPPED + text if isinstance(e, Skip) else text


def _config_error(e: BaseException) -> "Err":
    if isinstance(e, ConfigError):
        return Err(types.ConfigError(e.option, e.message))
    return Err(types.ConfigError(None, f"{type(e).__name__}: {e}"))


def decode_batch(impl: Format, messages: "types.MessageBatch") -> "codec.DecodedBatch":
    """Runs ``impl.decode`` over a message batch and builds the decoded batch (used by the export and
    by plugin unit tests)."""
    payloads = _columns.payloads(messages)
    result = impl.decode(payloads)
    fields = impl.fields
    if isinstance(result, Columns):
        result = result.rows(fields, len(payloads))
    else:
        result = list(result)
        if len(result) != len(payloads):
            raise ValueError(f"decode returned {len(result)} entries for {len(payloads)} payloads")
    rows, errors = [], []
    convert = _columns.row_converter(fields)
    for i, entry in enumerate(result):
        if isinstance(entry, BaseException):
            errors.append(types.RowError(i, _reason(entry)))
            continue
        try:
            rows.append(convert(entry))
        except ValueError as e:
            errors.append(types.RowError(i, str(e)))
    return codec.DecodedBatch(_columns.build_columns(fields, rows), None, None, errors)


def encode_batch(impl: Format, batch: "types.ColumnBatch") -> "codec.EncodedBatch":
    """Runs ``impl.encode`` over a column batch and builds the encoded batch."""
    rows = _columns.read_columns(impl.fields, batch)
    result = list(impl.encode(rows))
    if len(result) != len(rows):
        raise ValueError(f"encode returned {len(result)} entries for {len(rows)} rows")
    parts, offsets, errors = [], [0], []
    for i, entry in enumerate(result):
        if isinstance(entry, BaseException):
            errors.append(types.RowError(i, str(entry) or type(entry).__name__))
        elif isinstance(entry, (bytes, bytearray, memoryview)):
            parts.append(bytes(entry))
            offsets.append(offsets[-1] + len(parts[-1]))
            continue
        else:
            errors.append(types.RowError(i, f"encode returned {type(entry).__name__}, not bytes"))
        offsets.append(offsets[-1])
    return codec.EncodedBatch(b"".join(parts), offsets, None, errors)


def make(cls, options, row_type: "types.RowType") -> Format:
    """``cls`` configured for a table: options as a dict, the row type as :class:`Field` s."""
    try:
        fields = _columns.fields_of(row_type)
    except _columns.UnsupportedType as e:
        raise ConfigError(str(e)) from None
    return cls(dict(options), fields)


def export_format(cls) -> type:
    """The ``Codec`` class componentize-py exports for the format ``cls`` (a :class:`Format`)."""

    class Decoder(codec.Decoder):
        def __init__(self, impl):
            self.impl = impl

        def decode_batch(self, messages):
            try:
                return decode_batch(self.impl, messages)
            except Exception as e:
                raise Err(f"{type(e).__name__}: {e}") from None

    class Encoder(codec.Encoder):
        def __init__(self, impl):
            self.impl = impl

        def encode_batch(self, rows, kinds):
            if kinds is not None and any(k != codec.RowKind.INSERT for k in kinds):
                raise Err("this format writes inserts only")
            try:
                return encode_batch(self.impl, rows)
            except Exception as e:
                raise Err(f"{type(e).__name__}: {e}") from None

    class Codec(exports.Codec):
        def create_decoder(self, options, row_type, metadata):
            if metadata:
                raise Err(types.ConfigError(None, f"no metadata keys are readable, asked for {metadata}"))
            try:
                return Decoder(make(cls, options, row_type))
            except Exception as e:
                raise _config_error(e) from None

        def create_encoder(self, options, row_type):
            try:
                return Encoder(make(cls, options, row_type))
            except Exception as e:
                raise _config_error(e) from None

    return Codec
