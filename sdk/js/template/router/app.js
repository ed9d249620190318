// The `{{name}}` router: a keyed message goes to FNV-1a(key) % partitions, a message without a key to the
// next partition in turn.
//
// Built into a WebAssembly component with componentize-js; pulsar-connect-plugin.js (the JavaScript SDK,
// next to this file) turns the key batches into an array of Uint8Array / null.

import { ConfigError, Router, exportRouter } from "./pulsar-connect-plugin.js";

export function fnv1a32(bytes) {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) {
    h ^= bytes[i];
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export class KeyHash extends Router {
  // Runs once per sink table: `options` is an object of strings, checked against plugin.toml.
  constructor(options) {
    super(options);
    this.next = Number(options["start-partition"] ?? "0");
    if (!Number.isInteger(this.next)) throw new ConfigError("must be an integer", "start-partition");
  }

  // One partition in 0..partitions-1 per message (key: Uint8Array, or null when it has none).
  route(keys, partitions) {
    return keys.map((key) => (key === null ? this.next++ % partitions : fnv1a32(key) % partitions));
  }
}

// componentize-js exports the WIT interface `routing` from this binding.
export const routing = exportRouter(KeyHash);
