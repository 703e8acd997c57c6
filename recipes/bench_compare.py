"""Benchmark: ir-run against ONNX Runtime and torch eager, side by side.

    .venv/bin/python recipes/bench_compare.py [--models mlp resnet18 ...] [--batches 1 8]
        [--threads 2] [--rounds 5] [--iters 5] [--warmup-time 0.3] [--onnx-python .venv-onnx/bin/python]
        [--bin target/release] [--scratch bench-scratch] [--json bench/compare.json]

`make bench-compare` runs it. For each model (full size, random weights,
fixed seeds; nothing downloaded) and batch size it:

1. builds the model in torch, exports it with torch.export at that batch
   size, saves the .pt2; `pt2ir`, `ir-decompose` (core ATen, cleanup passes:
   the graph a deployment runs) and `ir2onnx` make the IR and the ONNX;
2. times the three runtimes on the same inputs with the same thread count,
   each in its own process: torch eager and ONNX Runtime (default graph
   optimisation, intra-op threads = --threads) in long-lived workers, ir-run
   as `ir-bench` on the decomposed IR. Rounds are interleaved in a rotating
   order; each round gives each runtime's median of --iters timed runs
   after warm-up runs (one at least, and on until they have taken
   --warmup-time seconds, 0.3 by default: ir-bench is a fresh process each
   round, whose first tens of runs of a small model are slower, and the
   workers get the same warm-up), and the table shows the median over rounds and
   the paired ratio (median over rounds of ir-run / other);
3. measures time to first result (process start to the first output, from
   the artifact: `ir-run` on the IR file, ONNX Runtime on the .onnx,
   `torch.export.load(...).module()` for torch) in fresh processes, with
   each process's peak resident memory (wait4's ru_maxrss) and peak
   anonymous memory (RssAnon, sampled every 2 ms from /proc).

Models: an MLP 784-512-512-10 (batch 64 x the batch size), torchvision
resnet18, resnet50, mobilenet_v3_small and vit_b_16 (224 x 224), and
transformers BERT-base and GPT-2 small (default configs, sequence 128),
and the memory case `linear8192x12`: 12 x Linear(8192, 8192), 3.2 GB of
float32 weights (batch rows of 8192), whose artifacts (about 13 GB a
batch) are deleted once its row is measured. Writes bench/compare.json (all figures, with versions and the machine) and
prints the Markdown table docs/performance.md shows. Timings want a quiet machine.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["mlp", "resnet18", "resnet50", "mobilenet_v3_small", "vit_b_16", "bert", "gpt2", "linear8192x12"]
# Models whose scratch files (the archive, the IR files, the ONNX and its
# data) are deleted once their row is measured.
BIG = {"linear8192x12"}


# --------------------------------------------------------------------------
# Models (torch side)
# --------------------------------------------------------------------------


def build(name, batch):
    """(model in eval mode, tuple of inputs, input names). Seeds fixed."""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    if name == "mlp":
        m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        inputs, names = (torch.randn(64 * batch, 784),), ["x"]
    elif name == "linear8192x12":
        m = nn.Sequential(*[nn.Linear(8192, 8192) for _ in range(12)])
        inputs, names = (torch.randn(batch, 8192),), ["x"]
    elif name in ("resnet18", "resnet50", "mobilenet_v3_small", "vit_b_16"):
        import torchvision
        m = getattr(torchvision.models, name)()
        inputs, names = (torch.randn(batch, 3, 224, 224),), ["x"]
    elif name in ("bert", "gpt2"):
        import transformers as T
        if name == "bert":
            core = T.BertModel(T.BertConfig(attn_implementation="sdpa"))
        else:
            core = T.GPT2LMHeadModel(T.GPT2Config(attn_implementation="sdpa"))

        class Wrap(nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, input_ids):
                kw = {"use_cache": False} if name == "gpt2" else {}
                return self.m(input_ids=input_ids, return_dict=False, **kw)[0]
        m = Wrap(core)
        inputs, names = (torch.randint(0, 1000, (batch, 128)),), ["input_ids"]
    else:
        raise SystemExit(f"unknown model {name}; known: {MODELS}")
    return m.eval(), inputs, names


def prepare(name, batch, d, bin_dir, onnx_python):
    """Exports, converts and writes the inputs into d; returns facts."""
    import numpy as np
    import torch

    d.mkdir(parents=True, exist_ok=True)
    model, inputs, _ = build(name, batch)
    t = time.time()
    ep = torch.export.export(model, inputs)
    torch.export.save(ep, str(d / "model.pt2"))
    export_s = time.time() - t
    user = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    np.savez(d / "inputs.npz", **{n: x.numpy() for n, x in zip(user, inputs)})
    b = Path(bin_dir)
    for cmd in ([b / "pt2ir", d / "model.pt2", "-o", d / "model.ir"],
                [b / "ir-decompose", d / "model.ir", "-o", d / "core.ir"],
                [b / "ir2onnx", d / "model.ir", "-o", d / "model.onnx"]):
        subprocess.run([str(c) for c in cmd], check=True, capture_output=True)
    return {"export_s": round(export_s, 1), "params": sum(p.numel() for p in model.parameters()),
            "inputs": {n: list(x.shape) for n, x in zip(user, inputs)}}


# --------------------------------------------------------------------------
# Workers: one process per runtime, `run K` on stdin -> K times on stdout
# --------------------------------------------------------------------------


def worker(kind, d, name, batch, threads):
    import numpy as np
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    npz = np.load(Path(d) / "inputs.npz")
    if kind == "torch":
        import torch
        torch.set_num_threads(threads)
        model, _, _ = build(name, batch)
        feeds = tuple(torch.from_numpy(npz[k]) for k in npz.files)

        def run():
            with torch.no_grad():
                model(*feeds)
    else:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        # "ort": ir2onnx's ONNX; "ort_torch": torch's own export of the same
        # archive (recipes/bench_ort_exports.py)
        onnx = "model.onnx" if kind == "ort" else "torch.onnx"
        sess = ort.InferenceSession(str(Path(d) / onnx), so, providers=["CPUExecutionProvider"])
        feeds = {i.name: npz[i.name] for i in sess.get_inputs()}

        def run():
            sess.run(None, feeds)
    run()  # warm-up
    out.write("READY\n")
    out.flush()
    for line in sys.stdin:
        k, warm = int(line.split()[1]), float(line.split()[2])
        t0 = time.perf_counter()
        run()
        while time.perf_counter() - t0 < warm:
            run()
        times = []
        for _ in range(k):
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
        out.write(json.dumps(times) + "\n")
        out.flush()


class Worker:
    def __init__(self, python, kind, d, name, batch, threads):
        self.p = subprocess.Popen(
            [python, __file__, "--worker", kind, str(d), name, str(batch), str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
            env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
        if self.p.stdout.readline().strip() != "READY":
            raise RuntimeError(f"{kind} worker did not start")

    def median_ms(self, k, warm):
        self.p.stdin.write(f"run {k} {warm}\n")
        self.p.stdin.flush()
        return statistics.median(json.loads(self.p.stdout.readline())) * 1e3

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def ir_bench_ms(bin_dir, d, k, threads, warm):
    r = subprocess.run([str(Path(bin_dir) / "ir-bench"), str(d / "core.ir"), "--inputs", str(d / "inputs.npz"),
                        "--iters", str(k), "--warmup", "1", "--warmup-time", str(warm), "--threads", str(threads),
                        "--format", "json", "-q"],
                       check=True, capture_output=True, text=True)
    return json.loads(r.stdout)["median_seconds"] * 1e3


# --------------------------------------------------------------------------
# Time to first result and peak memory, in fresh processes
# --------------------------------------------------------------------------


# A small launcher: a process forked from this one (torch loaded) would
# count this one's resident memory as its own in ru_maxrss, so the
# measured program is spawned by a fresh, small Python, which reports its
# pid (for sampling), then the wall time and the child's ru_maxrss.
LAUNCH = """
import json, os, sys, time
t = time.perf_counter()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
print(pid, flush=True)
_, status, ru = os.wait4(pid, 0)
print(json.dumps([time.perf_counter() - t, status, ru.ru_maxrss * 1024]), flush=True)
"""


def first_result(cmd, env=None):
    """(seconds from start to exit, peak RSS bytes, peak RssAnon bytes)."""
    cmd = [str(Path(cmd[0]).absolute())] + [str(c) for c in cmd[1:]]
    p = subprocess.Popen([sys.executable, "-S", "-c", LAUNCH] + cmd, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd=ROOT, env=env, text=True)
    pid = int(p.stdout.readline())
    peak_anon = [0]
    done = threading.Event()

    def sample():
        path = f"/proc/{pid}/status"
        while not done.is_set():
            try:
                for line in open(path):
                    if line.startswith("RssAnon:"):
                        peak_anon[0] = max(peak_anon[0], int(line.split()[1]) * 1024)
            except (OSError, ValueError):
                pass
            time.sleep(0.002)
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    secs, status, maxrss = json.loads(p.stdout.readline())
    p.wait()
    done.set()
    th.join()
    if status != 0:
        raise RuntimeError(f"{cmd[0]} exited with {status}")
    return secs, maxrss, peak_anon[0]


FIRST_TORCH = """
import sys, numpy as np, torch
torch.set_num_threads(int(sys.argv[3]))
npz = np.load(sys.argv[2])
m = torch.export.load(sys.argv[1]).module()
with torch.no_grad():
    m(*[torch.from_numpy(npz[k]) for k in npz.files])
