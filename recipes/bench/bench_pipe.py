#!/usr/bin/env python3
"""Benchmark: weights through a pipeline by reference (issue 53, item 4).

    .venv/bin/python recipes/bench/bench_pipe.py [--bin target/release]
        [--scratch bench-scratch/pipe] [--layers 12] [--json bench/pipe.json]

Makes a model of LAYERS x Linear(8192, 8192) without bias (12 layers:
3.2 GB of float32 weights), exports and saves it with torch, and writes
it as an IR file with its weights inline (`pt2ir --weights inline`). Then,
with the page cache warm (the second of two `cat`s is the reference):

1. `ir-decompose < big.ir | ir2onnx --external-data` (the IR file mapped
   from standard input; its weights passed on by reference into it);
2. `cat big.ir | ir-decompose | ir2onnx --external-data` (a pipe of
   inline weights: ir-decompose spools them once and hands the spool
   over to ir2onnx);
3. `cat big.ir | ir-decompose | ir-decompose | ir2onnx --external-data`
   (two readers of a pipe: still one spool);
4. `ir2onnx big.ir --external-data` (the reference: the IR file by path).

Each command runs under bash, after a `sync` (so each pays for its own
writes, not the last one's); every process of it is sampled every 5 ms
from /proc for its anonymous memory (RssAnon) and for the spool files it
holds open (`.pt2kit-spool-*`, counted by inode over the whole pipeline).
Prints a Markdown table (wall time, GB/s of IR bytes, peak RssAnon per
tool, spools made) and writes --json.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from recipes.bench.bench_huge import children_of, kib, status  # noqa: E402


def make_model(path, layers):
    import torch

    torch.manual_seed(0)
    m = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192, bias=False) for _ in range(layers)])
    with torch.no_grad():
        ep = torch.export.export(m, (torch.randn(1, 8192),))
        torch.export.save(ep, str(path))


def spools_of(pid):
    out = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            p = f"/proc/{pid}/fd/{fd}"
            try:
                if ".pt2kit-spool-" in os.readlink(p):
                    st = os.stat(p)
                    out.add((st.st_dev, st.st_ino))
            except OSError:
                pass
    except OSError:
        pass
    return out


def measure(script, cwd, env):
    # the last step's writes on disk first: each step pays for its own
    subprocess.run(["sync"], check=True)
    t0 = time.time()
    p = subprocess.Popen(["bash", "-c", "set -euo pipefail; " + script], cwd=cwd, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peaks, spools = {}, set()
    done = threading.Event()

    def sample():
        while not done.is_set():
            for pid in [p.pid] + children_of(p.pid):
                s = status(pid)
                if not s or s.get("Name") in ("bash", "cat"):
                    continue
                spools.update(spools_of(pid))
                name = f"{s['Name']}[{pid}]"
                peaks[name] = max(peaks.get(name, 0), kib(s.get("RssAnon")))
            time.sleep(0.005)

    th = threading.Thread(target=sample)
    th.start()
    _, err = p.communicate()
    secs = time.time() - t0
    done.set()
    th.join()
    if p.returncode != 0:
        raise RuntimeError(f"{script}: exit {p.returncode}: {err.strip()[-500:]}")
    # one entry per tool, in pipeline order (by pid)
    tools = []
    for name in sorted(peaks, key=lambda n: int(n.split("[")[1].rstrip("]"))):
        tools.append({"tool": name.split("[")[0], "peak_anon_mib": round(peaks[name] / 2**20, 1)})
    return secs, tools, len(spools)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--scratch", default="bench-scratch/pipe")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--json", default="bench/pipe.json")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    b = Path(a.bin).resolve()
    d = Path(a.scratch).resolve()
    d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PATH=f"{b}:{os.environ.get('PATH', '')}", TMPDIR=str(d))
    pt2, ir = d / "big.pt2", d / "big.ir"
    if not ir.exists():
        print(f"== making {a.layers} x Linear(8192, 8192)", file=sys.stderr, flush=True)
        make_model(pt2, a.layers)
        subprocess.run([str(b / "pt2ir"), str(pt2), "--weights", "inline", "-o", str(ir)], check=True)
        pt2.unlink()
    size = ir.stat().st_size
    measure(f"cat {ir} > /dev/null", d, env)
    cat_s, _, _ = measure(f"cat {ir} > /dev/null", d, env)
    steps = [
        ("ir-decompose < big.ir | ir2onnx --external-data", "ir-decompose < big.ir | ir2onnx --external-data -o a.onnx"),
        ("cat big.ir | ir-decompose | ir2onnx --external-data", "cat big.ir | ir-decompose | ir2onnx --external-data -o a.onnx"),
        ("cat big.ir | ir-decompose | ir-decompose | ir2onnx --external-data",
         "cat big.ir | ir-decompose | ir-decompose | ir2onnx --external-data -o a.onnx"),
        ("ir2onnx big.ir --external-data", "ir2onnx big.ir --external-data -o a.onnx"),
    ]
    # rounds interleaved, the median time of each step (the page cache and
    # the disk's write-back make single runs vary); memory and spools from
    # the round of that median
    runs = {label: [] for label, _ in steps}
    for k in range(a.rounds):
        for label, script in steps:
            print(f"== round {k + 1}: {label}", file=sys.stderr, flush=True)
            runs[label].append(measure(script, d, env))
            for f in ("a.onnx", "a.onnx.data"):
                (d / f).unlink(missing_ok=True)
    rows = []
    for label, _ in steps:
        secs, tools, spools = sorted(runs[label], key=lambda r: r[0])[len(runs[label]) // 2]
        rows.append({"step": label, "seconds": round(secs, 2), "gb_per_s": round(size / secs / 1e9, 2),
                     "spools": spools, "tools": tools,
                     "all_seconds": [round(r[0], 2) for r in runs[label]]})
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "rounds": a.rounds, "ir_bytes": size, "cat_seconds": round(cat_s, 2), "cat_gb_per_s": round(size / cat_s / 1e9, 2),
            "rev": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                  cwd=ROOT).stdout.strip()}
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(f"IR file {size / 1e9:.2f} GB; cat {cat_s:.2f} s ({size / cat_s / 1e9:.2f} GB/s)\n")
    print("| pipeline | s | GB/s | spools | peak RssAnon per tool (MiB) |")
    print("|---|---|---|---|---|")
    for r in rows:
        per = ", ".join(f"{t['tool']} {t['peak_anon_mib']}" for t in r["tools"])
        print(f"| `{r['step']}` | {r['seconds']} | {r['gb_per_s']} | {r['spools']} | {per} |")


if __name__ == "__main__":
    main()
