"""The Python SDK for pulsar-connect plugins (formats and routers), built with componentize-py.

An author writes plain Python over plain values:

* a format subclasses :class:`pulsar_connect_plugin.format.Format` and implements
  ``decode(payloads) -> rows`` (and ``encode(rows) -> payloads``); ``export_format`` turns it into the
  component's ``codec`` export (WIT ``pulsar-connect:plugin/format@0.2.0``);
* a router subclasses :class:`pulsar_connect_plugin.router.Router` and implements
  ``route(keys, partitions) -> partitions``; ``export_router`` turns it into the ``routing`` export
  (WIT ``pulsar-connect:plugin/router@0.1.0``).

The SDK does the columnar work of the contract (flattened message batches in, Arrow-like columns out)
so the author never sees offsets or bitmaps. This module holds what both kinds share and needs no
generated bindings, so it can be imported anywhere.
"""

from dataclasses import dataclass
from typing import Optional

#: The reason prefix that makes a row error a *skip* (Flink's ``ignore-parse-errors``), as the Rust SDK's
#: ``pulsar_connect_plugin::SKIPPED``.
SKIPPED = "skipped: "

__all__ = ["SKIPPED", "ConfigError", "Skip", "Field"]


class ConfigError(Exception):
    """Raised by a plugin's ``__init__`` to refuse its options; ``option`` names the offending one."""

    def __init__(self, message: str, option: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.option = option


class Skip(Exception):
    """Returned (or raised) for a message that is skipped rather than failed (the host drops it and
    counts it, as Flink's ``ignore-parse-errors`` does)."""


@dataclass(frozen=True)
class Field:
    """A top-level column of the table, as the host declared it.

    ``kind`` is the Flink SQL type's name in lower case: ``boolean``, ``tinyint``, ``smallint``,
    ``int``, ``bigint``, ``float``, ``double``, ``decimal``, ``char``, ``varchar``, ``binary``,
    ``varbinary``, ``date``, ``time``, ``timestamp``, ``timestamp_ltz``. ``precision``/``scale`` are
    set for DECIMAL, ``precision`` for TIME/TIMESTAMP/TIMESTAMP_LTZ (0..9), ``length`` for
    CHAR/VARCHAR/BINARY/VARBINARY.
    """

    name: str
    kind: str
    nullable: bool
    precision: Optional[int] = None
    scale: Optional[int] = None
    length: Optional[int] = None

    @property
    def sql(self) -> str:
        """The type as Flink SQL prints it, e.g. ``DECIMAL(10, 2)``, ``STRING``, ``BIGINT NOT NULL``."""
        k = self.kind.upper()
        if k == "VARCHAR" and self.length == 2147483647:
            text = "STRING"
        elif k == "VARBINARY" and self.length == 2147483647:
            text = "BYTES"
        elif k == "DECIMAL":
            text = f"DECIMAL({self.precision}, {self.scale})"
        elif k in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
            text = f"{k}({self.length})"
        elif k in ("TIME", "TIMESTAMP"):
            text = f"{k}({self.precision})"
        elif k == "TIMESTAMP_LTZ":
            text = f"TIMESTAMP_LTZ({self.precision})"
        else:
            text = k
        return text if self.nullable else text + " NOT NULL"
