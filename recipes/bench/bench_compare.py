"""Benchmark: ir-run against ONNX Runtime, OpenVINO and torch eager, side by side.

    .venv/bin/python recipes/bench/bench_compare.py [--models mlp resnet18 ...] [--batches 1 8]
        [--threads 2] [--rounds 5] [--iters 5] [--warmup-time 0.3] [--onnx-python .venv-onnx/bin/python]
        [--bin target/release] [--scratch bench-scratch] [--json bench/compare.json]

`make bench-compare` runs it. For each model (full size, random weights,
fixed seeds; nothing downloaded) and batch size it:

1. builds the model in torch, exports it with torch.export at that batch
   size, saves the .pt2; `pt2ir` makes the IR as exported, `ir-decompose`
   (core ATen, cleanup passes) the lowered IR, `ir2onnx` the ONNX from the
   IR as exported; torch's own ONNX export of the same archive
   (`torch.onnx.export(ep, dynamo=True)`, its defaults) is written beside it;
2. times every runtime on the same inputs with the same thread count, each
   in its own process: `ir-run` as `ir-bench` on the IR as exported (what
   `pt2ir | ir-run` runs) and on the lowered IR, a fresh process each
   round; in long-lived workers torch eager, ONNX Runtime (default graph
   optimisation, intra-op threads = --threads) and OpenVINO (CPU device,
   PERFORMANCE_HINT=LATENCY, INFERENCE_NUM_THREADS = --threads) at f32
   (INFERENCE_PRECISION_HINT=f32), each of the two on `ir2onnx`'s ONNX and
   on torch's, and OpenVINO at its default precision on `ir2onnx`'s ONNX
   where that is bf16 (a CPU with bf16 instructions; a column of its own,
   never an anchor: its answers are bf16's). Rounds are interleaved in a
   rotating order; each round gives each runtime's median of --iters timed
   runs after warm-up runs (one at least, and on until they have taken
   --warmup-time seconds, 0.3 by default: ir-bench is a fresh process each
   round, whose first tens of runs of a small model are slower, and the
   workers get the same warm-up). The table shows the median over rounds,
   the best anchor (the float32 runtime with the lowest median: torch
   eager, ONNX Runtime or OpenVINO, on either ONNX) and paired ratios
   (median over rounds of ir-run / other);
3. measures time to first result (process start to the first output, from
   the artifact: `ir-run` on each IR file, ONNX Runtime and OpenVINO on
   `ir2onnx`'s .onnx, `torch.export.load(...).module()` for torch) in fresh
   processes, with each process's peak resident memory (wait4's ru_maxrss)
   and peak anonymous memory (RssAnon, sampled every 2 ms from /proc).

Models: an MLP 784-512-512-10 (batch 64 x the batch size), torchvision
resnet18, resnet50, mobilenet_v3_small and vit_b_16 (224 x 224), and
transformers BERT-base and GPT-2 small (default configs, sequence 128),
and the memory case `linear8192x12`: 12 x Linear(8192, 8192), 3.2 GB of
float32 weights (batch rows of 8192), whose artifacts (about 13 GB a
batch) are deleted once its row is measured; it gets no torch ONNX export
and no bf16 OpenVINO (each a further copy of the weights in memory).
Writes bench/compare.json (all figures, with versions and the machine) and
prints the Markdown table docs/performance.md shows. Timings want a quiet
machine.
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

ROOT = Path(__file__).resolve().parents[2]
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


# torch's own ONNX export of an archive (its defaults), in a fresh process.
EXPORT = r"""
import sys, torch
ep = torch.export.load(sys.argv[1])
torch.onnx.export(ep, (), sys.argv[2], dynamo=True)
"""


def prepare(name, batch, d, bin_dir):
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
    facts = {"export_s": round(export_s, 1), "params": sum(p.numel() for p in model.parameters()),
             "inputs": {n: list(x.shape) for n, x in zip(user, inputs)}}
    (d / "torch.onnx").unlink(missing_ok=True)
    if name not in BIG:
        r = subprocess.run([sys.executable, "-c", EXPORT, str(d / "model.pt2"), str(d / "torch.onnx")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            facts["torch_onnx_error"] = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
    return facts


# --------------------------------------------------------------------------
# Workers: one process per runtime, `run K` on stdin -> K times on stdout
# --------------------------------------------------------------------------

# The runtimes in workers: kind -> (the ONNX file it reads, or None for
# torch eager). "ov_bf16" is OpenVINO at its default precision.
WORKER_FILES = {"torch": None, "ort": "model.onnx", "ort_torch": "torch.onnx", "ov": "model.onnx",
                "ov_torch": "torch.onnx", "ov_bf16": "model.onnx"}
# The float32 runtimes the best anchor is chosen from.
ANCHORS = ["torch", "ort", "ort_torch", "ov", "ov_torch"]
LABELS = {"torch": "torch eager", "ort": "ONNX Runtime", "ort_torch": "ONNX Runtime (torch's ONNX)",
          "ov": "OpenVINO", "ov_torch": "OpenVINO (torch's ONNX)", "ov_bf16": "OpenVINO bf16"}


def ov_config(threads, f32):
    """OpenVINO's CPU settings: the latency hint, the thread count, and
    float32 unless the default precision is asked for."""
    cfg = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads}
    if f32:
        cfg["INFERENCE_PRECISION_HINT"] = "f32"
    return cfg


def ov_default_precision():
    """OpenVINO's default inference precision on this CPU ("bf16" where it
    has bf16 instructions, else "f32")."""
    import openvino as ov
    return ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()


def runner(kind, d, name, batch, threads, npz):
    """A function that runs the model once in this process."""
    if kind == "torch":
        import torch
        torch.set_num_threads(threads)
        model, _, _ = build(name, batch)
        feeds = tuple(torch.from_numpy(npz[k]) for k in npz.files)

        def run():
            with torch.no_grad():
                model(*feeds)
        return run
    path = str(Path(d) / WORKER_FILES[kind])
    if kind.startswith("ort"):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feeds = {i.name: npz[i.name] for i in sess.get_inputs()}
        return lambda: sess.run(None, feeds)
    import openvino as ov
    compiled = ov.Core().compile_model(path, "CPU", ov_config(threads, kind != "ov_bf16"))
    request = compiled.create_infer_request()
    feeds = {i.get_any_name(): npz[i.get_any_name()] for i in compiled.inputs}
    return lambda: request.infer(feeds)


def worker(kind, d, name, batch, threads):
    import numpy as np
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    run = runner(kind, d, name, batch, threads, np.load(Path(d) / "inputs.npz"))
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


# ir-run's two forms: the IR as exported (`pt2ir | ir-run`) and lowered
# (`pt2ir | ir-decompose | ir-run`).
IR_FILES = {"ir_run": "model.ir", "ir_run_core": "core.ir"}


def ir_bench_ms(bin_dir, ir, inputs, k, threads, warm):
    r = subprocess.run([str(Path(bin_dir) / "ir-bench"), str(ir), "--inputs", str(inputs),
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

# OpenVINO at float32, the settings of `ov_config`.
FIRST_OV = """
import sys, numpy as np, openvino as ov
cfg = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": int(sys.argv[3]), "INFERENCE_PRECISION_HINT": "f32"}
c = ov.Core().compile_model(sys.argv[1], "CPU", cfg)
npz = np.load(sys.argv[2])
c.create_infer_request().infer({i.get_any_name(): npz[i.get_any_name()] for i in c.inputs})
"""


def run_meta(a):
    """A run's facts for its JSON: date, machine, versions, and the settings
    of `a` (parsed arguments with onnx_python, threads, rounds, iters and
    warmup_time)."""
    import torch

    def onnx_python(code):
        # from the repository root, where `recipes` is a package
        r = subprocess.run([a.onnx_python, "-c", code], capture_output=True, text=True, cwd=ROOT)
        return r.stdout.strip() if r.returncode == 0 else None
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                         cwd=ROOT).stdout.strip()
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "cpu": cpu_name(), "isa": cpu_isa(), "torch": torch.__version__,
            "onnxruntime": onnx_python("import onnxruntime; print(onnxruntime.__version__)"),
            "openvino": onnx_python("import openvino; print(openvino.get_version().split('-')[0])"), "pt2kit": rev,
            "threads": a.threads, "rounds": a.rounds, "iters": a.iters, "warmup_time": a.warmup_time}
    if meta["openvino"]:
        meta["openvino_default_precision"] = onnx_python(
            "from recipes.bench import bench_compare as b; print(b.ov_default_precision())")
    return meta


def paired(a, b):
    """The median over rounds of a / b."""
    return round(statistics.median([x / y for x, y in zip(a, b)]), 3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup-time", type=float, default=0.3)
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--onnx-python", default=".venv-onnx/bin/python",
                    help="a Python with onnxruntime and openvino (OpenVINO's columns are left out without it)")
    ap.add_argument("--scratch", default="bench-scratch")
    ap.add_argument("--json", default="bench/compare.json")
    ap.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        kind, d, name, batch, threads = a.worker
        return worker(kind, d, name, int(batch), int(threads))

    meta = run_meta(a)
    if not meta["openvino"]:
        print(f"== no openvino in {a.onnx_python}: OpenVINO's columns are left out", file=sys.stderr, flush=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), RAYON_NUM_THREADS=str(a.threads))
    results = []
    for name in a.models:
        for batch in a.batches:
            d = ROOT / a.scratch / f"{name}_b{batch}"
            print(f"== {name} batch {batch}: export and convert", file=sys.stderr, flush=True)
            row = {"model": name, "batch": batch, **prepare(name, batch, d, a.bin)}
            kinds = ["torch", "ort"]
            if meta["openvino"]:
                kinds.append("ov")
                if meta.get("openvino_default_precision") == "bf16" and name not in BIG:
                    kinds.append("ov_bf16")
            if (d / "torch.onnx").exists():
                kinds += ["ort_torch"] + (["ov_torch"] if meta["openvino"] else [])
            # time to first result and memory, before the workers load
            inputs = str(d / "inputs.npz")
            firsts = {k: first_result([str(Path(a.bin) / "ir-run"), str(d / f), "--inputs", inputs,
                                       "-o", str(d / "out.npz")], env) for k, f in IR_FILES.items()}
            firsts["ort"] = first_result([a.onnx_python, "-c", FIRST_ORT, str(d / "model.onnx"), inputs,
                                          str(a.threads)], env)
            if "ov" in kinds:
                firsts["ov"] = first_result([a.onnx_python, "-c", FIRST_OV, str(d / "model.onnx"), inputs,
                                             str(a.threads)], env)
            firsts["torch"] = first_result([sys.executable, "-c", FIRST_TORCH, str(d / "model.pt2"), inputs,
                                            str(a.threads)], env)
            for k, (secs, rss, anon) in firsts.items():
                row[f"{k}_first_s"] = round(secs, 3)
                row[f"{k}_peak_rss"] = rss
                row[f"{k}_peak_anon"] = anon
            print(f"== {name} batch {batch}: timing {', '.join(list(IR_FILES) + kinds)}", file=sys.stderr,
                  flush=True)
            workers = {}
            try:
                for k in kinds:
                    workers[k] = Worker(sys.executable if k == "torch" else a.onnx_python, k, d, name, batch,
                                        a.threads)
                order = list(IR_FILES) + kinds
                rounds = {k: [] for k in order}
                for r in range(a.rounds):
                    for k in order[r % len(order):] + order[:r % len(order)]:
                        ms = (ir_bench_ms(a.bin, d / IR_FILES[k], inputs, a.iters, a.threads, a.warmup_time)
                              if k in IR_FILES else workers[k].median_ms(a.iters, a.warmup_time))
                        rounds[k].append(ms)
            finally:
                for w in workers.values():
                    w.close()
            for k, v in rounds.items():
                row[f"{k}_ms"] = round(statistics.median(v), 3)
                row[f"{k}_rounds_ms"] = [round(x, 3) for x in v]
            for form in IR_FILES:
                for other in kinds:
                    row[f"{form}_over_{other}"] = paired(rounds[form], rounds[other])
            row["ir_run_over_ir_run_core"] = paired(rounds["ir_run"], rounds["ir_run_core"])
            best = min((k for k in kinds if k in ANCHORS), key=lambda k: row[f"{k}_ms"])
            row["best_anchor"] = best
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


# --------------------------------------------------------------------------
# Tables (recipes/bench/update_readme.py renders the same functions)
# --------------------------------------------------------------------------


def forms(r):
    """A result row with ir-run's two forms under their names: `ir_run`
    the IR as exported, `ir_run_core` the lowered IR. A row of a run that
    timed the lowered IR alone (its `ir_run_*` figures were the lowered
    form's) is renamed so."""
    if "ir_run_core_ms" in r:
        return r
    return {(f"ir_run_core_{k[7:]}" if k.startswith("ir_run_") else k): v for k, v in r.items()}


def lowered_only(results):
    return not any("ir_run_ms" in forms(r) for r in results)


def ms(r, k):
    return f"{r[k + '_ms']:.2f}" if k + "_ms" in r else "-"


def ratio(r, key):
    return f"{r[key]:.2f}x" if key in r else "-"


def best(r):
    """The best anchor of a row: the float32 runtime with the lowest median."""
    if "best_anchor" in r:
        return r["best_anchor"]
    return min((k for k in ANCHORS if f"{k}_ms" in r), key=lambda k: r[f"{k}_ms"])


def trio(r, key, fmt):
    """ir-run's figure (as exported, else lowered) / ORT / OpenVINO / torch."""
    cells = [r.get(f"ir_run_{key}", r.get(f"ir_run_core_{key}"))] + [r.get(f"{k}_{key}") for k in ("ort", "ov", "torch")]
    return " / ".join("-" if c is None else fmt(c) for c in cells)


def mib(b):
    return f"{b / 2**20:.0f}"


def header(meta, results):
    ov = f", OpenVINO {meta['openvino']}" if meta.get("openvino") else ""
    line = (f"{meta['date']}, {meta['cpu']} ({meta['machine']}"
            + (f", {meta['isa']}" if meta.get("isa") else "")
            + f"), {meta['threads']} thread{'s' if meta['threads'] != 1 else ''} each; torch "
            f"{meta['torch']}, ONNX Runtime {meta['onnxruntime']}{ov}, pt2kit {meta['pt2kit']}; medians of "
            f"{meta['rounds']} interleaved rounds of {meta['iters']} runs"
            + (f" after {meta['warmup_time']} s of warm-up." if meta.get("warmup_time") else "."))
    if lowered_only(results):
        line += " This run timed `ir-run` on the lowered IR only."
    return line


def table(meta, results):
    """The full table of docs/performance.md."""
    results = [forms(r) for r in results]
    lines = [
        header(meta, results),
        "",
        "| model | batch | ir-run ms | ir-run lowered ms | torch eager ms | ONNX Runtime ms (ir2onnx / torch) "
        "| OpenVINO ms (ir2onnx / torch) | OpenVINO bf16 ms | best anchor | ir-run / best | lowered / best "
        "| ir-run / lowered | ir-run / ORT | ir-run / eager "
        "| first result s (ir-run / ORT / OpenVINO / torch) | peak RSS MiB (ir-run / ORT / OpenVINO / torch) "
        "| peak RssAnon MiB (ir-run / ORT / OpenVINO / torch) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for r in results:
        b = best(r)
        lines.append(
            f"| {r['model']} | {r['batch']} | {ms(r, 'ir_run')} | {ms(r, 'ir_run_core')} | {ms(r, 'torch')} "
            f"| {ms(r, 'ort')} / {ms(r, 'ort_torch')} | {ms(r, 'ov')} / {ms(r, 'ov_torch')} | {ms(r, 'ov_bf16')} "
            f"| {LABELS[b]} | {ratio(r, f'ir_run_over_{b}')} | {ratio(r, f'ir_run_core_over_{b}')} "
            f"| {ratio(r, 'ir_run_over_ir_run_core')} | {ratio(r, 'ir_run_over_ort')} "
            f"| {ratio(r, 'ir_run_over_torch')} "
            f"| {trio(r, 'first_s', lambda x: f'{x:.2f}')} | {trio(r, 'peak_rss', mib)} "
            f"| {trio(r, 'peak_anon', mib)} |")
    return "\n".join(lines)


def summary(meta, results, path):
    """The README's table: ir-run as exported against the best anchor."""
    results = [forms(r) for r in results]
    lines = [
        header(meta, results) + f" From `{path}`; below 1.00x `ir-run` takes less time.",
        "",
        "| model | batch | ir-run ms | best anchor | its ms | ir-run / best | ir-run lowered / best "
        "| ir-run / ONNX Runtime | ir-run / torch eager | OpenVINO bf16 ms "
        "| peak RSS MiB (ir-run / ORT / OpenVINO / torch) |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        b = best(r)
        lines.append(
            f"| {r['model']} | {r['batch']} | {ms(r, 'ir_run')} | {LABELS[b]} | {ms(r, b)} "
            f"| {ratio(r, f'ir_run_over_{b}')} | {ratio(r, f'ir_run_core_over_{b}')} "
            f"| {ratio(r, 'ir_run_over_ort')} | {ratio(r, 'ir_run_over_torch')} | {ms(r, 'ov_bf16')} "
            f"| {trio(r, 'peak_rss', mib)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
