"""Router plugins (WIT world ``pulsar-connect:plugin/router@0.1.0``) as plain Python.

::

    from pulsar_connect_plugin.router import Router, export_router

    class FirstByte(Router):
        def route(self, keys, partitions):          # list[bytes | None], int -> list[int]
            return [k[0] % partitions if k else 0 for k in keys]

    Routing = export_router(FirstByte)               # the app module must define `Routing`

Set ``wants_properties = True`` on the class (and ``wants-properties = true`` in plugin.toml) to get
the message properties as a third argument: one ``{name: value}`` dict per message. ``__init__``
receives the options as a dict and may raise :class:`~pulsar_connect_plugin.ConfigError`.
"""

from typing import Dict, List, Optional

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

from . import ConfigError
from . import columns as _columns


class Router:
    """Base class of a router: one instance per configured router of a sink table."""

    wants_properties = False

    def __init__(self, options: Dict[str, str]):
        self.options = options

    def route(self, keys: List[Optional[bytes]], partitions: int, properties=None) -> List[int]:
        raise NotImplementedError(f"{type(self).__name__} does not route")


def route_batch(impl: Router, keys: "types.KeyBatch", properties, partitions: int) -> List[int]:
    """Runs ``impl.route`` over a key batch and checks its answer (used by the export and by tests)."""
    ks = _columns.keys(keys)
    if impl.wants_properties:
        out = impl.route(ks, partitions, _columns.properties(properties, len(ks)))
    else:
        out = impl.route(ks, partitions)
    out = list(out)
    if len(out) != len(ks):
        raise ValueError(f"route returned {len(out)} partitions for {len(ks)} messages")
    for p in out:
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < partitions:
            raise ValueError(f"route returned partition {p!r}, not an int in 0..{partitions - 1}")
    return out


def export_router(cls) -> type:
    """The ``Routing`` class componentize-py exports for the router ``cls`` (a :class:`Router`).

    ``route-batch`` has no error result: a router that raises traps, and the host replaces the
    instance and fails the batch (a router bug), so route every key, even odd ones."""
    from wit_world.exports import routing

    class Instance(routing.Router):
        def __init__(self, impl):
            self.impl = impl

        def route_batch(self, keys, properties, partitions):
            return route_batch(self.impl, keys, properties, partitions)

    class Routing(exports.Routing):
        def create_router(self, options):
            try:
                return Instance(cls(dict(options)))
            except ConfigError as e:
                raise Err(types.ConfigError(e.option, e.message)) from None
            except Exception as e:
                raise Err(types.ConfigError(None, f"{type(e).__name__}: {e}")) from None

    return Routing
