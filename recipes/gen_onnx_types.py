"""Writes lib/data/onnx_types.txt: the element types each standard ONNX
operator takes at the opsets ir2onnx writes (from onnx's schemas), and
those ONNX Runtime's CPU provider has a kernel for (from its kernel
registry). ir2onnx checks every node it writes against both
(lib/src/export/onnx/builder/types.rs): a type neither the opset nor the
runtime takes is widened to one they do where that is exact, or refused.

    .venv-onnx/bin/python recipes/gen_onnx_types.py [--out lib/data/onnx_types.txt]

Lines:

    spec OP SINCE INPUT... -> OUTPUT... ; VAR=TYPE,... ...
    fn OP OPSET TYPE,...
    ort OP FROM TO VAR=TYPE,... ...

A `spec` line is the schema of OP from opset SINCE (until the next line of
OP). Each input and output is a type variable of the constraints after `;`
or a fixed set written `{TYPE,...}`; `?` marks an optional one, `...` a
variadic one (all of one type), `*` a variadic one whose values each have
a type of their own. A `fn` line lists the types ONNX Runtime runs OP's
function body for at OPSET, where none of OP's kernels takes them (found
by running it). An `ort` line is one CPU kernel, for opsets FROM to TO (`-`:
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


NUMPY = {"b8": "bool", "u8": "uint8", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
         "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16", "f32": "float32", "f64": "float64"}


def runs(op, opset, t):
    """Whether ONNX Runtime loads and runs a one-input node `op` of type `t`
    at `opset` (its function body, where no kernel takes `t`)."""
    import numpy as np
    from onnx import helper

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(NUMPY[t]))
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", elem, [3])], [helper.make_tensor_value_info("y", elem, [3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 19 else (9 if opset < 21 else 10)
    try:
        sess = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        sess.run(None, {"x": np.array([-2, 0, 3]).astype(NUMPY[t])})
        return True
    except Exception:
        return False


def function_lines(by_op, kernels):
    """`fn OP OPSET TYPE,...`: the types ONNX Runtime runs OP's function body
    for at OPSET where none of OP's kernels takes them, found by running it
    (ops of one input and no required attribute, which the emitters use so)."""
    lines = []
    for op in sorted(by_op):
        for opset in OPSETS:
            try:
                s = onnx.defs.get_schema(op, opset)
            except onnx.defs.SchemaError:
                continue
            if not s.has_function or len(s.inputs) != 1 or len(s.outputs) != 1:
                continue
            if any(a.required for a in s.attributes.values()):
                continue
            var = s.inputs[0].type_str
            allowed = [TYPES[t] for c in s.type_constraints if c.type_param_str == var
                       for t in c.allowed_type_strs if t in TYPES and TYPES[t] in NUMPY]
            covered = set()
            for lo, hi, cons in kernels.get(op, ()):
                if lo <= opset <= hi:
                    for part in cons.split():
                        covered.update(part.split("=")[1].split(","))
            ran = [t for t in allowed if t not in covered and runs(op, opset, t)]
            if ran:
                lines.append(f"fn {op} {opset} {','.join(ran)}")
    return lines


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
    lines.extend(function_lines(by_op, kernels))
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
