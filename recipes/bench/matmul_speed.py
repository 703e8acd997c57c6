"""A linear layer's product alone: ir-run's packed kernel against ONNX
Runtime's MatMul (its weight prepacked), same shapes, same thread count,
each in its own process, rounds alternating which goes first.

    .venv-onnx/bin/python recipes/bench/matmul_speed.py [--threads 1] [--rounds 3] [--cold] [--shapes 128,3072,768 ...]

ir-run's side is the ignored test `products_speed` (lib/src/kernels/sgemm/
tests.rs, built by `cargo test --release`), ONNX Runtime's a one-node
model (B a constant, so prepacked at load) timed for 2 s a round. With
`--cold` each call reads B from memory, as a model's weights past the
last-level cache: ir-run cycles through copies of B of 128 MiB or more,
ONNX Runtime runs a model of as many MatMuls side by side (one input)
and each call is its run time over their count. Prints a Markdown table
of median and best GFLOP/s and the paired ratio of medians. Where the
product alone is at ONNX Runtime's speed, a model's gap lies elsewhere:
in what surrounds the products (compare_nodes.py says which layers).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHAPES = ["128,3072,768", "128,768,3072", "128,768,768", "64,512,784", "512,512,784", "64,3072,768"]

ORT = r"""
import sys, time, numpy as np, onnxruntime as ort
from onnx import helper, TensorProto, numpy_helper
t, cold = int(sys.argv[1]), sys.argv[2] == "1"
for s in sys.argv[3:]:
    m, n, k = map(int, s.split(","))
    rng = np.random.default_rng(0)
    copies = -(-(128 << 20) // (k * n * 4)) if cold else 1
    b = rng.standard_normal((k, n)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a", f"b{i}"], [f"c{i}"]) for i in range(copies)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info(f"c{i}", TensorProto.FLOAT, [m, n]) for i in range(copies)],
        [numpy_helper.from_array(b + i, f"b{i}") for i in range(copies)])
    mo = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    o = ort.SessionOptions(); o.intra_op_num_threads = t; o.inter_op_num_threads = 1
    sess = ort.InferenceSession(mo.SerializeToString(), o, providers=["CPUExecutionProvider"])
    a = {"a": rng.standard_normal((m, k)).astype(np.float32)}
    for _ in range(3):
        sess.run(None, a)
    ts, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < 2:
        x = time.perf_counter(); sess.run(None, a); ts.append((time.perf_counter() - x) / copies)
    ts.sort(); gf = 2 * m * n * k / 1e9
    print(f"ort {m}x{n}x{k}: median {gf / ts[len(ts) // 2]:.1f} GF/s best {gf / ts[0]:.1f}", flush=True)
"""


def ours(threads, cold, shapes):
    env = dict(os.environ, THREADS=str(threads), SHAPES=" ".join(shapes))
    env.pop("COLD", None)
    if cold:
        env["COLD"] = "1"
    out = subprocess.run(
        ["cargo", "test", "--release", "--locked", "-p", "pt2kit", "--features", "exec", "--lib",
         "products_speed", "--", "--ignored", "--nocapture", "--test-threads=1"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True).stderr
    return parse(out, "ir-run")


def theirs(threads, cold, shapes):
    out = subprocess.run([sys.executable, "-c", ORT, str(threads), "1" if cold else "0", *shapes],
                         capture_output=True, text=True, check=True).stdout
    return parse(out, "ort")


def parse(text, who):
    """{shape: (median, best)} GFLOP/s from the lines `who` printed."""
    got = {}
    for m in re.finditer(who + r" (\d+x\d+x\d+)(?: t\d+)?(?: cold)?: median ([\d.]+) GF/s best ([\d.]+)", text):
        got[m.group(1).replace("x", ",")] = (float(m.group(2)), float(m.group(3)))
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--shapes", nargs="+", default=SHAPES, help="m,n,k of each product")
    a = ap.parse_args()
    runs = {"ir": [], "ort": []}
    for r in range(a.rounds):
        for who in (["ir", "ort"] if r % 2 == 0 else ["ort", "ir"]):
            f = ours if who == "ir" else theirs
            runs[who].append(f(a.threads, a.cold, a.shapes))
    print(f"{a.threads} thread(s){', B from memory' if a.cold else ''}, {a.rounds} rounds; GFLOP/s, medians of the rounds' medians (best of all)\n")
    print("| m x n x k | ir-run | ONNX Runtime | ir-run time / ORT |")
    print("|---|---:|---:|---:|")
    for s in a.shapes:
        i = [x[s] for x in runs["ir"]]
        o = [x[s] for x in runs["ort"]]
        ratio = statistics.median(y[0] / x[0] for x, y in zip(i, o))
        med = lambda v: statistics.median(x[0] for x in v)  # noqa: E731
        print(f"| {s.replace(',', ' x ')} | {med(i):.1f} ({max(x[1] for x in i):.1f}) | {med(o):.1f} ({max(x[1] for x in o):.1f}) | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
