#!/usr/bin/env python3
"""Benchmark: every tool on the huge archives of `make huge`, with memory.

    .venv-onnx/bin/python recipes/bench/bench_huge.py [--dir golden/huge] [--bin target/release]
        [--scratch bench-scratch/huge] [--only llama7b_cut4] [--json bench/huge.json]

For each archive NAME.pt2 of --dir (llama7b_cut4, llama7b; recipes/fixtures/huge.py):

1. `cat NAME.pt2 > /dev/null` (warm page cache: the second of two runs),
   the reference for throughput;
2. `pt2ir NAME.pt2 -o NAME.ir --weights inline` (an IR file);
3. `pt2ir NAME.pt2 | ir-decompose | ir2onnx --external-data -o NAME.onnx`
   (a pipe, weights by reference), and the same with `--weights inline`
   (every byte through both pipes);
4. `ir-decompose NAME.ir -o NAME.core.ir` and `ir2onnx NAME.ir
   --external-data -o NAME.file.onnx` (IR files, mapped);
5. `ir-run NAME.ir` on the token ids (weights mapped), checked against
   torch's logits where the recipe recorded them (the cut);
6. for the cut, ONNX Runtime on NAME.onnx, against the same logits.

Each command runs under bash; every process of it is sampled every 5 ms
from /proc for its resident memory (VmRSS, and VmHWM) and its anonymous
memory (RssAnon: not backed by a file; mapped weights are not in it). The
table gives wall time, throughput (archive bytes / wall time) as a ratio to
`cat`, and per tool the peak RSS and peak RssAnon. Writes --json and
prints the Markdown table. The page cache is warm throughout (the machine
has the memory for the cut; for the 7B model it may not, and says so by
its times).
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

if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

ROOT = Path(__file__).resolve().parents[2]


def status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("Name", "VmRSS", "VmHWM", "RssAnon"):
                    out[k] = v.strip()
    except OSError:
        return None
    return out


def children_of(root):
    parents = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    rest = f.read().rsplit(")", 1)[1].split()
                parents[int(d)] = int(rest[1])
            except (OSError, IndexError, ValueError):
                pass
    out, frontier = [], [root]
    while frontier:
        p = frontier.pop()
        for c, pp in parents.items():
            if pp == p and c not in out:
                out.append(c)
                frontier.append(c)
    return out


def kib(v):
    return int(v.split()[0]) * 1024 if v else 0


def measure(script, cwd, env=None):
    """(seconds, {process name: {"peak_rss", "peak_anon"}}); raises on failure."""
    t0 = time.time()
    p = subprocess.Popen(["bash", "-c", "set -euo pipefail; " + script], cwd=cwd, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peaks = {}
    done = threading.Event()

    def sample():
        while not done.is_set():
            for pid in [p.pid] + children_of(p.pid):
                s = status(pid)
                if not s or s.get("Name") in ("bash", "cat"):
                    continue
                name = s["Name"]
                e = peaks.setdefault(name, {"peak_rss": 0, "peak_anon": 0})
                e["peak_rss"] = max(e["peak_rss"], kib(s.get("VmHWM")), kib(s.get("VmRSS")))
                e["peak_anon"] = max(e["peak_anon"], kib(s.get("RssAnon")))
            time.sleep(0.005)

    th = threading.Thread(target=sample)
    th.start()
    _, err = p.communicate()
    secs = time.time() - t0
    done.set()
    th.join()
    if p.returncode != 0:
        raise RuntimeError(f"{script}: exit {p.returncode}: {err.strip()[-500:]}")
    return secs, peaks


def compare(got, want):
    import numpy as np
    got = got.astype(np.float64)
    want = want.astype(np.float64)
    return float(np.max(np.abs(got - want))), bool(np.allclose(got, want, atol=1e-2, rtol=1e-2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="golden/huge")
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--scratch", default="bench-scratch/huge")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--json", default="bench/huge.json")
    a = ap.parse_args()
    import numpy as np
    b = Path(a.bin).resolve()
    scratch = Path(a.scratch).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PATH=f"{b}:{os.environ.get('PATH', '')}", TMPDIR=str(scratch))
    results = []
    for pt2 in sorted(Path(a.dir).resolve().glob("*.pt2")):
        name = pt2.stem
        if a.only and name not in a.only:
            continue
        size = pt2.stat().st_size
        d = scratch
        ids = Path(a.dir).resolve() / f"{name}.inputs.npz"
        expected = Path(a.dir).resolve() / f"{name}.expected.npz"
        rows = []
        measure(f"cat {pt2} > /dev/null", d, env)
        cat_s, _ = measure(f"cat {pt2} > /dev/null", d, env)
        # (in an order that keeps at most about four copies on disk)
        steps = [
            ("pt2ir | ir-decompose | ir2onnx --external-data (by reference)",
             f"pt2ir {pt2} | ir-decompose | ir2onnx --external-data -o {name}.onnx"),
            ("pt2ir | ir-decompose | ir2onnx --external-data-in-archive (beside it)",
             f"pt2ir {pt2} | ir-decompose | ir2onnx --external-data-in-archive -o {pt2.parent}/{name}.inarchive.onnx"),
            ("pt2ir --weights inline | ir-decompose | ir2onnx --external-data",
             f"pt2ir {pt2} --weights inline | ir-decompose | ir2onnx --external-data -o {name}.inline.onnx"),
            ("pt2ir -o IR file (weights inline)", f"pt2ir {pt2} -o {name}.ir --weights inline"),
            ("ir-decompose IR file", f"ir-decompose {name}.ir -o {name}.core.ir"),
            ("ir2onnx IR file --external-data", f"ir2onnx {name}.ir --external-data -o {name}.file.onnx"),
            ("ir-run IR file (weights mapped)", f"ir-run {name}.ir --inputs {ids} -o {name}.out.npz"),
        ]
        for label, script in steps:
            print(f"== {name}: {label}", file=sys.stderr, flush=True)
            secs, peaks = measure(script, d, env)
            row = {"step": label, "seconds": round(secs, 2), "gb_per_s": round(size / secs / 1e9, 3),
                   "over_cat": round(secs / cat_s, 2), "processes": peaks}
            if label.startswith("ir-run") and expected.exists():
                got = np.load(d / f"{name}.out.npz")
                want = np.load(expected)["out_0"]
                row["max_abs_diff"], row["matches"] = compare(got[got.files[0]], want)
            rows.append(row)
            # disk: only NAME.ir (read by later steps) and NAME.onnx (ONNX
            # Runtime's) are kept until the end
            drop = [f"{name}.inline.onnx", f"{name}.inline.onnx.data", f"{name}.file.onnx",
                    f"{name}.file.onnx.data", f"{name}.core.ir"]
            if not expected.exists():
                drop += [f"{name}.onnx", f"{name}.onnx.data"]
            for f in drop:
                (d / f).unlink(missing_ok=True)
        ort = None
        inarchive = pt2.parent / f"{name}.inarchive.onnx"
        if expected.exists():
            print(f"== {name}: ONNX Runtime", file=sys.stderr, flush=True)
            import onnx
            from recipes.run import ort_run
            want = np.load(expected)["out_0"]
            ort = {}
            for label, model in (("copied", d / f"{name}.onnx"), ("in_archive", inarchive)):
                onnx.checker.check_model(str(model), full_check=True)
                t0 = time.time()
                names, arrays = ort_run.run(model, dict(np.load(ids)))
                diff, ok = compare(np.asarray(arrays[0]), want)
                ort[label] = {"seconds": round(time.time() - t0, 1), "max_abs_diff": diff, "matches": ok}
        inarchive.unlink(missing_ok=True)
        results.append({"model": name, "archive_bytes": size, "cat_seconds": round(cat_s, 3),
                        "steps": rows, "onnxruntime": ort})
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        meta = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "rev": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                      cwd=ROOT).stdout.strip()}
        Path(a.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
        for f in d.glob(f"{name}.*"):
            f.unlink()
    print(table(results))
    return 0


def table(results):
    mib = lambda v: f"{v / 2**20:.0f}"  # noqa: E731
    lines = []
    for r in results:
        lines += [f"**{r['model']}** ({r['archive_bytes'] / 1e9:.2f} GB; `cat` {r['cat_seconds']:.2f} s)", "",
                  "| command | wall s | GB/s | / cat | peak RSS MiB (per process) | peak RssAnon MiB (per process) |",
                  "|---|---:|---:|---:|---|---|"]
        for s in r["steps"]:
            procs = s["processes"]
            rss = ", ".join(f"{k} {mib(v['peak_rss'])}" for k, v in procs.items())
            anon = ", ".join(f"{k} {mib(v['peak_anon'])}" for k, v in procs.items())
            check = ""
            if "matches" in s:
                check = f" (logits {'match' if s['matches'] else 'DIFFER'}, max abs diff {s['max_abs_diff']:.2e})"
            lines.append(f"| `{s['step']}`{check} | {s['seconds']:.2f} | {s['gb_per_s']:.2f} | "
                         f"{s['over_cat']:.1f}x | {rss} | {anon} |")
        if r["onnxruntime"]:
            for label, o in r["onnxruntime"].items():
                what = {"copied": "with its external data copied", "in_archive": "with external data in the archive"}[label]
                lines.append(f"\nONNX's full checker passes the ONNX {what}, and ONNX Runtime's logits "
                             f"{'match' if o['matches'] else 'DIFFER FROM'} torch's (max abs diff {o['max_abs_diff']:.2e}).")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
