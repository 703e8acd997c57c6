//! What becomes of each higher-order op (`torch.ops.higher_order.*`).
//!
//! torch registers 46 of them (torch 2.15; `lib/data/higher_order_ops.txt`,
//! written by `recipes/fixtures/gen_hop_list.py`, says which `torch.export` writes).
//! Every one has an answer here, held by `lib/tests/hops.rs`:
//!
//! - a row of the executor and of the ONNX writer: `cond`, `while_loop`,
//!   `map_impl`, `scan`, `wrap_with_set_grad_enabled` (and ir-decompose
//!   keeps the control-flow ones, lowering their bodies);
//! - a decomposition rule (`rules/control.rs`), which every tool applies:
//!   `wrap_with_autocast` (inlined with torch's CPU cast policy,
//!   [`super::autocast`]), `wrap_with_set_grad_enabled`, `invoke_subgraph`
//!   and `hints_wrapper` (inlined), `associative_scan` (a `scan`),
//!   `out_dtype` (casts around the op), `print` (dropped);
//! - a refusal, with its reason, in [`REFUSED`]: the back ends name it
//!   when they meet the op (`ir-decompose` keeps it: it is not `aten`).
//!
//! Not a higher-order op but written by the same tracing: the
//! `torch._functorch.predispatch` calls of a traced `vmap`
//! (`associative_scan`'s generic combine mode) are unrolled by
//! [`super::vmap`].

use crate::ir::{Target, TargetKind};

/// Higher-order ops no tool here runs, with the reason the back ends give.
pub const REFUSED: &[(&str, &str)] = &[
    (
        "with_effects",
        "an op with side effects threaded through an effect token (a torchbind method or an effectful custom op): no back end here orders effects or holds script objects",
    ),
    (
        "call_torchbind",
        "a method of a TorchScript object (torchbind): no back end here holds script objects",
    ),
    (
        "auto_functionalized",
        "a custom op that mutates its inputs, made functional: the toolkit has no kernel for custom ops",
    ),
    (
        "auto_functionalized_v2",
        "a custom op that mutates its inputs, made functional: the toolkit has no kernel for custom ops",
    ),
    (
        "triton_kernel_wrapper_functional",
        "a user-written Triton kernel: it needs Triton's compiler and a GPU",
    ),
    (
        "triton_kernel_wrapper_mutation",
        "a user-written Triton kernel: it needs Triton's compiler and a GPU",
    ),
    (
        "flex_attention",
        "flex attention's score and mask functions are subgraphs over index tensors with a block-sparse mask: not lowered yet",
    ),
    (
        "flex_attention_backward",
        "a training-time backward (torch.export does not write it)",
    ),
    (
        "executorch_call_delegate",
        "a call into a blob ExecuTorch's backends compiled (written by ExecuTorch's to_backend, not torch.export)",
    ),
    (
        "aoti_call_delegate",
        "a call into an AOTInductor-compiled library (written by AOTInductor's lowering, not torch.export)",
    ),
    (
        "run_const_graph",
        "AOTInductor's constant folding writes it, not torch.export",
    ),
    (
        "_export_tracepoint",
        "torch.export's module-boundary markers, removed before an ExportedProgram is returned",
    ),
    (
        "strict_mode",
        "dynamo's strict-mode region: torch.export inlines it",
    ),
    (
        "wrap",
        "dynamo's generic wrapper: torch.export inlines it",
    ),
    (
        "wrap_activation_checkpoint",
        "activation checkpointing: torch.export traces through it",
    ),
    (
        "tag_activation_checkpoint",
        "activation checkpointing: torch.export traces through it",
    ),
    (
        "autograd_function_apply",
        "an autograd.Function's forward and backward: torch.export traces its forward",
    ),
    (
        "custom_function_call",
        "an autograd.Function under functorch: torch.export traces its forward",
    ),
    (
        "dynamo_bypassing_wrapper",
        "a torch.compile wrapper: torch.export does not write it",
    ),
    (
        "flat_apply",
        "dynamo's call of a nonstrict-traced function: torch.export does not keep it in a saved program",
    ),
    (
        "invoke_leaf_function",
        "a torch.compile leaf function: torch.export does not write it",
    ),
    (
        "flex_gemm",
        "an Inductor template op: torch.export does not write it",
    ),
    (
        "foreach_map",
        "torch.compile's foreach_map: torch.export does not write it",
    ),
    (
        "graphsafe_run_with_rng_state",
        "CUDA-graph-safe random state for training: torch.export does not write it",
    ),
    (
        "run_and_save_rng_state",
        "activation checkpointing's random state: torch.export does not write it",
    ),
    (
        "run_with_rng_state",
        "activation checkpointing's random state: torch.export does not write it",
    ),
    (
        "run_dtensor_rng_op",
        "DTensor's random ops: torch.export does not write it",
    ),
    (
        "inductor_compiled_code",
        "code Inductor compiled: torch.export does not write it",
    ),
    (
        "inline_asm_elementwise",
        "inline GPU assembly for Inductor: torch.export does not write it",
    ),
    (
        "invoke_quant",
        "an Inductor quantization region: torch.export does not write it",
    ),
    (
        "invoke_quant_packed",
        "an Inductor quantization region: torch.export does not write it",
    ),
    (
        "local_map_hop",
        "DTensor's local_map under torch.compile: torch.export does not write it",
    ),
    (
        "register_hook",
        "a backward hook: torch.export does not write it",
    ),
    (
        "switch",
        "torch.compile's multi-way branch: torch.export does not write it",
    ),
    (
        "while_loop_stack_output",
        "while_loop's form for its backward: torch.export does not write it",
    ),
];

/// The reason a higher-order op is refused, if it is.
pub fn refusal(target: &Target) -> Option<&'static str> {
    if target.kind != TargetKind::HigherOrder {
        return None;
    }
    REFUSED
        .iter()
        .find(|(name, _)| *name == target.name)
        .map(|(_, why)| *why)
}
