"""Where a model's time goes in ir-run against ONNX Runtime, layer by layer.

    .venv-onnx/bin/python recipes/bench/compare_nodes.py DIR [--threads 1] [--iters 20] [--rounds 3] [--bin target/release] [--top 0]

DIR holds `core.ir`, `model.onnx` and `inputs.npz` (as `make bench-compare`
leaves them in `bench-scratch/MODEL_bBATCH/`). Both runtimes are profiled on
the same inputs and thread count: `ir-bench --profile` for ir-run, ONNX
Runtime's own profiler (default graph optimisation) for it, in
`--rounds` rounds that alternate which goes first, each layer's time
the least of its rounds' means (a shared machine's slow minutes fall on
one runtime at a time). The
convolutions and the products with a weight are paired in graph order by
the weight's shape (and a convolution's stride), as the two graphs name
them differently and ONNX Runtime fuses what follows into them (batch
norm, activations, a bias); each row is one layer: its mean time in each,
the ratio, and the weight's shape. A layer's time includes whatever each
runtime fused into it, so the rows say which layers stand in the way
rather than why. Needs the `onnx` and `onnxruntime` packages (the
`.venv-onnx` of `make`).
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ort_layers(d, threads, iters):
    """[(key, name, mean us)] of ONNX Runtime's Conv / Gemm / MatMul nodes with a weight, in graph order."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    with tempfile.TemporaryDirectory() as tmp:
        opt = os.path.join(tmp, "opt.onnx")
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        so.optimized_model_filepath = opt
        ort.InferenceSession(str(d / "model.onnx"), so, providers=["CPUExecutionProvider"])
        graph = onnx.load(opt).graph
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        so.enable_profiling, so.profile_file_prefix = True, os.path.join(tmp, "ort")
        s = ort.InferenceSession(str(d / "model.onnx"), so, providers=["CPUExecutionProvider"])
        npz = np.load(d / "inputs.npz")
        feeds = {i.name: npz[i.name] if i.name in npz.files else npz[npz.files[k]] for k, i in enumerate(s.get_inputs())}
        s.run(None, feeds)
        for _ in range(iters):
            s.run(None, feeds)
        events = json.load(open(s.end_profiling()))
    us = collections.defaultdict(float)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            us[e["name"][: -len("_kernel_time")]] += e["dur"] / (iters + 1)
    inits = {i.name: tuple(i.dims) for i in graph.initializer}
    out = []
    for n in graph.node:
        if len(n.input) < 2 or n.input[1] not in inits:
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        w = inits[n.input[1]]
        if n.op_type == "Conv":
            out.append((conv_key(w, attrs.get("strides", [1, 1])), n.name, us.get(n.name, 0.0)))
        elif n.op_type in ("Gemm", "MatMul", "FusedMatMul") and len(w) == 2:
            kn = w[::-1] if attrs.get("transB", 0) else w
            out.append((("matmul", tuple(kn)), n.name, us.get(n.name, 0.0)))
    return out


# our convolutions' weight shapes by node, as they are (the keys round them)
WEIGHTS = {}


