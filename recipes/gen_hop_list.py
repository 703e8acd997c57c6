"""Writes lib/data/higher_order_ops.txt: every higher-order op torch
registers (`torch._ops._higher_order_ops`, after importing every module of
`torch._higher_order_ops`), one a line, sorted: its name and whether
`torch.export` writes it into a saved program ("export" or "no").

Which ones export writes is not a property torch exposes; it is the table
below, checked where it can be: the ops marked "export" that have a small
case here are exported and saved, and must appear in the saved graph. A
higher-order op that torch registers and the table does not classify fails
the recipe (a new torch: classify it, then give it an answer in
lib/src/decompose/hops.rs; lib/tests/hops.rs holds every name to one).

    python recipes/gen_hop_list.py [--out lib/data/higher_order_ops.txt]
"""
import argparse
import importlib
import pkgutil
import sys

import torch
import torch._higher_order_ops as hops
import torch.nn as nn

# What torch.export (export, then save) writes.
EXPORT = {
    "cond", "while_loop", "map_impl", "scan", "associative_scan",
    "wrap_with_set_grad_enabled", "wrap_with_autocast", "hints_wrapper", "print", "out_dtype",
    "with_effects", "call_torchbind", "auto_functionalized", "auto_functionalized_v2",
    "triton_kernel_wrapper_functional", "flex_attention",
}
# Registered, never in a saved ExportedProgram (compile-, training- or
# runtime-internal; torch.export inlines or removes them).
NOT_EXPORT = {
    "_export_tracepoint", "aoti_call_delegate", "autograd_function_apply", "custom_function_call",
    "dynamo_bypassing_wrapper", "executorch_call_delegate", "flat_apply", "flex_attention_backward",
    "flex_gemm", "foreach_map", "graphsafe_run_with_rng_state", "inductor_compiled_code",
    "inline_asm_elementwise", "invoke_leaf_function", "invoke_quant", "invoke_quant_packed",
    # torch 2.15's export inlines torch.compiler.nested_compile_region (checked below)
    "invoke_subgraph",
    "local_map_hop", "register_hook", "run_and_save_rng_state", "run_const_graph", "run_dtensor_rng_op",
    "run_with_rng_state", "strict_mode", "switch", "tag_activation_checkpoint",
    "triton_kernel_wrapper_mutation", "while_loop_stack_output", "wrap", "wrap_activation_checkpoint",
}


def registered():
    for m in pkgutil.iter_modules(hops.__path__):
        try:
            importlib.import_module(f"torch._higher_order_ops.{m.name}")
        except Exception as e:  # a module that needs an optional dependency
            print(f"  (skipped torch._higher_order_ops.{m.name}: {e})", file=sys.stderr)
    return sorted(torch._ops._higher_order_ops)


def saved_hops(model, args):
    import io
    ep = torch.export.export(model, args)
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    buf.seek(0)
    ep = torch.export.load(buf)
    found = set()
    for mod in ep.graph_module.modules():
        for n in getattr(mod, "graph", torch.fx.Graph()).nodes:
            if n.op == "call_function" and isinstance(n.target, torch._ops.HigherOrderOperator):
                found.add(n.target.name())
    return found


def checks():
    """Small cases: (higher-order op, whether export must write it, model, args)."""
    from torch._higher_order_ops.associative_scan import associative_scan

    class Autocast(nn.Module):
        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return torch.mm(x, x)

    class Grad(nn.Module):
        def forward(self, x):
            with torch.no_grad():
                return x * 2

    class Assoc(nn.Module):
        def forward(self, x):
            return associative_scan(lambda a, b: a + b, x, dim=0)

    @torch.compiler.nested_compile_region
    def region(x):
        return torch.sin(x) + 1

    class Region(nn.Module):
        def forward(self, x):
            return region(region(x))

    x = torch.randn(3, 3)
    return [("wrap_with_autocast", True, Autocast(), (x,)), ("wrap_with_set_grad_enabled", True, Grad(), (x,)),
            ("associative_scan", True, Assoc(), (x,)), ("invoke_subgraph", False, Region(), (x,))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="lib/data/higher_order_ops.txt")
    a = ap.parse_args()
    names = registered()
    unknown = [n for n in names if n not in EXPORT and n not in NOT_EXPORT]
    if unknown:
        sys.exit(f"higher-order ops this recipe does not classify: {unknown}")
    for name, written, model, args in checks():
        got = name in saved_hops(model, args)
        if got != written:
            sys.exit(f"{name}: export {'wrote' if got else 'did not write'} it; the table says otherwise")
    with open(a.out, "w") as f:
        f.write(f"# higher-order ops of torch {torch.__version__.split('+')[0]} (recipes/gen_hop_list.py):\n")
        f.write("# name, and whether torch.export writes it into a saved program (export / no).\n")
        f.write("# Each has an answer in lib/src/decompose/hops.rs (lib/tests/hops.rs).\n")
        for n in names:
            f.write(f"{n} {'export' if n in EXPORT else 'no'}\n")
    print(f"{len(names)} higher-order ops -> {a.out}")


if __name__ == "__main__":
    main()
