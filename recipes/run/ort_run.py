#!/usr/bin/env python3
"""Runs an ONNX model in ONNX Runtime (CPU) and writes every graph output
to an .npz, in the model's output order, under its ONNX name.

With a model from `ir2onnx --intermediates`, that is every tensor a
top-level node computes, named after its IR value and in node order, so
that `ir-diff --first` against `ir-run --intermediates` names the first
node where ir2onnx + ONNX Runtime and ir-run part:

  ir2onnx m.ir --intermediates -o m.onnx
  python recipes/run/ort_run.py m.onnx --inputs in.npz -o ort.npz
  ir-run m.ir --inputs in.npz --intermediates run.npz
  ir-diff run.npz ort.npz --first

bfloat16 outputs (which onnxruntime's Python API cannot return) are read
through a Cast to float32; ir-diff compares them by value. Needs numpy,
onnx and onnxruntime (`.venv-onnx`, made by `make test`).
"""

import argparse
import sys

import numpy as np


def float32_inputs(model):
    """onnxruntime's Python API takes no bfloat16 arrays: each bfloat16
    input of `model` becomes a float32 one cast to bfloat16 inside (exact:
    bfloat16 values are float32 values). Returns whether any changed."""
    import onnx

    changed = False
    for i in model.graph.input:
        if i.type.tensor_type.elem_type != onnx.TensorProto.BFLOAT16:
            continue
        inner = i.name + ".bfloat16"
        for n in model.graph.node:
            for k, x in enumerate(n.input):
                if x == i.name:
                    n.input[k] = inner
        model.graph.node.insert(0, onnx.helper.make_node(
            "Cast", [i.name], [inner], to=onnx.TensorProto.BFLOAT16))
        i.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        changed = True
    return changed


def feedable(a):
    """An array numpy read from an npz, as onnxruntime takes it: bfloat16
    (ml_dtypes' '<V2') as the float32 values it holds ([`float32_inputs`])."""
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        # np.asarray: a 0-d array stays an array (the shift makes a numpy scalar of it)
        return np.asarray((a.view(np.uint16).astype(np.uint32) << 16)).view(np.float32)
    return a


# ONNX Runtime 1.32 at opset 21: its QDQ propagation sets output_dtype
# INT8 on the QuantizeLinear it inserts after an int8 DequantizeLinear
# feeding a non-quantized op (microsoft/onnxruntime#28144), and its
# S8-to-U8 rewrite then makes that node's zero point uint8: the session
# fails to load ("output_dtype INT8 does not match y_zero_point type
# UINT8"). The graph is valid and loads with every other optimisation.
ORT_QDQ_BUG = "does not match y_zero_point type UINT8"
# Callers that print a row can say so when a session needed the retry.
retried = []


def exact_int8_kernels():
    """Whether ONNX Runtime's fused int8 kernels (QLinearConv, QGemm,
    MatMulInteger: what its extended optimisations make of a QDQ graph)
    sum exactly on this CPU: with AVX-512 VNNI or AVX-VNNI they do; on
    AVX2 alone they add u8 x s8 pairs in saturating 16-bit lanes
    (`vpmaddubsw`), and a weight over the full int8 range (PT2E's X86
    quantizer) gives other integers than torch's."""
    try:
        flags = next((line for line in open("/proc/cpuinfo") if line.startswith("flags")), "").split()
    except OSError:
        return True
    return "avx512_vnni" in flags or "avx_vnni" in flags


def session(model, opts):
    """An ONNX Runtime CPU session for `model` (a path or serialized
    bytes), retried without QDQ propagation on ORT_QDQ_BUG only
    (recorded in `retried`)."""
    import onnxruntime as ort

    try:
        return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own Fail type
        if ORT_QDQ_BUG not in str(e):
            raise
    retried.append(model if isinstance(model, str) else "<bytes>")
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"],
                                disabled_optimizers=["QDQPropagationTransformer"])


def is_int8(model):
    """Whether an ONNX model quantizes (QDQ nodes, as ir2onnx writes PT2E
    int8 graphs)."""
    return any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in model.graph.node)


def exact_int8(opts, model):
    """For the checks against torch: an int8 model on a CPU whose fused
    int8 kernels saturate ([`exact_int8_kernels`]) runs its QDQ nodes as
    written (ORT_ENABLE_BASIC), the arithmetic torch's reference defines.
    True when it did so."""
    import onnxruntime as ort

    if is_int8(model) and not exact_int8_kernels():
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        return True
    return False


def run(model_path, inputs, threads=None, as_torch=False):
    """(output names, arrays) for every graph output of the model
    (`as_torch`: int8 arithmetic as torch's, [`exact_int8`])."""
    import onnxruntime as ort

    import onnx

    model = onnx.load(str(model_path))
    float32_inputs(model)
    names = [o.name for o in model.graph.output]
    read = list(names)
    for i, o in enumerate(model.graph.output):
        if o.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
            model.graph.node.append(onnx.helper.make_node("Cast", [o.name], [o.name + ".float32"],
                                                          to=onnx.TensorProto.FLOAT))
            model.graph.output.append(onnx.helper.make_tensor_value_info(
                o.name + ".float32", onnx.TensorProto.FLOAT, None))
            read[i] = o.name + ".float32"
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if threads:
        opts.intra_op_num_threads = threads
    if as_torch:
        exact_int8(opts, model)
    sess = session(model.SerializeToString(), opts)
    feed = {i.name: feedable(inputs[i.name]) for i in sess.get_inputs()}
    return names, sess.run(read, feed)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="the .onnx file")
    ap.add_argument("--inputs", required=True, help="an .npz of the model's inputs, by name")
    ap.add_argument("-o", "--output", required=True, help="the .npz to write")
    ap.add_argument("--threads", type=int, help="ONNX Runtime's intra-op threads")
    args = ap.parse_args()
    names, arrays = run(args.model, dict(np.load(args.inputs)), args.threads)
    with open(args.output, "wb") as f:
        np.savez(f, **dict(zip(names, arrays)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
