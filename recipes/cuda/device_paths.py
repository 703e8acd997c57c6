#!/usr/bin/env python3
"""Which executor rows copy to the host and back on a GPU (`--device cuda`).

Reads lib/src/exec/ops/*.rs: every function, the functions it calls, and
the rows at the end of each family file. A row is "host" when its
implementation can reach a host primitive (`to_host`, `host_f64`,
`from_f64`, `from_host`, `to_vec*`): on a GPU such a row copies its inputs
to the host and its result back (conditionally for some: a note in the
table says when the device path is taken). Prints a markdown table for
docs/cuda.md; `ir-run --device cuda --stats` counts the copies
each op made in a run.

    python3 recipes/cuda/device_paths.py > /tmp/device_paths.md
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPS = ROOT / "lib/src/exec/ops"
HOST = re.compile(r"\.to_host\(|\bhost_f64\(|\bfrom_f64\(|Tensor::from_host\(|\.to_vec[0-3]\b|\bhost_unary_with\(")
IDENT = re.compile(r"(?<![\w.:])([a-z_][a-z0-9_]*)\s*\(")

# Rows whose device path is taken for the common case (the host path only
# for the arguments named).
CONDITIONAL = {
    op: "device (candle's conv1d, conv2d, conv_transpose2d); transposed convolutions with "
        "groups, per-dim parameters or other dtypes than float32 on the host"
    for op in ("aten.convolution.default", "aten.conv1d.default", "aten.conv2d.default",
               "aten.conv_transpose1d.default", "aten.conv_transpose2d.input")
}
CONDITIONAL["aten.grid_sampler_2d.default"] = "device for floating inputs; integer inputs on the host"


def functions(src):
    """name -> body for every `fn` in a file (brace matched)."""
    out = {}
    for m in re.finditer(r"\bfn\s+([a-z_][a-z0-9_]*)\s*(?:<[^>]*>)?\(", src):
        i = src.find("{", m.end())
        depth, j = 0, i
        while j < len(src):
            if src[j] == "{":
                depth += 1
            elif src[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        out[m.group(1)] = src[m.start():j + 1]
    # functions made by a macro (`host_unary_ops! { acos => ..., }`): each
    # entry is the macro's body with its arguments
    macros = {m.group(1): m.group(2) for m in re.finditer(
        r"macro_rules!\s+(\w+)\s*\{(.*?)\n\}", src, re.S)}
    for m in re.finditer(r"(?m)^(\w+)!\s*\{(.*?)^\}", src, re.S):
        body = macros.get(m.group(1), "")
        for entry in m.group(2).split(";"):
            name = re.match(r"\s*(\w+)\s*=>", entry)
            if name:
                out[name.group(1)] = body + entry
    return out


def main():
    funcs, rows = {}, []
    shared = (OPS / "mod.rs").read_text()
    for f in sorted(OPS.glob("*.rs")):
        src = f.read_text()
        funcs.update(functions(src if f.name == "mod.rs" else shared + src))
        table = src.split("pub(super) const ROWS", 1)
        if len(table) == 2:
            for op, impl in re.findall(r'\(\s*"([^"]+)",\s*(.+?)\),?\s*\n', table[1]):
                rows.append((f.stem, op, impl))
    memo = {}

    def host(name, seen=()):
        if name in memo:
            return memo[name]
        body = funcs.get(name)
        if body is None or name in seen:
            return False
        r = bool(HOST.search(body)) or any(
            host(c, seen + (name,)) for c in set(IDENT.findall(body)) if c != name and c in funcs)
        memo[name] = r
        return r

    print("| family | op | on a GPU |")
    print("|---|---|---|")
    counts = {"device": 0, "host": 0}
    for family, op, impl in rows:
        called = set(IDENT.findall(impl)) | ({impl.strip()} if impl.strip() in funcs else set())
        on_host = bool(HOST.search(impl)) or any(host(c) for c in called)
        if not on_host:
            counts["device"] += 1
            continue
        counts["host"] += 1
        print(f"| {family} | `{op}` | {CONDITIONAL.get(op, 'host round trip')} |")
    print(f"\n{counts['device']} rows run on the device throughout; {counts['host']} rows above may copy to the host and back.", file=sys.stdout)


if __name__ == "__main__":
    main()
