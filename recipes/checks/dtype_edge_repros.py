#!/usr/bin/env python3
"""Op-level reproducers of the wrong numbers the half-precision zoo
(`zoo_wide.py --dtype float16|bfloat16`) and the wide-dtype random programs
(`fuzz_graphs.py --wide-dtypes`) found: each a tiny nn.Module and its
inputs, run through torch eager and the three stages

  B  pt2ir | ir-run                     (as exported)
  C  pt2ir | ir-decompose | ir-run      (lowered)
  D  pt2ir | ir2onnx --opset 18 | ONNX Runtime (CPU)

Prints torch's output and each stage's, and whether the stage matches
torch (integers and bools exactly; floats with NaN where torch has NaN, the
same infinities, and within atol = rtol = 1e-4, float16 1e-3, bfloat16
1.6e-2). Each case says what it shows and which stages it was found wrong
in; a case marked `torch` is one where torch's own half-precision kernel
disagrees with its float32 kernel on the same values (IEEE arithmetic gives
torch's float32 answer, and so do the tools), or depends on the CPU torch
runs on: there the tools are not wrong by IEEE, but they are not torch's
number either.

  .venv/bin/python recipes/checks/dtype_edge_repros.py [--bin target/release] [--only NAME ...] [--list]

Needs torch, numpy, ml_dtypes, onnx and onnxruntime (one Python). Exits 1
when a stage gives a wrong number with exit 0 (a refusal is not counted).
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
if not __package__:  # run as a file, not with -m: the package `recipes` is at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

NAN, INF = float("nan"), float("inf")
TOL = {torch.float16: 1e-3, torch.bfloat16: 1.6e-2}
# half outputs: torch.testing.assert_close's (atol, rtol), widened by torch's own
# error budget as in zoo_wide.py: |ours - torch| <= 2 * budget + atol + rtol * |torch|,
# budget = max |torch_half - torch_float32| over the elements finite in both
HALF = {torch.float16: (1e-5, 1e-3), torch.bfloat16: (1e-5, 1.6e-2)}


class Fn(nn.Module):
    def __init__(self, f, **tensors):
        super().__init__()
        self.f = f
        for k, v in tensors.items():
            self.register_buffer(k, v)

    def forward(self, *a):
        return self.f(self, *a)


def t(vals, dtype=torch.float32):
    return torch.tensor(vals, dtype=dtype)


# name -> (what it shows, found wrong in, build() -> (module, inputs))
CASES = {}


def case(name, note, wrong):
    def reg(build):
        CASES[name] = (note, wrong, build)
        return build
    return reg


# ---- ir-run (B and C) ----------------------------------------------------

@case("max_pool_f64_nan", "ir-run's float64 max pooling drops a NaN that is not first in the window "
      "(float16/bfloat16/float32 propagate it as torch does); ONNX Runtime's MaxPool drops it too", "BCD")
def _():
    return Fn(lambda m, x: F.max_pool2d(x, (1, 3))), (t([[[[INF, -0.5, NAN], [2.0, NAN, 1.0]]]], torch.float64),)


@case("cast_nan_inf_to_int32", "float -> int32 of NaN, +-inf and out-of-range values: torch (x86) gives "
      "INT32_MIN (cvttss2si's 'integer indefinite'); ir-run saturates through int64, then wraps: "
      "0, -1, 0, 1410065408. ONNX Runtime gives torch's numbers", "BC")
def _():
    return Fn(lambda m, x: x.to(torch.int32)), (t([NAN, INF, -INF, 1e10, -3.0]),)


@case("cast_nan_inf_to_int64", "float -> int64 of NaN and +inf: torch INT64_MIN; ir-run 0 and INT64_MAX", "BC")
def _():
    return Fn(lambda m, x: x.to(torch.int64)), (t([NAN, INF, -INF, 3.5], torch.float64),)


@case("cast_nan_inf_to_uint8", "float16 -> uint8 of NaN, inf and 1e10 (inf in float16): torch 0 (through "
      "int32 INT32_MIN, truncated); ir-run 0 for NaN but 255 for inf; -3.0 wraps to 253 in both", "BC")
def _():
    return Fn(lambda m, x: x.to(torch.uint8)), (t([NAN, INF, -INF, -3.0, 300.0], torch.float16),)


@case("cast_nan_inf_to_int8", "bfloat16 -> int8 of NaN and inf: torch 0; ir-run 0 and -1", "BC")
def _():
    return Fn(lambda m, x: x.to(torch.int8)), (t([NAN, INF, -INF, 300.0, -3.0], torch.bfloat16),)


@case("lstm_f16_onednn", "torch's CPU LSTM in float16/bfloat16 runs through oneDNN where the CPU has it "
      "(AVX512-FP16/AMX here: torch.backends.mkldnn enabled), and rounds differently from torch's own "
      "op-by-op cell; ir-decompose's lowered LSTM (C) is bit-identical (all but 1-2 elements) to torch with "
      "mkldnn disabled, ir-run's own kernel (B) rounds like it, and both are ~2-4x torch's own "
      "float16-vs-float32 error away from torch's default, as torch without mkldnn is (zoo: lstm_l2_bi_bf, "
      "lstm_dyn_batch_bf in float16, lstm_dyn_batch in bfloat16)", "torch")
def _():
    # the zoo's lstm_l2_bi_bf (LSTM(8, 16, num_layers=2, bidirectional, batch_first), input [2, 5, 8]),
    # its h_n: 1 element of 128 just outside the bound (2 * budget + tol) in float16
    from recipes.fixtures import zoo_wide_models as Z
    model, args, _, _, _ = Z.build("lstm_l2_bi_bf")

    class HN(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, x):
            import torch.utils._pytree as pytree
            return pytree.tree_leaves(self.m(x))[1]
    return HN().eval().half(), (args[0].half(),)


# ---- torch's half kernels disagree with its float32 kernels ---------------

@case("conv_bf16_subnormal_times_inf", "bfloat16 conv: torch (oneDNN) treats a subnormal input as 0, so "
      "inf * 9.2e-41 is NaN; torch's float32/float16 conv and IEEE give inf, as the tools do", "torch")
def _():
    return Fn(lambda m, x: F.conv2d(x, m.w), w=t([[[[INF]]]], torch.bfloat16)), \
        (t([[[[9.183549615799121e-41, 1.0]]]], torch.bfloat16),)


@case("conv_f16_padding_times_inf", "float16 conv1d with zero padding and an infinite weight: torch's "
      "float16 kernel skips the padded taps (1.0); its float32 kernel and IEEE multiply them (0 * inf = NaN), "
      "as the tools do", "torch")
def _():
    return Fn(lambda m, x: F.conv1d(x, m.w, padding=1), w=t([[[INF, 1.0]]], torch.float16)), \
        (t([[[1.0, 2.0]]], torch.float16),)


@case("conv_transpose_bf16_inf_weight", "bfloat16 conv_transpose2d with a -inf weight: torch's bfloat16 "
      "kernel gives NaN at outputs no -inf product reaches; float32/float16 and the tools give 0.5", "torch")
def _():
    return Fn(lambda m, x: F.conv_transpose2d(x, m.w), w=t([[[[-INF, 0.5]]]], torch.bfloat16)), \
        (t([[[[2.0, 1.0]]]], torch.bfloat16),)


@case("layer_norm_half_inf_weight", "float16 layer_norm over a size-1 dim with weight -inf: torch's float16 "
      "kernel gives -inf/+inf (the sign of x); its float32 kernel and IEEE give 0 * -inf = NaN, as the "
      "tools do", "torch")
def _():
    return Fn(lambda m, x: F.layer_norm(x, (1,), m.w, m.b, 1e-3), w=t([-INF], torch.float16),
              b=t([-0.1875], torch.float16)), (t([[-1.25], [1.5]], torch.float16),)


# ---- ir2onnx + ONNX Runtime (D) -------------------------------------------

@case("max_pool_f32_nan_ort", "ONNX Runtime's MaxPool ignores a NaN unless it is last in the window "
      "(torch propagates it); its indices (max_pool1d return_indices) differ too", "D")
def _():
    return Fn(lambda m, x: F.max_pool1d(x, 2, stride=1)), (t([[[1.0, NAN, 3.0, 2.0]]]),)


@case("max_pool_indices_nan_ort", "max_pool1d(return_indices=True) over a NaN: ONNX Runtime's index "
      "points at the finite value", "D")
def _():
    return Fn(lambda m, x: F.max_pool1d(x, 2, stride=1, return_indices=True)[1]), (t([[[1.0, NAN, 3.0, 2.0]]]),)


@case("adaptive_max_pool_nan_ort", "adaptive_max_pool2d over a NaN (ONNX Runtime's MaxPool)", "D")
def _():
    return Fn(lambda m, x: F.adaptive_max_pool2d(x, (1, 1))), (t([[[[NAN, 1.0], [2.0, 0.5]]]]),)


@case("log_softmax_f64_nan_ort", "float64 log_softmax over a row holding NaN: ONNX Runtime's float64 "
      "LogSoftmax gives finite numbers (46.05 = -log(1e-20)) and -inf where torch gives NaN", "D")
def _():
    return Fn(lambda m, x: x.log_softmax(1)), (t([[1.0, NAN], [-INF, NAN]], torch.float64),)


@case("conv_f32_padding_times_inf_ort", "float32 conv2d with zero padding and an infinite weight: torch "
      "(and ir-run) multiply the padded taps (0 * inf = NaN); ONNX Runtime's Conv skips them", "D")
def _():
    return Fn(lambda m, x: F.conv2d(x, m.w, padding=1), w=t([[[[INF, 1.0], [1.0, 1.0]]]])), (torch.ones(1, 1, 1, 1),)


@case("atan2_inf_inf_ort", "atan2(+-inf, inf): torch +-pi/4; ir2onnx's lowering (Atan of y/x) gives NaN", "D")
def _():
    return Fn(lambda m, y, x: torch.atan2(y, x)), (t([INF, -INF, 1.0]), t([INF, INF, 0.0]))


@case("floor_divide_inf_ort", "floor division of +-inf, and of -1 by inf: torch NaN, NaN and -1 "
      "(div_floor_floating); ir2onnx's lowering (Floor of Div) gives inf, -inf and -0", "D")
def _():
    return Fn(lambda m, a, b: torch.div(a, b, rounding_mode="floor")), \
        (t([INF, -INF, -1.0, 3.0]), t([2.0, 2.0, INF, 2.0]))


@case("floor_divide_finite_ort", "floor division of ordinary floats: torch.floor_divide(1.0, 0.1) is 9.0 in torch "
      "(Python's //: (a - fmod(a, b)) / b, corrected), 10.0 through ir2onnx's Floor(Div) (1.0 / 0.1 rounds up to 10); "
      "no edge value needed", "D")
def _():
    return Fn(lambda m, a, b: torch.floor_divide(a, b)), (t([1.0, 0.3, -1.0, 7.0]), t([0.1, 0.1, 0.1, 0.7]))


@case("sign_nan_ort", "sign(NaN): torch 0 (as ir-run); ONNX Runtime's Sign gives NaN", "D")
def _():
    return Fn(lambda m, x: torch.sign(x)), (t([NAN, -0.0, -2.0, INF]),)


@case("remainder_large_and_inf_ort", "remainder(-2^61, 0.75) is 0.25 in torch (fmod, then the sign fix), "
      "0 through ir2onnx's lowering (a - floor(a/b)*b loses the quotient's low bits); remainder(2, inf) is 2 "
      "and remainder(-1.3, inf) inf in torch, NaN through ONNX", "D")
def _():
    return Fn(lambda m, a, b: torch.remainder(a, b)), (t([-2.0 ** 61, 1e10, 2.0, -1.3125]), t([0.75, 0.75, INF, INF]))


# ---- ir2onnx exits 0 with a file ONNX or ONNX Runtime rejects -------------

@case("f64_atan_erf_avgpool_ort", "float64 atan2 / erf / avg_pool: ir2onnx writes Atan, Erf, AveragePool in "
      "double, which ONNX Runtime's CPU provider does not implement (NOT_IMPLEMENTED at load)", "D-invalid")
def _():
    return Fn(lambda m, x: F.avg_pool2d(torch.erf(torch.atan2(x, x + 1)), 2)), \
        (t([[[[1.0, 2.0], [3.0, 4.0]]]], torch.float64),)


@case("int8_matmul_checker", "int8/uint8/int16 matmul and uint8 neg: ONNX's MatMul and Neg have no such "
      "types; onnx.checker rejects the file ir2onnx wrote", "D-invalid")
def _():
    return Fn(lambda m, x: x @ x), (t([[1, 2], [3, 4]], torch.int8),)


@case("bf16_expand_as_ort", "bfloat16 expand_as (swin_v2_* in the bfloat16 zoo): ONNX Runtime's CPU Expand "
      "has no bfloat16 kernel (NOT_IMPLEMENTED at load); likewise Tile from repeat (mha_bias_kv_mask, "
      "seq_ops_dyn)", "D-invalid")
def _():
    torch.manual_seed(0)
    return Fn(lambda m, a, b: a.expand_as(b) + 0), (torch.randn(1, 3, 1, dtype=torch.bfloat16),
                                                     torch.randn(2, 3, 4, dtype=torch.bfloat16))


# --------------------------------------------------------------------------


def as_numpy(x):
    x = x.detach().contiguous()
    if x.dtype == torch.bfloat16:
        import ml_dtypes
        return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return x.numpy()


def short(a, n=8):
    """An array's values, the first n when there are more."""
    a = np.asarray(a)
    if a.size <= n:
        return a.tolist()
    return f"{a.reshape(-1)[:n].tolist()} ... ({a.size} values, shape {list(a.shape)})"


