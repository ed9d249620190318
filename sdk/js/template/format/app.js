// The `{{name}}` format: one line of delimited text per message, e.g. `7,alice,true`, one field per column in
// table order. An empty field is NULL. Columns may be BOOLEAN, INT, BIGINT, DOUBLE or STRING.
//
// Built into a WebAssembly component with componentize-js; pulsar-connect-plugin.js (the JavaScript SDK,
// next to this file) turns the message batches into Uint8Array payloads and your rows into the host's
// columns.

import { ConfigError, Format, exportFormat } from "./pulsar-connect-plugin.js";

const SUPPORTED = ["boolean", "int", "bigint", "double", "varchar", "char"];
const text = new TextDecoder("utf-8", { fatal: true });
const bytes = new TextEncoder();

export class Delimited extends Format {
  // Runs once per table: check the options and the columns here, not per message.
  constructor(options, fields) {
    super(options, fields);
    this.delimiter = options["delimiter"] ?? ",";
    if (this.delimiter.length !== 1) throw new ConfigError("must be one character", "delimiter");
    for (const f of fields) {
      if (!SUPPORTED.includes(f.kind)) {
        throw new ConfigError(`column \`${f.name}\` is ${f.kind.toUpperCase()}; supported: BOOLEAN, INT, BIGINT, DOUBLE, STRING`);
      }
    }
  }

  // One entry per payload: a row (values in column order, null = NULL) or an Error (that message fails
  // with its text; the rest of the batch is still decoded).
  decode(payloads) {
    return payloads.map((p) => {
      let line;
      try {
        line = text.decode(p);
      } catch {
        return new Error("not UTF-8");
      }
      const parts = line.split(this.delimiter);
      if (parts.length !== this.fields.length) return new Error(`${parts.length} fields, expected ${this.fields.length}`);
      try {
        return parts.map((t, i) => parse(this.fields[i].kind, t));
      } catch (e) {
        return e;
      }
    });
  }

  // One entry per row: the payload (Uint8Array or string) or an Error.
  encode(rows) {
    return rows.map((row) => bytes.encode(row.map((v) => (v === null ? "" : String(v))).join(this.delimiter)));
  }
}

function parse(kind, t) {
  if (t === "") return null;
  switch (kind) {
    case "boolean":
      if (t !== "true" && t !== "false") throw new Error(`\`${t}\` is not true or false`);
      return t === "true";
    case "int":
      if (!/^[+-]?\d+$/.test(t)) throw new Error(`\`${t}\` is not an integer`);
      return Number(t);
    case "bigint":
      if (!/^[+-]?\d+$/.test(t)) throw new Error(`\`${t}\` is not an integer`);
      return BigInt(t);
    case "double": {
      const v = Number(t);
      if (Number.isNaN(v) && t !== "NaN") throw new Error(`\`${t}\` is not a number`);
      return v;
    }
    default:
      return t;
  }
}

// componentize-js exports the WIT interface `codec` from this binding.
export const codec = exportFormat(Delimited);