def conv_key(w, strides):
    """A convolution's pairing key: its weight's shape, the channel dims
    rounded up to 16 (ONNX Runtime's blocked layout pads a layer's
    channels to its block, 8 or 16: MobileNetV3's 72 become 80), and its
    strides."""
    w = tuple(w)
    return ("conv", tuple(-(-d // 16) * 16 for d in w[:2]) + w[2:], tuple(strides))


def ir_layers(d, threads, iters, bin_dir):
    """[(key, name, mean us)] of ir-run's convolutions and products with a weight, in graph order."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    prof = json.loads(subprocess.run(
        [str(bin_dir / "ir-bench"), str(d / "core.ir"), "--inputs", str(d / "inputs.npz"), "--iters", str(iters),
         "--warmup", "1", "--threads", str(threads), "--profile", "--format", "json", "-q"],
        check=True, capture_output=True, text=True, env=env).stdout)["profile"]
    us = {n["node"]: n["seconds"] * 1e6 for n in prof["nodes"]}
    text = subprocess.run([str(bin_dir / "ir-decompose"), "--no-lower", "--emit", "text", str(d / "core.ir")],
                          check=True, capture_output=True, text=True).stdout
    shape = {k: tuple(int(v) for v in s.split(", ") if v) for k, s in re.findall(r"%(\w+): \w+\[([^\]]*)\]", text)}
    shape.update({k: tuple(int(v) for v in s.split(", ") if v)
                  for k, s in re.findall(r"^\s*%(\w+) = .*\) : \w+\[([^\]]*)\]", text, re.M)})
    out = []
    for line in text.splitlines():
        node = re.search(r"# node (\S+)", line)
        m = re.match(r"\s*%(\w+) = aten\.", line)
        if not m:
            continue
        name = m.group(1)
        t = us.get(name, us.get(node.group(1), 0.0) if node else 0.0)
        conv = re.search(r"aten\.convolution\.default\(%\w+, %(\w+), [^,]+, \[([\d, ]+)\]", line)
        mm = re.search(r"aten\.(?:addmm\.default\([^,]+, %\w+, %(\w+)|mm\.default\(%\w+, %(\w+))", line)
        if conv and conv.group(1) in shape:
            stride = tuple(int(v) for v in conv.group(2).split(", "))
            out.append((conv_key(shape[conv.group(1)], stride), name, t))
            WEIGHTS[name] = shape[conv.group(1)]
        elif mm:
            kn = shape.get(mm.group(1) or mm.group(2))
            if kn is not None and len(kn) == 2:
                out.append((("matmul", kn), name, t))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", type=Path, default=ROOT / "target" / "release")
    ap.add_argument("--top", type=int, default=0, help="only the N layers that lose the most time (0: all, in graph order)")
    a = ap.parse_args()
    runs = {"ours": [], "theirs": []}
    for r in range(max(a.rounds, 1)):
        for who in (["ours", "theirs"] if r % 2 == 0 else ["theirs", "ours"]):
            runs[who].append(ir_layers(a.dir, a.threads, a.iters, a.bin) if who == "ours"
                             else ort_layers(a.dir, a.threads, a.iters))
    # each layer's least time over the rounds (the same layers, in the same order, every round)
    least = lambda rs: [(k, n, min(r[i][2] for r in rs)) for i, (k, n, _) in enumerate(rs[0])]
    ours, theirs = least(runs["ours"]), least(runs["theirs"])
    left = list(theirs)
    rows, unpaired = [], []
    for key, name, t in ours:
        k = next((i for i, o in enumerate(left) if o[0] == key), None)
        if k is None:
            unpaired.append(name)
            continue
        _, oname, ot = left.pop(k)
        rows.append((name, oname, t, ot, key))
    if a.top:
        rows = sorted(rows, key=lambda r: r[3] - r[2])[: a.top]
    print(f"| ir-run node | ONNX Runtime node | ir-run us | ORT us | ratio | weight |")
    print("|---|---|---:|---:|---:|---|")
    for name, oname, t, ot, key in rows:
        w = "x".join(map(str, WEIGHTS.get(name, key[1]))) + (f" stride {key[2][0]}" if key[0] == "conv" and key[2][0] != 1 else "")
        print(f"| {name} | {oname} | {t:.1f} | {ot:.1f} | {t / ot if ot else float('nan'):.2f}x | {w} |")
    st, so = sum(r[2] for r in rows), sum(r[3] for r in rows)
    print(f"\n{len(rows)} layers paired: ir-run {st / 1e3:.3f} ms, ONNX Runtime {so / 1e3:.3f} ms ({st / so if so else float('nan'):.2f}x)"
          f"; unpaired: {len(unpaired)} of ir-run's, {len(left)} of ONNX Runtime's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
