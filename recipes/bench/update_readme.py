"""Regenerates the generated sections of README.md and docs/*.md from
committed results (the files each section lives in: TARGETS below):

- bench-compare-summary (README.md): bench/compare_avx512.json against each row's best anchor
- conformance: golden/ops/report.md (written by lib/tests/conformance.rs)
- dtype-conformance: golden/dtypes/report.md (written by lib/tests/dtypes.rs)
- decompose-coverage: golden/decompose/coverage.md (lib/tests/decompose.rs)
- bench-pt2ir: bench/pt2ir.json (recipes/bench/bench_pt2ir.py)
- bench-onnx: bench/onnx.json (recipes/bench/bench_onnx.py)
- bench-run:   bench/run.json   (recipes/bench/bench_run.py)
- bench-compare: bench/compare.json (recipes/bench/bench_compare.py, its default: AVX2, two threads)
- bench-compare-avx512: bench/compare_avx512.json (the same recipe's run on a CPU with AVX-512)
- bench-compare-1t, bench-compare-1t-b8: bench/compare_1t.json, bench/compare_1t_b8.json
  (the same recipe on one thread, at batch 1 and at batch 8)
- bench-ort-exports: bench/ort_exports.json (ONNX Runtime on ir2onnx's ONNX and on torch's own export)
- bench-int8: bench/int8.json (recipes/bench/bench_int8.py: PT2E int8 against ONNX Runtime's int8)
- bench-bf16: bench/bf16.json (recipes/bench/bench_bf16.py: --precision bf16 against OpenVINO's bf16)
- bench-convs: bench/convs.json (recipes/bench/bench_convs.py)
- bench-decompose: bench/decompose.json (recipes/bench/bench_decompose.py)
- bench-huge: bench/huge.json (recipes/bench/bench_huge.py)
- cuda-models: bench/cuda_h200_models.json (recipes/cuda/cuda_models.py, on a GPU)

Each section sits between `<!-- BEGIN name -->` and `<!-- END name -->`.

    python3 recipes/bench/update_readme.py [--check]

--check exits 1 when a file is out of date (CI-friendly).
"""
import importlib
import json
import os
import re
import sys
from pathlib import Path

if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def conformance():
    path = "golden/ops/report.md"
    if not os.path.exists(path):
        return None
    lines = open(path).read().splitlines()
    summary = [l for l in lines[1:6] if l.startswith(("core", "cases"))]
    table_start = next(i for i, l in enumerate(lines) if l.startswith("| op |"))
    table = []
    for l in lines[table_start:]:
        if l.startswith("## "):
            break
        table.append(l)
    return "\n".join(
        ["Generated from `golden/ops/report.md` (the conformance test's golden report):", ""]
        + [f"- {s}" for s in summary]
        + ["", "<details><summary>Per-op results</summary>", ""]
        + [l for l in table if l.strip()]
        + ["", "</details>"]
    )


def dtype_conformance():
    path = "golden/dtypes/report.md"
    if not os.path.exists(path):
        return None
    lines = open(path).read().splitlines()
    summary = [l for l in lines[1:4] if l.startswith("cases")]
    legend = [l for l in lines if l.startswith("`ok`")]
    table_start = next(i for i, l in enumerate(lines) if l.startswith("| op |"))
    table, reasons = [], []
    for l in lines[table_start:]:
        if l.startswith("## "):
            break
        table.append(l)
    at = next((i for i, l in enumerate(lines) if l.startswith("## Refusals")), None)
    if at is not None:
        reasons = [l for l in lines[at + 1:] if l.strip()]
    return "\n".join(
        ["Generated from `golden/dtypes/report.md` (the dtype conformance test's golden report):", ""]
        + [f"- {s}" for s in summary] + [""] + legend
        + ["", "<details><summary>Per op and dtype</summary>", ""]
        + [l for l in table if l.strip()]
        + ["", "</details>", "", "<details><summary>Refusals by first reason</summary>", ""]
        + reasons
        + ["", "</details>"]
    )


def bench_pt2ir():
    path = "bench/pt2ir.json"
    if not os.path.exists(path):
        return None
    rows = json.load(open(path))
    out = [
        "| archive | size MiB | `cat > /dev/null` s | `pt2ir > /dev/null` s | ratio | pt2ir peak RSS MiB |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {os.path.basename(r['archive'])} | {r['bytes']/2**20:.1f} | {r['cat_s']:.4f} | "
            f"{r['pt2ir_s']:.4f} | {r['ratio']:.2f}x | {r['pt2ir_peak_rss']/2**20:.1f} |"
        )
    return "\n".join(out)


