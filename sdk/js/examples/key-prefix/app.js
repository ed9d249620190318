// `key-prefix`: messages whose keys share a prefix (the key up to the first `separator`, e.g. the
// tenant of `tenant-7:order-123`) go to one partition: FNV-1a 32-bit of the prefix's bytes modulo the
// partition count. A key without the separator is its own prefix; messages without a key go
// round-robin, one partition after the other, from `start-partition`.
//
// A pulsar-connect router plugin written with the JavaScript SDK (sdk/js): build it with
// componentize-js (see README.md).

import { ConfigError, Router, exportRouter } from "./pulsar-connect-plugin.js";

/** FNV-1a, 32 bits, of a byte array. */
export function fnv1a32(bytes, start = 0, end = bytes.length) {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) {
    h ^= bytes[i];
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

class KeyPrefix extends Router {
  constructor(options) {
    super(options);
    const sep = new TextEncoder().encode(options["separator"] ?? ":");
    if (sep.length !== 1) {
      throw new ConfigError(`must be one ASCII character, got \`${options["separator"]}\``, "separator");
    }
    this.separator = sep[0];
    const start = Number(options["start-partition"] ?? "0");
    if (!Number.isInteger(start) || start < 0) {
      throw new ConfigError(`must be a non-negative integer, got \`${options["start-partition"]}\``, "start-partition");
    }
    this.next = start;
  }

  route(keys, partitions) {
    return keys.map((key) => {
      if (key === null) return this.next++ % partitions;
      const cut = key.indexOf(this.separator);
      return fnv1a32(key, 0, cut < 0 ? key.length : cut) % partitions;
    });
  }
}

export const routing = exportRouter(KeyPrefix);
