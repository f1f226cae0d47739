#!/usr/bin/env python3
"""Writes broker/kafka/src/schema_gen.rs: the wire layout (field order, types and version
ranges) of the requests es decodes, read from kafka-protocol's generated decoders.

Why: kafka-protocol pre-allocates from wire counts, so es walks every request with this
layout before the crate decodes it (see src/prescan.rs). The layout must match the
crate's decoders exactly; tests/prescan_layout.rs checks it against the crate's encoders
at every version. Rerun after bumping kafka-protocol:

    python3 broker/kafka/tools/gen_schema.py ~/.cargo/registry/src/*/kafka-protocol-0.18.*/src/messages
"""
import os
import re
import sys

REQUESTS = [
    "api_versions", "metadata", "produce", "fetch", "list_offsets", "find_coordinator",
    "join_group", "sync_group", "heartbeat", "leave_group", "offset_commit", "offset_fetch",
    "init_producer_id", "create_topics", "delete_topics", "describe_configs",
    "create_partitions", "list_groups", "describe_groups", "sasl_handshake",
    "sasl_authenticate", "offset_for_leader_epoch", "offset_delete", "delete_groups",
    "delete_records", "alter_configs", "incremental_alter_configs", "describe_cluster",
    "describe_log_dirs", "describe_producers",
]
MAX = 32767
PRIM = {"Int8", "Int16", "Int32", "Int64", "UInt16", "UInt32", "Float64", "Boolean", "Uuid",
        "String", "CompactString", "Bytes", "CompactBytes", "VarInt", "VarLong",
        "UnsignedVarInt"}


def struct_fields(src):
    """Maps struct name -> {field name -> Rust type} from the pub struct definitions."""
    out, cur = {}, None
    for line in src.splitlines():
        m = re.match(r"pub struct (\w+) \{", line)
        if m:
            cur = m.group(1)
            out[cur] = {}
            continue
        if cur and line.startswith("}"):
            cur = None
        m = re.match(r"\s+pub (\w+): (.+),$", line)
        if cur and m:
            out[cur][m.group(1)] = m.group(2)
    return out


def negate(iv):
    lo, hi = iv
    if lo > 0 and hi == MAX:
        return (0, lo - 1)
    if lo == 0 and hi < MAX:
        return (hi + 1, MAX)
    # Not an interval: such an else branch holds only a default, never a decode.
    return "dead"


def cond(line):
    m = re.search(r"if (.*) \{$", line)
    c = m.group(1)
    m = re.fullmatch(r"version >= (\d+) && version <= (\d+)", c)
    if m:
        return (int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r"version >= (\d+)", c)
    if m:
        return (int(m.group(1)), MAX)
    m = re.fullmatch(r"version <= (\d+)", c)
    if m:
        return (0, int(m.group(1)))
    m = re.fullmatch(r"version < (\d+) \|\| version > (\d+)", c)
    if m:
        return ("gate", int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r"version != (\d+)", c)
    if m:
        return ("gate", int(m.group(1)), int(m.group(1)))
    raise SystemExit(f"unknown condition {c!r}")


def ty(expr, owner, name, fields, prefix):
    """Turns a decoder expression into the Rust `Ty` expression of the generated table."""
    m = re.fullmatch(r"(Compact)?Array\((.*)\)", expr)
    if m:
        inner = ty(m.group(2), owner, name, fields, prefix)
        return f"Ty::{m.group(1) or ''}Array(&{inner})"
    if expr == "Struct(version)":
        rust = fields[owner][name]
        idents = [i for i in re.findall(r"\w+", rust) if i in fields]
        assert len(idents) == 1, (owner, name, rust)
        return f"Ty::Struct(&{static_name(prefix, idents[0])})"
    assert expr in PRIM, expr
    return f"Ty::{expr}"


def static_name(prefix, struct):
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", struct).upper()
    return f"{prefix.upper()}__{snake}"


