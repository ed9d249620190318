#!/usr/bin/env python3
"""Golden vectors of the protobuf format, written by protobuf's Python package (PyPI `protobuf`).

The descriptor set `vectors/golden.desc` is built from `proto/*.proto` by protoc as `grpcio-tools`
ships it (`protoc --descriptor_set_out --include_imports`), the message classes are generated from the
same files, and every payload is `SerializeToString(deterministic=True)` of a message built from the
vector's SQL values. What a payload decodes to is read back with the Python runtime's own parser
(`FromString`, `HasField`, `ListFields`) under Flink 1.18's rules (`read-default-values`, forced on for
proto3; absent proto2 fields NULL; enums by name).

    python3 tests/golden/protobuf/generate.py           # rewrite vectors/
    python3 tests/golden/protobuf/generate.py --check   # regenerate into a temp dir, diff, exit 1 if stale

Output is deterministic (sorted keys, fixed inputs, no clock).
"""

import base64
import filecmp
import importlib
import json
import math
import os
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "proto")
FILES = ["golden3.proto", "golden2.proto"]


def protoc(args):
    import grpc_tools
    from grpc_tools import protoc as grpc_protoc

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    code = grpc_protoc.main(["protoc", f"-I{PROTO}", f"-I{include}"] + args + FILES)
    if code != 0:
        sys.exit(f"protoc failed ({code})")


def build(out):
    os.makedirs(out, exist_ok=True)
    protoc([f"--descriptor_set_out={os.path.join(out, 'golden.desc')}", "--include_imports"])
    gen = tempfile.mkdtemp()
    protoc([f"--python_out={gen}"])
    sys.path.insert(0, gen)
    g3 = importlib.import_module("golden3_pb2")
    g2 = importlib.import_module("golden2_pb2")
    for name, spec in vector_files(g3, g2).items():
        write(os.path.join(out, name), spec)


# ---- SQL values <-> messages, Flink's rules -------------------------------------------------------

INT_KINDS = {"int32", "uint32", "sint32", "fixed32", "sfixed32"}


def kind(fd):
    from google.protobuf.descriptor import FieldDescriptor as F

    return {
        F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64", F.TYPE_UINT64: "uint64",
        F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64", F.TYPE_FIXED32: "fixed32", F.TYPE_BOOL: "bool",
        F.TYPE_STRING: "string", F.TYPE_BYTES: "bytes", F.TYPE_UINT32: "uint32", F.TYPE_ENUM: "enum",
        F.TYPE_SFIXED32: "sfixed32", F.TYPE_SFIXED64: "sfixed64", F.TYPE_SINT32: "sint32",
        F.TYPE_SINT64: "sint64", F.TYPE_MESSAGE: "message",
    }[fd.type]


def is_repeated(fd):
    return fd.is_repeated


def is_map(fd):
    return fd.type == fd.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry


def to_pb(fd, v, null_literal):
    """A SQL value (JSON form) as the Python value of field `fd`; NULL as the type's default."""
    k = kind(fd)
    if k == "enum":
        if v is None:
            return fd.enum_type.values[0].number
        if isinstance(v, str):
            ev = fd.enum_type.values_by_name.get(v)
        else:
            ev = fd.enum_type.values_by_number.get(v)
        return (ev or fd.enum_type.values[0]).number
    if v is None:
        return {"string": null_literal, "bytes": b"", "bool": False, "float": 0.0, "double": 0.0}.get(k, 0)
    if k == "bytes":
        return base64.b64decode(v)
    if k in ("float", "double"):
        return float(v)
    if k == "uint32":
        return v & 0xFFFFFFFF
    if k == "uint64":
        return v & 0xFFFFFFFFFFFFFFFF
    return v


