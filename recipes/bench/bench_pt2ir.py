"""Benchmark: pt2ir on an archive against `cat archive > /dev/null`, in the
same run, warm page cache, median of N runs; peak RSS from /usr/bin/time.

    python3 recipes/bench/bench_pt2ir.py [--bin target/release] [--runs 7] [ARCHIVE ...]

Defaults to golden/big/resnet50.pt2 (make -C recipes big). Prints a Markdown
table and writes bench/pt2ir.json. No torch needed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("archives", nargs="*", default=["golden/big/resnet50.pt2"])
ap.add_argument("--bin", default="target/release")
ap.add_argument("--runs", type=int, default=7)
ap.add_argument("--json", default="bench/pt2ir.json")
args = ap.parse_args()


def timed(cmd):
    """(wall seconds, peak RSS bytes) of `cmd > /dev/null`."""
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", "sh", "-c", cmd + " > /dev/null"],
        stderr=subprocess.PIPE, text=True, check=True,
    )
    wall, rss_kb = out.stderr.strip().splitlines()[-1].split()
    return float(wall), int(rss_kb) * 1024


def precise(cmd):
    import time
    t = time.perf_counter()
    subprocess.run(["sh", "-c", cmd + " > /dev/null"], check=True)
    return time.perf_counter() - t


rows = []
pt2ir = os.path.join(args.bin, "pt2ir")
for archive in args.archives:
    if not os.path.exists(archive):
        sys.exit(f"{archive} is missing: run `make -C recipes big` first")
    size = os.path.getsize(archive)
    cat_cmd = f"cat '{archive}'"
    ir_cmd = f"'{pt2ir}' '{archive}'"
    precise(cat_cmd), precise(ir_cmd)  # warm the page cache
    cat_t, ir_t = [], []
    for _ in range(args.runs):  # interleaved, so drift hits both alike
        cat_t.append(precise(cat_cmd))
        ir_t.append(precise(ir_cmd))
    _, cat_rss = timed(cat_cmd)
    _, ir_rss = timed(ir_cmd)
    row = {
        "archive": archive, "bytes": size, "runs": args.runs,
        "cat_s": statistics.median(cat_t), "pt2ir_s": statistics.median(ir_t),
        "pt2ir_peak_rss": ir_rss, "cat_peak_rss": cat_rss,
    }
    row["ratio"] = row["pt2ir_s"] / row["cat_s"]
    row["rss_over_archive_mib"] = (ir_rss - size) / 2**20
    rows.append(row)

os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
with open(args.json, "w") as f:
    json.dump(rows, f, indent=1)
print("| archive | size MiB | cat s | pt2ir s | ratio | pt2ir peak RSS MiB | RSS - archive MiB |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['archive']} | {r['bytes']/2**20:.1f} | {r['cat_s']:.4f} | {r['pt2ir_s']:.4f} | "
          f"{r['ratio']:.2f}x | {r['pt2ir_peak_rss']/2**20:.1f} | {r['rss_over_archive_mib']:+.1f} |")
