"""The `{{name}}` router: a keyed message goes to FNV-1a(key) % partitions, a message without a key to
the next partition in turn.

Built into a WebAssembly component with componentize-py; `pulsar_connect_plugin` (the Python SDK, next
to this file) turns the key batches into a plain list of `bytes`/`None`.
"""

from pulsar_connect_plugin import ConfigError
from pulsar_connect_plugin.router import Router, export_router


def fnv1a32(data):
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


class KeyHash(Router):
    def __init__(self, options):
        """Runs once per sink table: check the options here."""
        super().__init__(options)
        try:
            self.next = int(options.get("start-partition", "0"))
        except ValueError:
            raise ConfigError("must be an integer", option="start-partition") from None

    def route(self, keys, partitions):
        """One partition in 0..partitions-1 per message (key: bytes, or None when it has none)."""
        out = []
        for key in keys:
            if key is None:
                out.append(self.next % partitions)
                self.next += 1
            else:
                out.append(fnv1a32(key) % partitions)
        return out


# componentize-py looks for `Routing` in the `app` module.
Routing = export_router(KeyHash)
