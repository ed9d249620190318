"""The `{{name}}` format: one line of delimited text per message, e.g. `7,alice,true`, one field per column
in table order. An empty field is NULL. Columns may be BOOLEAN, INT, BIGINT, DOUBLE or STRING.

Built into a WebAssembly component with componentize-py; `pulsar_connect_plugin` (the Python SDK, next
to this file) turns the message batches into plain `bytes` and your rows into the host's columns.
"""

from pulsar_connect_plugin import ConfigError
from pulsar_connect_plugin.format import Format, export_format

SUPPORTED = ("boolean", "int", "bigint", "double", "varchar", "char")


class Delimited(Format):
    def __init__(self, options, fields):
        """Runs once per table: check the options and the columns here, not per message."""
        super().__init__(options, fields)
        self.delimiter = options.get("delimiter", ",")
        if len(self.delimiter) != 1:
            raise ConfigError("must be one character", option="delimiter")
        for f in fields:
            if f.kind not in SUPPORTED:
                raise ConfigError(f"column `{f.name}` is {f.sql}; supported: BOOLEAN, INT, BIGINT, DOUBLE, STRING")

    def decode(self, payloads):
        """One entry per payload: a row (values in column order, None = NULL) or an exception (that
        message fails with its text; the rest of the batch is still decoded)."""
        return [self.row(p) for p in payloads]

    def row(self, payload):
        try:
            parts = payload.decode("utf-8").split(self.delimiter)
        except UnicodeDecodeError as e:
            return ValueError(f"not UTF-8: {e}")
        if len(parts) != len(self.fields):
            return ValueError(f"{len(parts)} fields, expected {len(self.fields)}")
        try:
            return [parse(f.kind, text) for f, text in zip(self.fields, parts)]
        except ValueError as e:
            return e

    def encode(self, rows):
        """One entry per row: the payload bytes (or an exception for a row that cannot be written)."""
        return [self.delimiter.join(text(v) for v in row).encode("utf-8") for row in rows]


def parse(kind, text):
    if text == "":
        return None
    if kind == "boolean":
        if text not in ("true", "false"):
            raise ValueError(f"`{text}` is not true or false")
        return text == "true"
    if kind in ("int", "bigint"):
        return int(text)
    if kind == "double":
        return float(text)
    return text


def text(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# componentize-py looks for `Codec` in the `app` module.
Codec = export_format(Delimited)