def parse_file(path, prefix):
    src = open(path).read()
    fields = struct_fields(src)
    structs = []
    for body in re.findall(r"impl Decodable for (\w+) \{\n(.*?)\n\}\n", src, re.S):
        owner, text = body
        st = {"name": owner, "versions": None, "flex": None, "fields": [], "tags": []}
        stack, name = [], None
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith("Ok(Self {"):
                break
            line = re.sub(r'"[^"]*"', '""', line).replace("Struct { version }", "Struct(version)")
            opens, closes = line.count("{"), line.count("}")
            m = re.match(r"(?:let (?:mut )?)?(\w+)(?:: \w+)? = ", line)
            if m:
                name = m.group(1)
            if line.startswith("} else {"):
                kind, iv = stack.pop()
                assert kind == "if"
                stack.append(("if", negate(iv)))
                continue
            for _ in range(closes):
                stack.pop()
            if opens:
                if re.search(r"\bif .* \{$", line):
                    c = cond(line)
                    if c[0] == "gate":
                        st["versions"] = (c[1], c[2])
                        stack.append(("gate", None))
                    else:
                        stack.append(("if", c))
                else:
                    m = re.match(r"(\d+) => \{$", line)
                    m2 = re.match(r"_ => \{$", line)
                    stack.append(("tag", int(m.group(1))) if m else ("unknown", None)
                                 if m2 else ("block", None))
                    for _ in range(opens - 1):
                        stack.append(("block", None))
            m = re.search(r"([A-Z]\w*(?:\(.*\))?)\.decode\(buf\)", line.replace("types::", ""))
            if not m:
                continue
            if any(k in ("gate", "unknown") for k, _ in stack):
                continue
            lo, hi = 0, MAX
            for kind, iv in stack:
                assert iv != "dead", (owner, line)
                if kind == "if":
                    lo, hi = max(lo, iv[0]), min(hi, iv[1])
            if name == "num_tagged_fields":
                st["flex"] = lo
                continue
            if name in ("tag", "size"):
                continue
            t = ty(m.group(1), owner, name, fields, prefix)
            tags = [iv for kind, iv in stack if kind == "tag"]
            if tags:
                st["tags"].append((tags[0], lo, hi, name, t))
            else:
                st["fields"].append((lo, hi, name, t))
        structs.append(st)
    return structs


def emit(all_structs):
    out = ["//! Generated by tools/gen_schema.py from kafka-protocol's decoders: the wire layout",
           "//! of every request es decodes. Do not edit; rerun the tool after a crate bump.",
           "", "use crate::prescan::{Field, Struct, Tag, Ty};", ""]
    for prefix, st in all_structs:
        lo, hi = st["versions"]
        flex = st["flex"] if st["flex"] is not None else MAX
        out.append(f"pub(crate) static {static_name(prefix, st['name'])}: Struct = Struct {{")
        out.append(f"    name: \"{st['name']}\",")
        out.append(f"    versions: ({lo}, {hi}),")
        out.append(f"    flexible_from: {flex},")
        out.append("    fields: &[")
        for flo, fhi, name, t in st["fields"]:
            out.append(f"        Field {{ name: \"{name}\", versions: ({flo}, {fhi}), ty: {t} }},")
        out.append("    ],")
        out.append("    tags: &[")
        for tag, tlo, thi, name, t in st["tags"]:
            out.append(f"        Tag {{ tag: {tag}, name: \"{name}\", versions: ({tlo}, {thi}), ty: {t} }},")
        out.append("    ],")
        out.append("};")
        out.append("")
    return "\n".join(out)


def main():
    root = sys.argv[1]
    all_structs = []
    for req in REQUESTS:
        for st in parse_file(os.path.join(root, f"{req}_request.rs"), req):
            all_structs.append((req, st))
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "src", "schema_gen.rs"), "w") as f:
        f.write(emit(all_structs))


main()