"""

FIRST_ORT = """
import sys, numpy as np, onnxruntime as ort
so = ort.SessionOptions(); so.intra_op_num_threads = int(sys.argv[3]); so.inter_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
npz = np.load(sys.argv[2])
s.run(None, {i.name: npz[i.name] for i in s.get_inputs()})
"""


def run_meta(a):
    """A run's facts for its JSON: date, machine, versions, and the settings
    of `a` (parsed arguments with onnx_python, threads, rounds, iters and
    warmup_time)."""
    import torch
    ort_version = subprocess.run([a.onnx_python, "-c", "import onnxruntime; print(onnxruntime.__version__)"],
                                 check=True, capture_output=True, text=True).stdout.strip()
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                         cwd=ROOT).stdout.strip()
    return {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "cpu": cpu_name(), "isa": cpu_isa(), "torch": torch.__version__, "onnxruntime": ort_version, "pt2kit": rev,
            "threads": a.threads, "rounds": a.rounds, "iters": a.iters, "warmup_time": a.warmup_time}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup-time", type=float, default=0.3)
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--onnx-python", default=".venv-onnx/bin/python")
    ap.add_argument("--scratch", default="bench-scratch")
    ap.add_argument("--json", default="bench/compare.json")
    ap.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        kind, d, name, batch, threads = a.worker
        return worker(kind, d, name, int(batch), int(threads))

    meta = run_meta(a)
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), RAYON_NUM_THREADS=str(a.threads))
    results = []
    for name in a.models:
        for batch in a.batches:
            d = ROOT / a.scratch / f"{name}_b{batch}"
            print(f"== {name} batch {batch}: export and convert", file=sys.stderr, flush=True)
            row = {"model": name, "batch": batch, **prepare(name, batch, d, a.bin, a.onnx_python)}
            # time to first result and memory, before the workers load
            firsts = {
                "ir_run": first_result([str(Path(a.bin) / "ir-run"), str(d / "core.ir"), "--inputs",
                                        str(d / "inputs.npz"), "-o", str(d / "out.npz")], env),
                "ort": first_result([a.onnx_python, "-c", FIRST_ORT, str(d / "model.onnx"), str(d / "inputs.npz"),
                                     str(a.threads)], env),
                "torch": first_result([sys.executable, "-c", FIRST_TORCH, str(d / "model.pt2"),
                                       str(d / "inputs.npz"), str(a.threads)], env),
            }
            for k, (secs, rss, anon) in firsts.items():
                row[f"{k}_first_s"] = round(secs, 3)
                row[f"{k}_peak_rss"] = rss
                row[f"{k}_peak_anon"] = anon
            print(f"== {name} batch {batch}: timing", file=sys.stderr, flush=True)
            workers = {"torch": Worker(sys.executable, "torch", d, name, batch, a.threads),
                       "ort": Worker(a.onnx_python, "ort", d, name, batch, a.threads)}
            rounds = {"ir_run": [], "ort": [], "torch": []}
            order = ["ir_run", "ort", "torch"]
            try:
                for r in range(a.rounds):
                    for k in order[r % 3:] + order[:r % 3]:
                        ms = (ir_bench_ms(a.bin, d, a.iters, a.threads, a.warmup_time) if k == "ir_run"
                              else workers[k].median_ms(a.iters, a.warmup_time))
                        rounds[k].append(ms)
            finally:
                for w in workers.values():
                    w.close()
            for k, v in rounds.items():
                row[f"{k}_ms"] = round(statistics.median(v), 3)
                row[f"{k}_rounds_ms"] = [round(x, 3) for x in v]
            for other in ("ort", "torch"):
                row[f"ir_run_over_{other}"] = round(statistics.median(
                    [i / o for i, o in zip(rounds["ir_run"], rounds[other])]), 3)
            results.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if name in BIG:
                for f in d.iterdir():
                    if f.name not in ("inputs.npz",):
                        f.unlink()
            Path(a.json).parent.mkdir(parents=True, exist_ok=True)
            Path(a.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    print(table(meta, results))
    return 0


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_isa():
    """The vector instruction set ir-run's kernels take on this CPU (two
    CPUs may share a model name and differ here: ir-run's AVX-512 and AVX2
    kernels differ in speed, and so do ONNX Runtime's)."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = line.split(":", 1)[1].split()
                if "avx512f" in flags:
                    return "AVX-512"
                if "avx2" in flags and "fma" in flags:
                    return "AVX2 + FMA, no AVX-512"
                return "no AVX2"
    except OSError:
        pass
    return "unknown"