def same(got, want, dtype, budget=None):
    got = np.asarray(got)
    if got.dtype.kind == "V":
        got = (got.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    if got.shape != want.shape:
        return False
    if want.dtype.kind in "biu":
        return np.array_equal(got, want)
    g, w = got.astype(np.float64), want.astype(np.float64)
    if budget is not None:
        atol, rtol = HALF[dtype]
        fin = np.isfinite(w)
        with np.errstate(invalid="ignore"):
            close = np.abs(g[fin] - w[fin]) <= 2 * budget + atol + rtol * np.abs(w[fin])
        nonfin = (np.isnan(g[~fin]) & np.isnan(w[~fin])) | (g[~fin] == w[~fin])
        return bool(close.all() and nonfin.all())
    tol = TOL.get(dtype, 1e-4)
    return bool(np.array_equal(np.isnan(g), np.isnan(w)) and np.allclose(g, w, atol=tol, rtol=tol, equal_nan=True))


def run_case(name, bin_dir):
    note, wrong, build = CASES[name]
    mod, inputs = build()
    mod.eval()
    with torch.no_grad():
        want_t = mod(*inputs)
    dtype = want_t.dtype
    want = as_numpy(want_t.float() if dtype == torch.bfloat16 else want_t)
    print(f"== {name} [{wrong}]: {note}")
    print(f"   torch:  {short(want)}")
    budget = None
    if dtype in HALF:
        import copy
        with torch.no_grad():
            ref = copy.deepcopy(mod).float()(*[x.float() if x.is_floating_point() else x for x in inputs])
        w64, r64 = want.astype(np.float64), ref.double().numpy()
        both = np.isfinite(w64) & np.isfinite(r64)
        budget = float(np.abs(w64[both] - r64[both]).max()) if both.any() else 0.0
        print(f"   torch in float32 on the same values: {short(ref.numpy())}; torch's budget {budget:.3g}")
    if name == "lstm_f16_onednn":
        with torch.no_grad(), torch.backends.mkldnn.flags(enabled=False):
            off = mod(*inputs)
        print(f"   torch with mkldnn disabled: {short(as_numpy(off))} "
              f"({int((off != want_t).sum())} of {off.numel()} elements differ from torch's default)")
    work = Path(tempfile.mkdtemp(prefix="edge-"))
    ep = torch.export.export(mod, inputs)
    torch.export.save(ep, str(work / "m.pt2"))
    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    feeds = {n: as_numpy(x) for n, x in zip(names, inputs)}
    np.savez(work / "in.npz", **feeds)
    b = Path(bin_dir)
    subprocess.run([b / "pt2ir", work / "m.pt2", "-o", work / "m.ir"], check=True)
    bad = 0
    for stage in "BCD":
        try:
            if stage in "BC":
                ir = work / "m.ir"
                if stage == "C":
                    subprocess.run([b / "ir-decompose", ir, "-q", "-o", work / "c.ir"], check=True, capture_output=True)
                    ir = work / "c.ir"
                subprocess.run([b / "ir-run", ir, "--inputs", work / "in.npz", "-o", work / "o.npz", "-q"], check=True,
                               capture_output=True)
                o = np.load(work / "o.npz")
                got = o[o.files[0]]
            else:
                from recipes.checks import check_random
                subprocess.run([b / "ir2onnx", work / "m.ir", "--opset", "18", "-o", work / "m.onnx"], check=True,
                               capture_output=True)
                got = np.asarray(check_random._onnx_outputs(work / "m.onnx", names, feeds)[0])
        except subprocess.CalledProcessError as e:
            print(f"   {stage}: refused: {(e.stderr or b'').decode().strip().splitlines()[:1]}")
            continue
        except Exception as e:  # noqa: BLE001 - onnx.checker / ONNX Runtime on ir2onnx's file
            print(f"   {stage}: ONNX rejected (exit 0 from ir2onnx): {str(e).splitlines()[0][:160]}")
            continue
        ok = same(got, want, dtype, budget)
        bad += not ok
        shown = got if got.dtype.kind != "V" else (got.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        err = ""
        if want.dtype.kind == "f" and np.asarray(shown).shape == want.shape:
            with np.errstate(invalid="ignore"):
                d = np.abs(np.asarray(shown, np.float64) - want.astype(np.float64))
            err = f"  (max abs diff {np.nanmax(d) if np.isfinite(d).any() else float('nan'):.3g})" if d.size > 8 else ""
        print(f"   {stage}: {'ok   ' if ok else 'WRONG'} {short(shown)}{err}")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(HERE.parents[1] / "target/release"))
    ap.add_argument("--only", nargs="+", choices=sorted(CASES))
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        for n, (note, wrong, _) in CASES.items():
            print(f"{n:34} [{wrong}] {note[:100]}")
        return 0
    wrong = 0
    for name in a.only or CASES:
        wrong += run_case(name, a.bin)
    print(f"{wrong} stage(s) gave a number other than torch's with exit 0")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
