"""`keyvalue`: one message is `key=value` pairs, e.g. `id=7,name=alice,score=9.5`, read into the table's
columns by name (a column without a pair is NULL) and written back in column order (NULL columns are
left out). Values are text: numbers as Python prints them, booleans `true`/`false`, DECIMAL as its
plain digits, DATE/TIME/TIMESTAMP in ISO 8601, BYTES as hex.

A pulsar-connect format plugin written with the Python SDK (sdk/python): build it with componentize-py
(see README.md).
"""

import datetime
import decimal

from pulsar_connect_plugin import ConfigError, Skip
from pulsar_connect_plugin.format import Format, export_format


def _flag(options, name):
    value = options.get(name, "false")
    if value not in ("true", "false"):
        raise ConfigError(f"must be true or false, got `{value}`", option=name)
    return value == "true"


class KeyValue(Format):
    def __init__(self, options, fields):
        super().__init__(options, fields)
        self.pair = options.get("pair-delimiter", ",")
        self.sep = options.get("key-value-separator", "=")
        for name, value in (("pair-delimiter", self.pair), ("key-value-separator", self.sep)):
            if len(value) != 1:
                raise ConfigError(f"must be one character, got `{value}`", option=name)
        if self.pair == self.sep:
            raise ConfigError("must differ from pair-delimiter", option="key-value-separator")
        self.strict = _flag(options, "fail-on-unknown-key")
        self.lenient = _flag(options, "ignore-parse-errors")
        self.by_name = {f.name: f for f in fields}

    def decode(self, payloads):
        return [self._row(p) for p in payloads]

    def _row(self, payload):
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError as e:
            return self._bad(f"not UTF-8 at byte {e.start}")
        row = {}
        for part in text.split(self.pair):
            if not part.strip():
                continue
            key, sep, value = part.partition(self.sep)
            key = key.strip()
            if not sep:
                return self._bad(f"`{part}` has no `{self.sep}`")
            field = self.by_name.get(key)
            if field is None:
                if self.strict:
                    return self._bad(f"unknown key `{key}`")
                continue
            try:
                row[key] = None if value == "" else _parse(field.kind, value)
            except (ValueError, decimal.InvalidOperation) as e:
                if self.lenient:
                    row[key] = None
                    continue
                return ValueError(f"key `{key}`: `{value}` is not a {field.sql}: {e}")
        return row

    def _bad(self, reason):
        return Skip(reason) if self.lenient else ValueError(reason)

    def encode(self, rows):
        out = []
        for row in rows:
            pairs = [
                f"{f.name}{self.sep}{_text(f.kind, v)}" for f, v in zip(self.fields, row) if v is not None
            ]
            out.append(self.pair.join(pairs).encode("utf-8"))
        return out


def _parse(kind, text):
    if kind == "boolean":
        if text not in ("true", "false"):
            raise ValueError("expected true or false")
        return text == "true"
    if kind in ("tinyint", "smallint", "int", "bigint"):
        return int(text)
    if kind in ("float", "double"):
        return float(text)
    if kind == "decimal":
        return decimal.Decimal(text)
    if kind in ("binary", "varbinary"):
        return bytes.fromhex(text)
    if kind == "date":
        return datetime.date.fromisoformat(text)
    if kind == "time":
        return datetime.time.fromisoformat(text)
    if kind in ("timestamp", "timestamp_ltz"):
        return datetime.datetime.fromisoformat(text)
    return text


def _text(kind, value):
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("binary", "varbinary"):
        return value.hex()
    if kind in ("date", "time", "timestamp", "timestamp_ltz"):
        return value.isoformat()
    return str(value)


Codec = export_format(KeyValue)