def mib(b):
    return f"{b / 2**20:.0f}"


def table(meta, results):
    """The table of docs/performance.md (recipes/update_readme.py renders the same)."""
    lines = [
        f"{meta['date']}, {meta['cpu']} ({meta['machine']}"
        + (f", {meta['isa']}" if meta.get("isa") else "")
        + f"), {meta['threads']} thread{'s' if meta['threads'] != 1 else ''} each; torch "
        f"{meta['torch']}, ONNX Runtime {meta['onnxruntime']}, pt2kit {meta['pt2kit']}; medians of "
        f"{meta['rounds']} interleaved rounds of {meta['iters']} runs"
        + (f" after {meta['warmup_time']} s of warm-up." if meta.get("warmup_time") else "."),
        "",
        "| model | batch | torch eager ms | ONNX Runtime ms | ir-run ms | ir-run / ORT | ir-run / eager "
        "| first result s (ir-run / ORT / torch) | peak RSS MiB (ir-run / ORT / torch) "
        "| peak RssAnon MiB (ir-run / ORT / torch) |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['model']} | {r['batch']} | {r['torch_ms']:.2f} | {r['ort_ms']:.2f} | {r['ir_run_ms']:.2f} "
            f"| {r['ir_run_over_ort']:.2f}x | {r['ir_run_over_torch']:.2f}x "
            f"| {r['ir_run_first_s']:.2f} / {r['ort_first_s']:.2f} / {r['torch_first_s']:.2f} "
            f"| {mib(r['ir_run_peak_rss'])} / {mib(r['ort_peak_rss'])} / {mib(r['torch_peak_rss'])} "
            f"| {mib(r['ir_run_peak_anon'])} / {mib(r['ort_peak_anon'])} / {mib(r['torch_peak_anon'])} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