def fill(msg, values, null_literal):
    """Sets the fields of `msg` from a row object (NULL: left unset), in row order."""
    for name, v in values.items():
        fd = msg.DESCRIPTOR.fields_by_name[name]
        if v is None:
            continue
        if is_map(fd):
            vfd = fd.message_type.fields_by_name["value"]
            kfd = fd.message_type.fields_by_name["key"]
            target = getattr(msg, name)
            for key, val in v:
                pk = to_pb(kfd, key, null_literal)
                if vfd.type == vfd.TYPE_MESSAGE:
                    entry = target[pk]
                    fill(entry, val or {}, null_literal)
                else:
                    target[pk] = to_pb(vfd, val, null_literal)
        elif is_repeated(fd):
            target = getattr(msg, name)
            for item in v:
                if fd.type == fd.TYPE_MESSAGE:
                    fill(target.add(), item or {}, null_literal)
                else:
                    target.append(to_pb(fd, item, null_literal))
        elif fd.type == fd.TYPE_MESSAGE:
            sub = getattr(msg, name)
            sub.SetInParent()
            fill(sub, v, null_literal)
        else:
            setattr(msg, name, to_pb(fd, v, null_literal))


def from_pb(fd, v, sql_type):
    """A Python value of field `fd` as its SQL value (JSON form) in column type `sql_type`."""
    k = kind(fd)
    if k == "enum":
        if sql_type.startswith(("STRING", "VARCHAR", "CHAR")):
            ev = fd.enum_type.values_by_number.get(v)
            return ev.name if ev else "UNRECOGNIZED"
        return v
    if k == "bytes":
        return base64.b64encode(v).decode()
    if k == "uint32":
        return v - (1 << 32) if v >= 1 << 31 else v
    if k == "uint64":
        return v - (1 << 64) if v >= 1 << 63 else v
    if k == "float":
        return jfloat(struct.unpack("<f", struct.pack("<f", v))[0], True)
    if k == "double":
        return jfloat(v, False)
    return v


def jfloat(x, single):
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 and math.copysign(1, x) < 0:
        return "-0.0"
    if single:
        # Shortest text that reads back as the same float32.
        for digits in range(1, 18):
            t = f"{x:.{digits}g}"
            if struct.unpack("<f", struct.pack("<f", float(t)))[0] == x:
                return float(t)
    return x


def read(msg, columns, read_default):
    """Flink 1.18's deserializer: absent (proto2, read-default-values off) or empty repeated → NULL."""
    out = {}
    for name, ty in columns:
        fd = msg.DESCRIPTOR.fields_by_name[name]
        if not read_default:
            present = len(getattr(msg, name)) > 0 if is_repeated(fd) else msg.HasField(name)
            if not present:
                out[name] = None
                continue
        v = getattr(msg, name)
        if is_map(fd):
            kt, vt = split_map(ty)
            kfd = fd.message_type.fields_by_name["key"]
            vfd = fd.message_type.fields_by_name["value"]
            out[name] = [
                [from_pb(kfd, key, kt), read_value(vfd, v[key], vt, read_default)]
                for key in sorted(v.keys())
            ]
        elif is_repeated(fd):
            et = ty[len("ARRAY<"):-1]
            out[name] = [read_value(fd, x, et, read_default) for x in v]
        else:
            out[name] = read_value(fd, v, ty, read_default)
    return out


def read_value(fd, v, ty, read_default):
    if fd.type == fd.TYPE_MESSAGE:
        return read(v, row_fields(ty), read_default)
    return from_pb(fd, v, ty)


