"""Writes lib/data/onnx_types.txt: the element types each standard ONNX
operator takes at the opsets ir2onnx writes (from onnx's schemas), and
those ONNX Runtime's CPU provider has a kernel for (from its kernel
registry). ir2onnx checks every node it writes against both
(lib/src/export/onnx/builder/types.rs): a type neither the opset nor the
runtime takes is widened to one they do where that is exact, or refused.

    .venv-onnx/bin/python recipes/gen_onnx_types.py [--out lib/data/onnx_types.txt]

Lines:

    spec OP SINCE INPUT... -> OUTPUT... ; VAR=TYPE,... ...
    ort OP FROM TO VAR=TYPE,... ...

A `spec` line is the schema of OP from opset SINCE (until the next line of
OP). Each input and output is a type variable of the constraints after `;`
or a fixed set written `{TYPE,...}`; `?` marks an optional one, `...` a
variadic one (all of one type), `*` a variadic one whose values each have
a type of their own. An `ort` line is one CPU kernel, for opsets FROM to TO (`-`:
no end): a node runs where some kernel takes the types of all its
variables (a variable a kernel does not name, it takes in any type).
Types are the IR's short names (b8, u8, i8, i16, i32, i64, u16, u32, u64,
f16, bf16, f32, f64, c64, c128, f8...); others (strings, sequences, 4-bit
types) are left out.
"""
import argparse
import collections

import onnx
import onnx.defs
import onnxruntime
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

OPSETS = range(17, 22)  # lib/src/export/onnx.rs OPSETS

TYPES = {
    "tensor(bool)": "b8",
    "tensor(uint8)": "u8",
    "tensor(int8)": "i8",
    "tensor(int16)": "i16",
    "tensor(int32)": "i32",
    "tensor(int64)": "i64",
    "tensor(uint16)": "u16",
    "tensor(uint32)": "u32",
    "tensor(uint64)": "u64",
    "tensor(float16)": "f16",
    "tensor(bfloat16)": "bf16",
    "tensor(float)": "f32",
    "tensor(double)": "f64",
    "tensor(complex64)": "c64",
    "tensor(complex128)": "c128",
    "tensor(float8e4m3fn)": "f8e4m3fn",
    "tensor(float8e5m2)": "f8e5m2",
    "tensor(float8e4m3fnuz)": "f8e4m3fnuz",
    "tensor(float8e5m2fnuz)": "f8e5m2fnuz",
}
ORDER = list(TYPES.values())


def types(strs):
    kept = sorted({TYPES[t] for t in strs if t in TYPES}, key=ORDER.index)
    return ",".join(kept) if kept else "-"


def formal(p, constraints):
    if p.type_str in constraints:
        t = p.type_str
    else:
        t = "{" + types([p.type_str]) + "}"
    option = str(p.option)
    if option.endswith("Optional"):
        t += "?"
    elif option.endswith("Variadic"):
        # each of a heterogeneous variadic's values has a type of its own
        t += "..." if p.is_homogeneous else "*"
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="lib/data/onnx_types.txt")
    args = ap.parse_args()

    lines = [
        f"# ONNX operator types at opsets {OPSETS[0]}-{OPSETS[-1]} (onnx {onnx.__version__}) and ONNX Runtime "
        f"{onnxruntime.__version__}'s CPU kernels (recipes/gen_onnx_types.py)"
    ]
    by_op = collections.defaultdict(list)
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain == "" and not s.deprecated:
            by_op[s.name].append(s)
    ops = sorted(by_op)
    for op in ops:
        versions = sorted(by_op[op], key=lambda s: s.since_version)
        for i, s in enumerate(versions):
            until = versions[i + 1].since_version - 1 if i + 1 < len(versions) else 10**9
            if s.since_version > OPSETS[-1] or until < OPSETS[0]:
                continue
            constraints = {c.type_param_str: c.allowed_type_strs for c in s.type_constraints}
            ins = " ".join(formal(p, constraints) for p in s.inputs)
            outs = " ".join(formal(p, constraints) for p in s.outputs)
            cons = " ".join(f"{k}={types(v)}" for k, v in constraints.items())
            lines.append(f"spec {op} {s.since_version} {ins} -> {outs} ; {cons}".replace("  ", " "))
    kernels = collections.defaultdict(set)
    for k in ort_state.get_all_opkernel_def():
        if k.provider != "CPUExecutionProvider" or k.domain not in ("", "ai.onnx"):
            continue
        lo, hi = k.version_range
        if hi < OPSETS[0] or lo > OPSETS[-1] or k.op_name not in by_op:
            continue
        cons = " ".join(f"{v}={types(ts)}" for v, ts in sorted(k.type_constraints.items()))
        kernels[k.op_name].add((lo, hi, cons))
    for op in sorted(kernels):
        # one line per kernel; kernels of one range and one variable merged
        merged = collections.defaultdict(list)
        rest = []
        for lo, hi, cons in sorted(kernels[op]):
            parts = cons.split()
            if len(parts) == 1:
                var, ts = parts[0].split("=")
                merged[(lo, hi, var)].extend(t for t in ts.split(",") if t != "-")
            else:
                rest.append((lo, hi, cons))
        for (lo, hi, var), ts in merged.items():
            ts = sorted(set(ts), key=ORDER.index)
            rest.append((lo, hi, f"{var}={','.join(ts) or '-'}"))
        for lo, hi, cons in sorted(rest):
            lines.append(f"ort {op} {lo} {'-' if hi >= 2**31 - 1 else hi} {cons}".rstrip())
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines) - 1} lines -> {args.out}")


if __name__ == "__main__":
    main()