def bench_run():
    path = "bench/run.json"
    if not os.path.exists(path):
        return None
    rows = json.load(open(path))
    out = [
        "| model | torch eager ms | ir-run ms | ir-run / torch | ir-run after ir-decompose ms | / torch |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        core = (f"{r['ir_run_core_ms']:.3f} | {r['ratio_core']:.2f}x" if "ir_run_core_ms" in r else "- | -")
        out.append(f"| {r['model']} | {r['torch_eager_ms']:.3f} | {r['ir_run_ms']:.3f} | {r['ratio']:.2f}x | {core} |")
    t = rows[0]["threads"] if rows else "?"
    n = rows[0]["runs"] if rows else "?"
    out.append("")
    k = rows[0].get("rounds", 1) if rows else "?"
    out.append(f"Batch 1, {t} threads for both; each figure is the median over {k} interleaved rounds "
               f"of the median of {n} runs after warm-up.")
    return "\n".join(out)


def bench_onnx():
    path = "bench/onnx.json"
    if not os.path.exists(path):
        return None
    rows = json.load(open(path))
    out = [
        "| model | `pt2ir \\| ir2onnx` s | `torch.onnx.export(dynamo=True)` s | speedup | peak RSS MiB (ours / torch) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['model']} | {r['pt2kit_s']:.3f} | {r['torch_s']:.3f} | {r['speedup']:.0f}x | "
            f"{r['pt2kit_peak_rss']/2**20:.0f} / {r['torch_peak_rss']/2**20:.0f} |"
        )
    out.append("")
    out.append(f"Median of {rows[0]['runs'] if rows else '?'} runs; torch is timed around the export call only (its import and load excluded), ours is the whole pipeline.")
    return "\n".join(out)


def decompose_coverage():
    path = "golden/decompose/coverage.md"
    if not os.path.exists(path):
        return None
    lines = open(path).read().splitlines()
    reasons = [ln[:-1] for ln in lines if ln.endswith(":") and not ln.startswith("#")]
    return (lines[2] + "\n\nEach op refused is listed with its reason in `golden/decompose/coverage.md` "
            "(written by `lib/tests/decompose.rs` from `lib/data/refusals.txt`); the reasons:\n\n"
            + "\n".join(f"- {r}" for r in reasons))


def bench_decompose():
    path = "bench/decompose.json"
    if not os.path.exists(path):
        return None
    rows = json.load(open(path))
    out = [
        "| model | `run_decompositions()` s | `ir-decompose --passes dce` s | fraction | `ir-decompose` (all passes) s | fraction |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['model']} | {r['torch_s']:.3f} | {r['pt2kit_dce_s']:.3f} | {100*r['fraction_dce']:.1f}% | "
            f"{r['pt2kit_all_passes_s']:.3f} | {100*r['fraction_all_passes']:.1f}% |"
        )
    out.append("")
    out.append(f"Median of {rows[0]['runs'] if rows else '?'} runs; torch is timed around the call only (import and load excluded); ours is the whole process, IR file in, IR file out.")
    return "\n".join(out)


def recipe_table(path, module, render):
    """A recipe's own table (one renderer) from its committed JSON."""
    if not os.path.exists(path):
        return None
    return render(importlib.import_module(module), json.load(open(path)))


def bench_compare():
    return recipe_table("bench/compare.json", "recipes.bench.bench_compare",
                        lambda m, data: m.table(data["meta"], data["results"]))


def bench_compare_avx512():
    return recipe_table("bench/compare_avx512.json", "recipes.bench.bench_compare",
                        lambda m, data: m.table(data["meta"], data["results"]))


def bench_ort_exports():
    return recipe_table("bench/ort_exports.json", "recipes.bench.bench_ort_exports",
                        lambda m, data: m.table(data["meta"], data["results"]))


def bench_int8():
    return recipe_table("bench/int8.json", "recipes.bench.bench_int8",
                        lambda m, data: m.table(data["meta"], data["results"]))


def bench_bf16():
    return recipe_table("bench/bf16.json", "recipes.bench.bench_bf16",
                        lambda m, data: m.table(data["meta"], data["results"]))


def bench_huge():
    def render(m, data):
        meta = data["meta"]
        return f"{meta['date']}, {meta['machine']}, pt2kit {meta['rev']}.\n\n" + m.table(data["results"])
    return recipe_table("bench/huge.json", "recipes.bench.bench_huge", render)


def bench_compare_1t():
    return recipe_table("bench/compare_1t.json", "recipes.bench.bench_compare",
                        lambda m, data: m.table(data["meta"], data["results"]))


def bench_compare_1t_b8():
    return recipe_table("bench/compare_1t_b8.json", "recipes.bench.bench_compare",
                        lambda m, data: m.table(data["meta"], data["results"]))


def bench_compare_summary():
    """The README's one table: the AVX-512 run, ir-run against each row's best anchor."""
    path = "bench/compare_avx512.json"
    return recipe_table(path, "bench_compare", lambda m, data: m.summary(data["meta"], data["results"], path))


def bench_convs():
    path = "bench/convs.json"
    if not os.path.exists(path):
        return None
    data = json.load(open(path))
    meta = data["meta"]
    out = [
        f"pt2kit {meta['pt2kit']}, {meta['machine']}, {meta['threads']} threads, batch {meta.get('batch', 1)}; medians of "
        f"{meta['rounds']} interleaved rounds of {meta['iters']} runs.",
        "",
        "| layer | GFLOP | ir-run ms | ONNX Runtime ms | ir-run / ORT |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in data["results"]:
        out.append(f"| {r['layer']} | {r['gflop']:.3f} | {r['ir_run_ms']:.3f} | {r['ort_ms']:.3f} | "
                   f"{r['ir_run_over_ort']:.2f}x |")
    return "\n".join(out)


def cuda_models():
    path = "bench/cuda_h200_models.json"
    if not os.path.exists(path):
        return None
    data = json.load(open(path))
    out = [
        f"{data['gpu']}, torch {data['torch']}, batch 1 (`{path}`).",
        "",
        "| model | ir-run cuda ms | torch cuda ms | ir-run / torch | agrees with torch (1e-3) | host copies a run |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for r in data["rows"]:
        copies = r["host_copies"].rsplit(":", 1)[-1].strip()
        out.append(f"| {r['model']} | {r['ir_run_cuda_ms']:.2f} | {r['torch_cuda_ms']:.2f} | {r['ratio']:.2f}x | "
                   f"{'yes' if r['agrees_with_torch'] else 'no'} | {copies} |")
    return "\n".join(out)


SECTIONS = {"bench-huge": bench_huge, "bench-compare": bench_compare, "bench-compare-avx512": bench_compare_avx512,
            "bench-compare-1t": bench_compare_1t, "bench-compare-1t-b8": bench_compare_1t_b8,
            "bench-compare-summary": bench_compare_summary, "bench-convs": bench_convs, "cuda-models": cuda_models,
            "bench-ort-exports": bench_ort_exports, "bench-int8": bench_int8, "bench-bf16": bench_bf16,
            "decompose-coverage": decompose_coverage,
            "bench-decompose": bench_decompose, "bench-onnx": bench_onnx, "conformance": conformance,
            "dtype-conformance": dtype_conformance,
            "bench-pt2ir": bench_pt2ir, "bench-run": bench_run}

# Which file holds which sections.
TARGETS = {
    "README.md": ["bench-compare-summary"],
    "docs/performance.md": ["bench-compare-avx512", "bench-compare", "bench-compare-1t", "bench-compare-1t-b8",
                            "bench-ort-exports", "bench-int8", "bench-bf16", "bench-convs", "bench-pt2ir", "bench-onnx", "bench-run",
                            "bench-decompose"],
    "docs/big-models.md": ["bench-huge"],
    "docs/coverage.md": ["conformance", "dtype-conformance", "decompose-coverage"],
    "docs/cuda.md": ["cuda-models"],
}

stale = []
for path, names in TARGETS.items():
    text = open(path).read()
    new = text
    for name in names:
        body = SECTIONS[name]()
        if body is None:
            continue
        pattern = re.compile(rf"(<!-- BEGIN {name} -->\n)(?:.*?\n)?(<!-- END {name} -->)", re.S)
        if not pattern.search(new):
            sys.exit(f"{path} has no <!-- BEGIN {name} --> section")
        new = pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), new)
    if new != text:
        stale.append(path)
        if "--check" not in sys.argv:
            open(path, "w").write(new)
if "--check" in sys.argv:
    sys.exit(f"out of date: {', '.join(stale)}: run python3 recipes/bench/update_readme.py" if stale else 0)
print(f"updated: {', '.join(stale)}" if stale else "up to date")