def split_top(s):
    """Splits `a, b<c, d>, e` at top-level commas."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def split_map(ty):
    k, v = split_top(ty[len("MAP<"):-1])
    return k, v


def row_fields(ty):
    fields = []
    for part in split_top(ty[len("ROW<"):-1]):
        name, t = part.split(" ", 1)
        fields.append((name.strip("`"), t))
    return fields


# ---- the vectors -------------------------------------------------------------------------------

INNER = "ROW<`a` INT, `b` STRING, `c` ARRAY<BIGINT>>"
ALL3 = [
    ("f_int32", "INT"), ("f_int64", "BIGINT"), ("f_uint32", "INT"), ("f_uint64", "BIGINT"),
    ("f_sint32", "INT"), ("f_sint64", "BIGINT"), ("f_fixed32", "INT"), ("f_fixed64", "BIGINT"),
    ("f_sfixed32", "INT"), ("f_sfixed64", "BIGINT"), ("f_float", "FLOAT"), ("f_double", "DOUBLE"),
    ("f_bool", "BOOLEAN"), ("f_string", "STRING"), ("f_bytes", "BYTES"), ("f_enum", "STRING"),
    ("f_inner", INNER), ("f_ints", "ARRAY<INT>"), ("f_strings", "ARRAY<STRING>"),
    ("f_inners", f"ARRAY<{INNER}>"), ("f_counts", "MAP<STRING, BIGINT>"),
    ("f_by_id", f"MAP<INT, {INNER}>"), ("f_ts", "ROW<`seconds` BIGINT, `nanos` INT>"),
    ("f_opt", "INT"), ("f_colors", "ARRAY<STRING>"), ("c_name", "STRING"), ("c_number", "BIGINT"),
]

TYPICAL = {
    "f_int32": -42, "f_int64": 9007199254740993, "f_uint32": -1, "f_uint64": -2,
    "f_sint32": -2147483648, "f_sint64": -9223372036854775808, "f_fixed32": 2147483647,
    "f_fixed64": 9223372036854775807, "f_sfixed32": -7, "f_sfixed64": -8, "f_float": 1.5,
    "f_double": -0.1, "f_bool": True, "f_string": "héllo, 世界 😀", "f_bytes": "AAEC/w==",
    "f_enum": "BLUE", "f_inner": {"a": 7, "b": "in", "c": [1, -1, 4294967296]},
    "f_ints": [1, -2, 300], "f_strings": ["x", "", "zz"],
    "f_inners": [{"a": 1, "b": "one", "c": []}, {"a": 0, "b": "", "c": [5]}],
    "f_counts": [["a", 1], ["b", -5], ["c", 0]],
    "f_by_id": [[-1, {"a": 2, "b": "neg", "c": [2]}], [3, {"a": 3, "b": "", "c": []}]],
    "f_ts": {"seconds": 1709210040, "nanos": 789000000}, "f_opt": 0, "f_colors": ["RED", "GREEN"],
    "c_name": None, "c_number": 12,
}

NULLS = {name: None for name, _ in ALL3}
ZEROS = dict(NULLS, f_int32=0, f_string="", f_bool=False, f_double=0.0, f_enum="COLOR_UNSPECIFIED",
             f_opt=0, f_inner={"a": 0, "b": "", "c": []}, f_ints=[], c_name="")
SPECIAL = dict(NULLS, f_float="NaN", f_double="-Infinity", f_enum="NOT_A_COLOR", f_opt=-1,
               f_string="line\nbreak\u0000nul", f_double_=None)
SPECIAL.pop("f_double_")
NULL_ELEMENTS = dict(NULLS, f_strings=[None, "b"], f_ints=[None, 2], f_colors=[None, "GREEN"],
                     f_counts=[["k", None]], f_inners=[None])
NEG_ZERO = dict(NULLS, f_float="-0.0", f_double="-0.0", f_uint32=0, f_sint64=1)


def vector(cls, name, columns, values, options, read_default):
    msg = cls()
    fill(msg, values, options.get("protobuf.write-null-string-literal", ""))
    payload = msg.SerializeToString(deterministic=True)
    back = cls.FromString(payload)
    decoded = read(back, columns, read_default)
    return {
        "name": name,
        "values": values,
        "base64": base64.b64encode(payload).decode(),
        "hex": payload.hex(),
        "decoded": decoded,
        # The decoded row written again: what decoding then encoding the payload must give.
        "decoded_base64": reencoded(cls, decoded, options),
    }


def reencoded(cls, row, options):
    msg = cls()
    fill(msg, row, options.get("protobuf.write-null-string-literal", ""))
    return base64.b64encode(msg.SerializeToString(deterministic=True)).decode()


def table(message, columns, options, vectors, cases=None):
    spec = {
        "format": "protobuf",
        "generator": f"python protobuf {protobuf_version()}",
        "options": dict({"protobuf.descriptor-file": "golden.desc", "protobuf.message-name": message},
                        **options),
        "columns": [{"name": n, "type": t} for n, t in columns],
    }
    if vectors is not None:
        spec["vectors"] = vectors
    if cases is not None:
        spec["cases"] = cases
    return spec


def protobuf_version():
    import google.protobuf

    return google.protobuf.__version__


def case(input_, payload, result, row=None, error=None):
    c = {"input": input_, "base64": base64.b64encode(payload).decode(), "hex": payload.hex(),
         "result": result}
    if row is not None:
        c["row"] = row
        c["row_base64"] = reencoded(CASES_CLASS[0], row, {})
    if error is not None:
        c["error"] = {"message": error}
    return c


CASES_CLASS = []


def vector_files(g3, g2):
    out = {}
    A = g3.AllTypes
    CASES_CLASS[:] = [A]
    lit = {"protobuf.write-null-string-literal": "<null>"}
    out["all-types-proto3.json"] = table("pulsar_connect.golden.AllTypes", ALL3, {}, [
        vector(A, n, ALL3, v, {}, True)
        for n, v in [("typical", TYPICAL), ("all-nulls", NULLS), ("zeros-and-empties", ZEROS),
                     ("special-values", SPECIAL), ("negative-zero", NEG_ZERO)]
    ])
    out["null-elements-proto3.json"] = table("pulsar_connect.golden.AllTypes", ALL3, lit, [
        vector(A, "null-elements", ALL3, NULL_ELEMENTS, lit, True)
    ])
    enum_cols = [("f_enum", "INT"), ("f_colors", "ARRAY<TINYINT>"), ("f_int32", "INT")]
    out["enum-as-number-proto3.json"] = table("pulsar_connect.golden.AllTypes", enum_cols, {}, [
        vector(A, n, enum_cols, v, {}, True)
        for n, v in [("known", {"f_enum": 2, "f_colors": [5, 0], "f_int32": 1}),
                     ("unknown-number-writes-first", {"f_enum": 9, "f_colors": [], "f_int32": None})]
    ])
    # Only some columns, in another order than the fields.
    sub = [("f_string", "STRING"), ("f_inner", "ROW<`c` ARRAY<BIGINT>, `a` INT>"), ("f_int32", "INT")]
    out["projection-proto3.json"] = table("pulsar_connect.golden.AllTypes", sub, {}, [
        vector(A, "typical", sub, {"f_string": "s", "f_inner": {"c": [9], "a": 1}, "f_int32": 5}, {}, True)
    ])
    R = g2.Record
    rec = [("id", "BIGINT NOT NULL"), ("count", "INT"), ("label", "STRING"), ("level", "STRING"),
           ("item", "ROW<`x` INT, `y` STRING>"), ("unpacked", "ARRAY<INT>"), ("packed", "ARRAY<INT>"),
           ("data", "BYTES"), ("ratio", "DOUBLE"), ("tags", "ARRAY<STRING>")]
    rows2 = [
        ("typical", {"id": 1, "count": 3, "label": "x", "level": "LOW", "item": {"x": 5, "y": None},
                     "unpacked": [1, 2], "packed": [3, -4], "data": "3q2+7w==", "ratio": 0.5,
                     "tags": ["a"]}),
        ("only-required", {"id": -9, "count": None, "label": None, "level": None, "item": None,
                           "unpacked": None, "packed": [], "data": None, "ratio": None, "tags": None}),
        ("explicit-defaults", {"id": 0, "count": 10, "label": "none", "level": "HIGH",
                               "item": {"x": None, "y": None}, "unpacked": [], "packed": None,
                               "data": "", "ratio": 0.0, "tags": []}),
    ]
    out["record-proto2.json"] = table("pulsar_connect.golden2.Record", rec, {}, [
        vector(R, n, rec, v, {}, False) for n, v in rows2
    ])
    rd = {"protobuf.read-default-values": "true"}
    out["record-proto2-read-default-values.json"] = table("pulsar_connect.golden2.Record", rec, rd, [
        vector(R, n, rec, v, rd, True) for n, v in rows2
    ])

    # Decoding only: payloads Python writes that our encoder never would, and broken ones.
    ext = g3.AllTypesExtended(f_int32=5, f_string="kept", extra_text="skipped",
                              extra_numbers=[1, 2], extra_inner=g3.Inner(a=1)).SerializeToString()
    first = A(f_int32=1, f_inner=g3.Inner(a=1, c=[1]), f_ints=[1], f_string="first").SerializeToString()
    second = A(f_inner=g3.Inner(b="two", c=[2]), f_ints=[2], f_string="second").SerializeToString()
    merged = A.FromString(first + second)
    small = [("f_int32", "INT"), ("f_string", "STRING"), ("f_inner", INNER), ("f_ints", "ARRAY<INT>"),
             ("f_enum", "STRING"), ("f_colors", "ARRAY<STRING>")]
    unknown_enum = A(f_enum=3, f_colors=[1, 4]).SerializeToString()
    truncated = A(f_string="truncated string").SerializeToString()[:-3]
    bad_wire = bytes([0x0F, 0x01])  # field 1 with wire type 7
    cases = [
        case("unknown fields are skipped", ext, "row",
             read(A.FromString(ext), small, True)),
        case("a message repeated is merged (last scalar wins, lists append)", first + second, "row",
             read(merged, small, True)),
        case("an empty payload is the default message", b"", "row", read(A(), small, True)),
        case("unknown enum numbers read as UNRECOGNIZED", unknown_enum, "row",
             read(A.FromString(unknown_enum), small, True)),
        case("truncated", truncated, "error", error="Failed to deserialize PB object."),
        case("invalid wire type", bad_wire, "error", error="Failed to deserialize PB object."),
    ]
    for c in cases:
        if c["result"] == "error":
            try:
                A.FromString(base64.b64decode(c["base64"]))
            except Exception:  # noqa: BLE001 - any parse error is the point
                continue
            sys.exit(f"python parsed the broken case {c['input']}")
    out["decode-proto3.json"] = table("pulsar_connect.golden.AllTypes", small, {}, None, cases)
    skip = [dict(c, result="null") if c["result"] == "error" else c for c in cases]
    out["decode-proto3-ignore-parse-errors.json"] = table(
        "pulsar_connect.golden.AllTypes", small, {"protobuf.ignore-parse-errors": "true"}, None, skip)
    return out


def write(path, spec):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f, indent=2, ensure_ascii=False, sort_keys=False)
        f.write("\n")


def main():
    vectors = os.path.join(HERE, "vectors")
    if len(sys.argv) > 1 and sys.argv[1] == "--check":
        tmp = tempfile.mkdtemp()
        build(tmp)
        cmp = filecmp.dircmp(vectors, tmp)
        stale = cmp.left_only + cmp.right_only + cmp.diff_files + cmp.funny_files
        if stale:
            print(f"protobuf golden vectors are stale ({', '.join(sorted(stale))}): "
                  "run python3 tests/golden/protobuf/generate.py", file=sys.stderr)
            sys.exit(1)
        print("protobuf golden vectors are current")
    else:
        build(vectors)


if __name__ == "__main__":
    main()
