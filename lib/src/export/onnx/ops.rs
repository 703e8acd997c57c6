//! The op table: every IR op identity that converts to ONNX, and its
//! emitter. Adding an op is one row in [`TABLE`] (and, when no existing
//! emitter fits, one function here).
//!
//! In-place ops (`add_`, `copy_`, ...) need no rows: their functional
//! form's emitter runs and later readers of the mutated value see the
//! result. Emitters read arguments by their schema names (the importer
//! filled in every default), compute low-precision math as
//! `cx.compute` says, and honour the opset (`cx.opset()`).

use std::collections::HashMap;
use std::sync::OnceLock;

use super::builder::{
    attr_float, attr_graph, attr_int, attr_ints, attr_str, promote, Cx, Lit, Operand,
};
use crate::error::{Error, Result};
use crate::ir::{Argument, Dtype, Graph, Sym, SymRef, Target, TargetKind, TensorMeta, ValueKind};

pub(crate) type Emit = fn(&mut Cx) -> Result<()>;

/// The emitter for an op, and whether the op writes its first argument in place.
pub(crate) fn lookup(target: &Target) -> Option<(Emit, bool)> {
    static MAP: OnceLock<HashMap<&'static str, Emit>> = OnceLock::new();
    let map = MAP.get_or_init(|| TABLE.iter().copied().collect());
    let key = target.to_string();
    if let Some(e) = map.get(key.as_str()) {
        return Some((*e, false));
    }
    let name = &target.name;
    if target.kind == TargetKind::Op && name.ends_with('_') && !name.ends_with("__") {
        let functional = format!(
            "{}.{}.{}",
            target.namespace,
            &name[..name.len() - 1],
            target.overload
        );
        if let Some(e) = map.get(functional.as_str()) {
            return Some((*e, true));
        }
    }
    None
}

/// Every op identity the table converts (for docs and tests).
pub fn supported_ops() -> Vec<&'static str> {
    let mut v: Vec<&str> = TABLE.iter().map(|(k, _)| *k).collect();
    v.sort_unstable();
    v
}

#[rustfmt::skip]
const TABLE: &[(&str, Emit)] = &[
    // ---- no-ops, aliases and copies ----
    ("aten._assert_tensor_metadata.default", nothing),
    ("aten._assert_scalar.default", nothing),
    ("aten._assert_async.msg", nothing),
    ("aten.sym_constrain_range_for_size.default", nothing),
    ("aten.sym_constrain_range.default", nothing),
    ("aten.clone.default", alias),
    ("aten.contiguous.default", alias),
    ("aten.alias.default", alias),
    ("aten.as_strided.default", as_strided),
    ("aten.diagonal.default", diagonal),
    ("aten.detach.default", alias),
    ("aten.lift_fresh_copy.default", alias),
    ("aten.dropout.default", dropout),
    ("aten.native_dropout.default", native_dropout),
    ("aten.feature_dropout.default", dropout),
    ("aten._to_copy.default", to_dtype),
    ("aten.to.dtype", to_dtype),
    ("aten.to.dtype_layout", to_dtype),
    ("aten.to.device", to_dtype),
    ("aten.to.other", to_dtype),
    ("aten.type_as.default", to_dtype),
    ("aten.copy.default", copy),
    ("aten.fill.Scalar", fill),
    ("aten.zero.default", fill),
    // ---- elementwise unary ----
    ("aten.relu.default", |cx| unary(cx, "Relu")),
    ("aten.sigmoid.default", |cx| unary(cx, "Sigmoid")),
    ("aten.tanh.default", |cx| unary(cx, "Tanh")),
    ("aten.exp.default", |cx| unary(cx, "Exp")),
    ("aten.log.default", |cx| unary(cx, "Log")),
    ("aten.sqrt.default", |cx| unary(cx, "Sqrt")),
    ("aten.neg.default", |cx| unary(cx, "Neg")),
    ("aten.abs.default", |cx| unary(cx, "Abs")),
    ("aten.sin.default", |cx| unary(cx, "Sin")),
    ("aten.cos.default", |cx| unary(cx, "Cos")),
    ("aten.tan.default", |cx| unary(cx, "Tan")),
    ("aten.asin.default", |cx| unary(cx, "Asin")),
    ("aten.acos.default", |cx| unary(cx, "Acos")),
    ("aten.atan.default", |cx| unary(cx, "Atan")),
    ("aten.sinh.default", |cx| unary(cx, "Sinh")),
    ("aten.cosh.default", |cx| unary(cx, "Cosh")),
    ("aten.erf.default", |cx| unary(cx, "Erf")),
    ("aten.floor.default", |cx| unary(cx, "Floor")),
    ("aten.ceil.default", |cx| unary(cx, "Ceil")),
    ("aten.round.default", |cx| unary(cx, "Round")),
    ("aten.reciprocal.default", |cx| unary(cx, "Reciprocal")),
    ("aten.sign.default", |cx| unary(cx, "Sign")),
    ("aten.rsqrt.default", rsqrt),
    ("aten.square.default", square),
    ("aten.trunc.default", trunc),
    ("aten.log2.default", |cx| log_base(cx, std::f64::consts::LN_2)),
    ("aten.log10.default", |cx| log_base(cx, std::f64::consts::LN_10)),
    ("aten.log1p.default", log1p),
    ("aten.expm1.default", expm1),
    ("aten.silu.default", silu),
    ("aten.gelu.default", gelu),
    ("aten.hardsigmoid.default", |cx| activation(cx, "HardSigmoid", &[("alpha", 1.0 / 6.0), ("beta", 0.5)])),
    ("aten.hardswish.default", |cx| unary(cx, "HardSwish")),
    ("aten.mish.default", mish),
    ("aten.leaky_relu.default", leaky_relu),
    ("aten.elu.default", elu),
    ("aten.softplus.default", softplus),
    ("aten.hardtanh.default", hardtanh),
    ("aten.relu6.default", hardtanh),
    ("aten.clamp.default", clamp),
    ("aten.clamp.Tensor", clamp_tensor),
    ("aten.clamp_min.default", clamp),
    ("aten.clamp_max.default", clamp),
    ("aten.logical_not.default", logical_not),
    ("aten.bitwise_not.default", bitwise_not),
    ("aten.isnan.default", |cx| predicate(cx, "IsNaN")),
    ("aten.acosh.default", |cx| unary(cx, "Acosh")),
    ("aten.asinh.default", |cx| unary(cx, "Asinh")),
    ("aten.atanh.default", |cx| unary(cx, "Atanh")),
    ("aten.erfc.default", erfc),
    ("aten.exp2.default", exp2),
    ("aten.frac.default", frac),
    ("aten.threshold.default", threshold),
    ("aten.nan_to_num.default", nan_to_num),
    ("aten.isinf.default", |cx| predicate(cx, "IsInf")),
    // ---- elementwise binary ----
    ("aten.add.Tensor", |cx| add_sub(cx, "Add", false)),
    ("aten.add.Scalar", |cx| add_sub(cx, "Add", false)),
    ("aten.sub.Tensor", |cx| add_sub(cx, "Sub", false)),
    ("aten.sub.Scalar", |cx| add_sub(cx, "Sub", false)),
    ("aten.rsub.Tensor", |cx| add_sub(cx, "Sub", true)),
    ("aten.rsub.Scalar", |cx| add_sub(cx, "Sub", true)),
    ("aten.mul.Tensor", |cx| arith(cx, "Mul", "self", "other")),
    ("aten.mul.Scalar", |cx| arith(cx, "Mul", "self", "other")),
    ("aten.div.Tensor", div),
    ("aten.div.Scalar", div),
    ("aten.div.Tensor_mode", div),
    ("aten.div.Scalar_mode", div),
    ("aten.floor_divide.default", div),
    ("aten.true_divide.Tensor", div),
    ("aten.remainder.Tensor", remainder),
    ("aten.remainder.Scalar", remainder),
    ("aten.fmod.Tensor", fmod),
    ("aten.fmod.Scalar", fmod),
    ("aten.pow.Tensor_Scalar", pow),
    ("aten.pow.Tensor_Tensor", pow),
    ("aten.pow.Scalar", pow),
    ("aten.maximum.default", |cx| arith(cx, "Max", "self", "other")),
    ("aten.minimum.default", |cx| arith(cx, "Min", "self", "other")),
    ("aten.eq.Tensor", |cx| compare(cx, "Equal", false)),
    ("aten.eq.Scalar", |cx| compare(cx, "Equal", false)),
    ("aten.ne.Tensor", |cx| compare(cx, "Equal", true)),
    ("aten.ne.Scalar", |cx| compare(cx, "Equal", true)),
    ("aten.lt.Tensor", |cx| compare(cx, "Less", false)),
    ("aten.lt.Scalar", |cx| compare(cx, "Less", false)),
    ("aten.le.Tensor", |cx| compare(cx, "LessOrEqual", false)),
    ("aten.le.Scalar", |cx| compare(cx, "LessOrEqual", false)),
    ("aten.gt.Tensor", |cx| compare(cx, "Greater", false)),
    ("aten.gt.Scalar", |cx| compare(cx, "Greater", false)),
    ("aten.ge.Tensor", |cx| compare(cx, "GreaterOrEqual", false)),
    ("aten.ge.Scalar", |cx| compare(cx, "GreaterOrEqual", false)),
    ("aten.logical_and.default", |cx| logical(cx, "And")),
    ("aten.logical_or.default", |cx| logical(cx, "Or")),
    ("aten.logical_xor.default", |cx| logical(cx, "Xor")),
    ("aten.bitwise_and.Tensor", |cx| bitwise(cx, "And", "BitwiseAnd")),
    ("aten.bitwise_and.Scalar", |cx| bitwise(cx, "And", "BitwiseAnd")),
    ("aten.bitwise_or.Tensor", |cx| bitwise(cx, "Or", "BitwiseOr")),
    ("aten.bitwise_or.Scalar", |cx| bitwise(cx, "Or", "BitwiseOr")),
    ("aten.bitwise_xor.Tensor", |cx| bitwise(cx, "Xor", "BitwiseXor")),
    ("aten.bitwise_xor.Scalar", |cx| bitwise(cx, "Xor", "BitwiseXor")),
    ("aten.__and__.Tensor", |cx| bitwise(cx, "And", "BitwiseAnd")),
    ("aten.__or__.Tensor", |cx| bitwise(cx, "Or", "BitwiseOr")),
    ("aten.__xor__.Tensor", |cx| bitwise(cx, "Xor", "BitwiseXor")),
    ("aten.where.self", where_),
    ("aten.where.ScalarOther", where_),
    ("aten.where.ScalarSelf", where_),
    ("aten.where.Scalar", where_),
    ("aten.masked_fill.Scalar", masked_fill),
    ("aten.masked_fill.Tensor", masked_fill),
    ("aten.addcmul.default", addcmul),
    ("aten.atan2.default", atan2),
    // ---- linear algebra ----
    ("aten.mm.default", |cx| matmul(cx, "self", "mat2")),
    ("aten.bmm.default", |cx| matmul(cx, "self", "mat2")),
    ("aten.matmul.default", |cx| matmul(cx, "self", "other")),
    ("aten.addmm.default", addmm),
    ("aten.baddbmm.default", baddbmm),
    ("aten.linear.default", linear),
    ("aten.convolution.default", convolution),
    ("aten.conv1d.default", convolution),
    ("aten.conv2d.default", convolution),
    ("aten.conv3d.default", convolution),
    ("aten.conv1d.padding", convolution),
    ("aten.conv2d.padding", convolution),
    ("aten.conv3d.padding", convolution),
    ("aten.conv_transpose1d.default", conv_transpose),
    ("aten.conv_transpose2d.input", conv_transpose),
    ("aten.conv_transpose3d.input", conv_transpose),
    ("aten.scaled_dot_product_attention.default", sdpa),
    ("aten.lstm.input", lstm),
    ("aten.einsum.default", einsum),
    ("aten.grid_sampler_2d.default", grid_sample),
    ("aten.grid_sampler.default", grid_sample),
    ("aten.upsample_nearest1d.default", resize),
    ("aten.upsample_nearest2d.default", resize),
    ("aten.upsample_nearest3d.default", resize),
    ("aten.upsample_nearest1d.vec", resize),
    ("aten.upsample_nearest2d.vec", resize),
    ("aten.upsample_nearest3d.vec", resize),
    ("aten.upsample_linear1d.default", resize),
    ("aten.upsample_bilinear2d.default", resize),
    ("aten.upsample_trilinear3d.default", resize),
    ("aten.upsample_linear1d.vec", resize),
    ("aten.upsample_bilinear2d.vec", resize),
    ("aten.upsample_trilinear3d.vec", resize),
    ("aten.upsample_bicubic2d.default", resize),
    ("aten.upsample_bicubic2d.vec", resize),
    ("aten.pixel_shuffle.default", pixel_shuffle),
    // ---- normalization ----
    ("aten.batch_norm.default", batch_norm),
    ("aten._native_batch_norm_legit_no_training.default", batch_norm),
    ("aten.native_batch_norm.default", batch_norm),
    ("aten._native_batch_norm_legit.default", batch_norm),
    ("aten._native_batch_norm_legit.no_stats", batch_norm),
    ("aten._native_batch_norm_legit_functional.default", batch_norm),
    ("aten.layer_norm.default", layer_norm),
    ("aten.native_layer_norm.default", layer_norm),
    ("aten.group_norm.default", group_norm),
    ("aten.native_group_norm.default", group_norm),
    ("aten.rms_norm.default", rms_norm),
    ("aten.instance_norm.default", instance_norm),
    ("aten._softmax.default", |cx| softmax(cx, "Softmax")),
    ("aten.softmax.int", |cx| softmax(cx, "Softmax")),
    ("aten._safe_softmax.default", |cx| softmax(cx, "Softmax")),
    ("aten._log_softmax.default", |cx| softmax(cx, "LogSoftmax")),
    ("aten.log_softmax.int", |cx| softmax(cx, "LogSoftmax")),
    // ---- pooling ----
    ("aten.max_pool1d.default", max_pool),
    ("aten.max_pool2d.default", max_pool),
    ("aten.max_pool3d.default", max_pool),
    ("aten.max_pool2d_with_indices.default", max_pool),
    ("aten.max_pool3d_with_indices.default", max_pool),
    ("aten.avg_pool1d.default", avg_pool),
    ("aten.avg_pool2d.default", avg_pool),
    ("aten.avg_pool3d.default", avg_pool),
    ("aten.adaptive_avg_pool1d.default", adaptive_avg_pool),
    ("aten.adaptive_avg_pool2d.default", adaptive_avg_pool),
    ("aten._adaptive_avg_pool2d.default", adaptive_avg_pool),
    ("aten.adaptive_avg_pool3d.default", adaptive_avg_pool),
    ("aten._adaptive_avg_pool3d.default", adaptive_avg_pool),
    // ---- reductions ----
    ("aten.sum.default", |cx| reduce(cx, "ReduceSum", None)),
    ("aten.sum.dim_IntList", |cx| reduce(cx, "ReduceSum", Some("dim"))),
    ("aten.mean.default", |cx| reduce(cx, "ReduceMean", None)),
    ("aten.mean.dim", |cx| reduce(cx, "ReduceMean", Some("dim"))),
    ("aten.prod.default", |cx| reduce(cx, "ReduceProd", None)),
    ("aten.prod.dim_int", |cx| reduce(cx, "ReduceProd", Some("dim"))),
    ("aten.amax.default", |cx| reduce(cx, "ReduceMax", Some("dim"))),
    ("aten.amin.default", |cx| reduce(cx, "ReduceMin", Some("dim"))),
    ("aten.max.default", |cx| reduce(cx, "ReduceMax", None)),
    ("aten.min.default", |cx| reduce(cx, "ReduceMin", None)),
    ("aten.logsumexp.default", |cx| reduce(cx, "ReduceLogSumExp", Some("dim"))),
    ("aten.any.default", |cx| any_all(cx, "ReduceMax")),
    ("aten.any.dim", |cx| any_all(cx, "ReduceMax")),
    ("aten.any.dims", |cx| any_all(cx, "ReduceMax")),
    ("aten.all.default", |cx| any_all(cx, "ReduceMin")),
    ("aten.all.dim", |cx| any_all(cx, "ReduceMin")),
    ("aten.all.dims", |cx| any_all(cx, "ReduceMin")),
    ("aten.var.correction", |cx| var_std(cx, false)),
    ("aten.std.correction", |cx| var_std(cx, true)),
    ("aten.var.dim", |cx| var_std(cx, false)),
    ("aten.std.dim", |cx| var_std(cx, true)),
    ("aten.linalg_vector_norm.default", vector_norm),
    ("aten.max.dim", |cx| max_min_dim(cx, "ReduceMax", "ArgMax")),
    ("aten.min.dim", |cx| max_min_dim(cx, "ReduceMin", "ArgMin")),
    ("aten.argmax.default", |cx| arg_max_min(cx, "ArgMax")),
    ("aten.argmin.default", |cx| arg_max_min(cx, "ArgMin")),
    ("aten.cumsum.default", cumsum),
    ("aten.diff.default", diff),
    ("aten.topk.default", topk),
    ("aten.sort.default", sort),
    ("aten.argsort.default", sort),
    // ---- shape and layout ----
    ("aten.view.default", |cx| reshape(cx, "size")),
    ("aten._unsafe_view.default", |cx| reshape(cx, "size")),
    ("aten.reshape.default", |cx| reshape(cx, "shape")),
    ("aten.view_as.default", view_as),
    ("aten.flatten.using_ints", reshape_to_output),
    ("aten.unflatten.int", reshape_to_output),
    ("aten.permute.default", permute),
    ("aten.transpose.int", transpose),
    ("aten.t.default", transpose),
    ("aten.numpy_T.default", transpose),
    ("aten.squeeze.default", squeeze),
    ("aten.squeeze.dim", squeeze),
    ("aten.squeeze.dims", squeeze),
    ("aten.unsqueeze.default", unsqueeze),
    ("aten.expand.default", expand),
    ("aten.expand_as.default", expand_as),
    ("aten.repeat.default", repeat),
    ("aten.cat.default", cat),
    ("aten.concat.default", cat),
    ("aten.stack.default", stack),
    ("aten.split.Tensor", split),
    ("aten.split_with_sizes.default", split),
    ("aten.chunk.default", split),
    ("aten.unbind.int", split),
    ("aten.slice.Tensor", slice),
    ("aten.narrow.default", slice),
    ("aten.select.int", select),
    ("aten.index_select.default", index_select),
    ("aten.index.Tensor", index),
    ("aten._unsafe_index.Tensor", index),
    ("aten.gather.default", gather),
    ("aten.embedding.default", embedding),
    ("aten.constant_pad_nd.default", pad),
    ("aten.reflection_pad1d.default", pad),
    ("aten.reflection_pad2d.default", pad),
    ("aten.reflection_pad3d.default", pad),
    ("aten.replication_pad1d.default", pad),
    ("aten.replication_pad2d.default", pad),
    ("aten.replication_pad3d.default", pad),
    ("aten.roll.default", roll),
    ("aten.one_hot.default", one_hot),
    ("aten.nonzero.default", nonzero),
    ("aten.scatter.src", scatter),
    ("aten.scatter.value", scatter),
    ("aten.scatter_add.default", scatter),
    ("aten.scatter_reduce.two", scatter),
    ("aten.slice_scatter.default", slice_scatter),
    ("aten.select_scatter.default", slice_scatter),
    ("aten.index_put.default", index_put),
    ("aten.pad.default", pad),
    ("aten.flip.default", flip),
    ("aten.tril.default", |cx| trilu(cx, false)),
    ("aten.triu.default", |cx| trilu(cx, true)),
    // ---- creation ----
    ("aten.full.default", full),
    ("aten.zeros.default", full),
    ("aten.ones.default", full),
    ("aten.empty.memory_format", full),
    ("aten.empty_strided.default", full),
    ("aten.rand.default", random),
    ("aten.randn.default", random),
    ("aten.new_full.default", full),
    ("aten.new_zeros.default", full),
    ("aten.new_ones.default", full),
    ("aten.new_empty.default", full),
    ("aten.full_like.default", full_like),
    ("aten.zeros_like.default", full_like),
    ("aten.ones_like.default", full_like),
    ("aten.empty_like.default", full_like),
    ("aten.scalar_tensor.default", scalar_tensor),
    ("aten.arange.default", arange),
    ("aten.arange.start", arange),
    ("aten.arange.start_step", arange),
    // ---- symbolic scalars ----
    ("aten.sym_size.int", sym_size),
    ("aten.sym_numel.default", sym_numel),
    ("aten.sym_storage_offset.default", sym_constant),
    ("aten.sym_stride.int", sym_constant),
    ("aten._local_scalar_dense.default", item),
    ("aten.item.default", item),
    ("_operator.add", |cx| sym_binary(cx, "Add")),
    ("_operator.sub", |cx| sym_binary(cx, "Sub")),
    ("_operator.mul", |cx| sym_binary(cx, "Mul")),
    ("_operator.floordiv", sym_floordiv),
    ("_operator.truediv", |cx| sym_binary(cx, "Div")),
    ("_operator.mod", sym_mod),
    ("_operator.pow", |cx| sym_binary(cx, "Pow")),
    ("_operator.eq", |cx| sym_compare(cx, "Equal", false)),
    ("_operator.ne", |cx| sym_compare(cx, "Equal", true)),
    ("_operator.lt", |cx| sym_compare(cx, "Less", false)),
    ("_operator.le", |cx| sym_compare(cx, "LessOrEqual", false)),
    ("_operator.gt", |cx| sym_compare(cx, "Greater", false)),
    ("_operator.ge", |cx| sym_compare(cx, "GreaterOrEqual", false)),
    ("_operator.and_", |cx| sym_binary(cx, "And")),
    ("_operator.or_", |cx| sym_binary(cx, "Or")),
    ("_operator.neg", |cx| sym_unary(cx, "Neg")),
    ("_operator.not_", |cx| sym_unary(cx, "Not")),
    ("torch.sym_not", |cx| sym_unary(cx, "Not")),
    ("torch.sym_max", |cx| sym_binary(cx, "Max")),
    ("torch.sym_min", |cx| sym_binary(cx, "Min")),
    ("torch.sym_float", sym_cast),
    ("torch.sym_int", sym_cast),
    ("math.floor", |cx| sym_round(cx, "Floor")),
    ("math.ceil", |cx| sym_round(cx, "Ceil")),
    ("math.trunc", sym_cast),
    // ---- control flow ----
    ("higher_order.cond", cond),
    ("higher_order.while_loop", while_loop),
    ("higher_order.map_impl", map_impl),
    ("higher_order.wrap_with_set_grad_enabled", |cx| wrapped_region(cx, 1)),
];

// ---------------------------------------------------------------------------
// helpers

fn norm_dim(d: i64, rank: usize) -> i64 {
    if d < 0 {
        d + rank.max(1) as i64
    } else {
        d
    }
}

/// The first argument as a tensor: its ONNX name and metadata.
fn first<'p>(cx: &Cx<'_, 'p>) -> Result<(String, &'p TensorMeta)> {
    let name = cx
        .node
        .inputs
        .first()
        .map(|a| a.name.clone())
        .ok_or_else(|| Error::bad_input("no arguments"))?;
    Ok((cx.input(&name)?, cx.meta(&name)?))
}

/// A literal scalar argument (`Scalar alpha=1`).
fn lit(cx: &Cx, name: &str) -> Result<Option<Lit>> {
    match cx.operand(name) {
        Ok(Operand::Lit(l)) => Ok(Some(l)),
        Ok(_) => Err(Error::unsupported(format!(
            "argument '{name}' must be a constant"
        ))),
        Err(_) if !cx.has(name) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Applies an elementwise op to `x` (of `from`) giving the output dtype:
/// computes in `cx.compute(out)` and casts back.
fn elementwise(
    cx: &mut Cx,
    x: &str,
    from: Dtype,
    f: impl FnOnce(&mut Cx, &str, Dtype) -> Result<String>,
) -> Result<()> {
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xc = cx.cast(x, from, c)?;
    let y = f(cx, &xc, c)?;
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

// ---------------------------------------------------------------------------
// no-ops and casts

fn nothing(_: &mut Cx) -> Result<()> {
    Ok(())
}

fn alias(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let out = cx.out_dtype(0)?;
    let y = cx.cast(&x, meta.dtype, out)?;
    cx.set(0, y);
    Ok(())
}

/// `as_strided` with static shapes: the elements it reads, found from the
/// input's recorded storage layout, become one constant Gather.
fn as_strided(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let in_sizes = meta
        .static_sizes()
        .ok_or_else(|| Error::unsupported("as_strided on symbolic sizes"))?;
    let in_strides = meta
        .static_strides()
        .ok_or_else(|| Error::unsupported("as_strided on symbolic strides"))?;
    let in_offset = meta.storage_offset.as_int().unwrap_or(0);
    let size = cx.ints("size")?;
    let stride = cx.ints("stride")?;
    let offset = cx.opt_int("storage_offset")?.unwrap_or(in_offset);
    let idx =
        crate::ir::as_strided_gather(&in_sizes, &in_strides, in_offset, &size, &stride, offset)
            .ok_or_else(|| {
                Error::unsupported("as_strided reading storage the input does not cover")
            })?;
    let flat = cx.reshape_const(&x, &[-1])?;
    let y = if idx.iter().enumerate().all(|(i, &j)| i as i64 == j)
        && idx.len() as i64 == in_sizes.iter().product::<i64>()
    {
        flat
    } else {
        let indices = cx.const_i64s(&idx);
        cx.node("Gather", &[&flat, &indices], vec![])
    };
    let y = cx.reshape_const(&y, &size)?;
    cx.set(0, y);
    Ok(())
}

/// `diagonal(offset, dim1, dim2)`: the diagonal as a strided view of the
/// (logically contiguous) input, gathered from its flat form; the
/// diagonal's dim goes last, as in torch.
fn diagonal(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let sizes = meta
        .static_sizes()
        .ok_or_else(|| Error::unsupported("diagonal on symbolic sizes"))?;
    let rank = sizes.len() as i64;
    let norm = |d: i64| (if d < 0 { d + rank } else { d }) as usize;
    let off = cx.opt_int("offset")?.unwrap_or(0);
    let d1 = norm(cx.opt_int("dim1")?.unwrap_or(0));
    let d2 = norm(cx.opt_int("dim2")?.unwrap_or(1));
    if d1 >= sizes.len() || d2 >= sizes.len() || d1 == d2 {
        return Err(Error::bad_input(format!(
            "diagonal: dims {d1} and {d2} of a rank-{rank} tensor"
        )));
    }
    let mut strides = vec![1i64; sizes.len()];
    for i in (0..sizes.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * sizes[i + 1];
    }
    let len = if off >= 0 {
        sizes[d1].min(sizes[d2] - off)
    } else {
        (sizes[d1] + off).min(sizes[d2])
    }
    .max(0);
    let (mut size, mut stride): (Vec<i64>, Vec<i64>) = (0..sizes.len())
        .filter(|&i| i != d1 && i != d2)
        .map(|i| (sizes[i], strides[i]))
        .unzip();
    size.push(len);
    stride.push(strides[d1] + strides[d2]);
    let start = if len == 0 {
        0
    } else if off >= 0 {
        off * strides[d2]
    } else {
        -off * strides[d1]
    };
    let idx = crate::ir::as_strided_gather(&sizes, &strides, 0, &size, &stride, start)
        .ok_or_else(|| Error::internal("diagonal: indices outside the input"))?;
    let flat = cx.reshape_const(&x, &[-1])?;
    let indices = cx.const_i64s(&idx);
    let y = cx.node("Gather", &[&flat, &indices], vec![]);
    let y = cx.reshape_const(&y, &size)?;
    cx.set(0, y);
    Ok(())
}

fn dropout(cx: &mut Cx) -> Result<()> {
    let train = cx.opt_bool("train")?.unwrap_or(false);
    let p = cx.opt_float("p")?.unwrap_or(0.0);
    if train && p > 0.0 {
        let (x, _) = first(cx)?;
        let ratio = cx.scalar(Lit::Float(p), Dtype::Float32)?;
        let t = cx.scalar(Lit::Bool(true), Dtype::Bool)?;
        let y = cx.node("Dropout", &[&x, &ratio, &t], vec![]);
        cx.set(0, y);
        return Ok(());
    }
    alias(cx)
}

fn native_dropout(cx: &mut Cx) -> Result<()> {
    let train = cx.opt_bool("train")?.unwrap_or(false);
    let p = cx.opt_float("p")?.unwrap_or(0.0);
    let (x, _) = first(cx)?;
    if train && p > 0.0 {
        let ratio = cx.scalar(Lit::Float(p), Dtype::Float32)?;
        let t = cx.scalar(Lit::Bool(true), Dtype::Bool)?;
        let ys = cx.node_n("Dropout", &[&x, &ratio, &t], vec![], 2);
        cx.set(0, ys[0].clone());
        cx.set(1, ys[1].clone());
        return Ok(());
    }
    cx.set(0, x.clone());
    if cx.out_used(1) {
        let shape = cx.shape(&x);
        let mask = constant_of_shape(cx, &shape, Lit::Bool(true), Dtype::Bool)?;
        cx.set(1, mask);
    }
    Ok(())
}

fn to_dtype(cx: &mut Cx) -> Result<()> {
    alias(cx)
}

/// `copy(self, src)`: `src` in `self`'s dtype and shape.
fn copy(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let src = cx.input("src")?;
    let from = cx.dtype("src")?;
    let out = cx.out_dtype(0)?;
    let s = cx.cast(&src, from, out)?;
    let same_shape = cx.meta("self")?.sizes == cx.meta("src")?.sizes;
    let y = if same_shape {
        s
    } else {
        let shape = cx.shape(&x);
        cx.node("Expand", &[&s, &shape], vec![])
    };
    cx.set(0, y);
    Ok(())
}

fn fill(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let out = cx.out_dtype(0)?;
    let value = if cx.has("value") {
        cx.operand("value")?
    } else {
        Operand::Lit(Lit::Int(0))
    };
    let shape = cx.shape(&x);
    let y = fill_shape(cx, &shape, &value, out)?;
    cx.set(0, y);
    Ok(())
}

/// A tensor of `dtype` of the given (1-D int64) shape, filled with `value`.
fn fill_shape(cx: &mut Cx, shape: &str, value: &Operand, dtype: Dtype) -> Result<String> {
    match value {
        Operand::Lit(l) => constant_of_shape(cx, shape, *l, dtype),
        other => {
            let v = cx.operand_as(other, dtype)?;
            Ok(cx.node("Expand", &[&v, shape], vec![]))
        }
    }
}

fn constant_of_shape(cx: &mut Cx, shape: &str, value: Lit, dtype: Dtype) -> Result<String> {
    let onnx = super::onnx_dtype(dtype, cx.opset())?;
    let raw = super::builder::lit_bytes(value, dtype)?;
    let t = super::tensor_proto("", onnx, &[1], raw);
    Ok(cx.node(
        "ConstantOfShape",
        &[shape],
        vec![super::builder::attr_tensor("value", t)],
    ))
}

// ---------------------------------------------------------------------------
// unary

fn unary(cx: &mut Cx, op: &str) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| Ok(cx.node(op, &[x], vec![])))
}

fn activation(cx: &mut Cx, op: &str, attrs: &[(&str, f64)]) -> Result<()> {
    let (x, meta) = first(cx)?;
    let attrs = attrs.iter().map(|(k, v)| attr_float(k, *v)).collect();
    elementwise(cx, &x, meta.dtype, |cx, x, _| Ok(cx.node(op, &[x], attrs)))
}

fn rsqrt(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let s = cx.node("Sqrt", &[x], vec![]);
        Ok(cx.node("Reciprocal", &[&s], vec![]))
    })
}

fn square(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        Ok(cx.node("Mul", &[x, x], vec![]))
    })
}

/// ONNX has no Trunc: sign(x) * floor(|x|).
fn trunc(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    if !meta.dtype.is_floating() {
        return alias(cx);
    }
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let a = cx.node("Abs", &[x], vec![]);
        let f = cx.node("Floor", &[&a], vec![]);
        let s = cx.node("Sign", &[x], vec![]);
        Ok(cx.node("Mul", &[&s, &f], vec![]))
    })
}

fn log_base(cx: &mut Cx, ln_base: f64) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let l = cx.node("Log", &[x], vec![]);
        let k = cx.scalar(Lit::Float(ln_base), c)?;
        Ok(cx.node("Div", &[&l, &k], vec![]))
    })
}

fn log1p(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let one = cx.scalar(Lit::Int(1), c)?;
        let s = cx.node("Add", &[x, &one], vec![]);
        Ok(cx.node("Log", &[&s], vec![]))
    })
}

fn expm1(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let one = cx.scalar(Lit::Int(1), c)?;
        let e = cx.node("Exp", &[x], vec![]);
        Ok(cx.node("Sub", &[&e, &one], vec![]))
    })
}

fn silu(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let s = cx.node("Sigmoid", &[x], vec![]);
        Ok(cx.node("Mul", &[x, &s], vec![]))
    })
}

/// Gelu is an ONNX op from opset 20; before, its formula.
fn gelu(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let approximate = cx
        .opt_string("approximate")?
        .unwrap_or_else(|| "none".into());
    if approximate != "none" && approximate != "tanh" {
        return Err(Error::unsupported(format!(
            "gelu approximate={approximate:?}"
        )));
    }
    let opset = cx.opset();
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        if opset >= 20 {
            return Ok(cx.node("Gelu", &[x], vec![attr_str("approximate", &approximate)]));
        }
        let half = cx.scalar(Lit::Float(0.5), c)?;
        let one = cx.scalar(Lit::Float(1.0), c)?;
        let inner = if approximate == "tanh" {
            // tanh(sqrt(2/pi) * (x + 0.044715 x^3))
            let k = cx.scalar(Lit::Float((2.0 / std::f64::consts::PI).sqrt()), c)?;
            let a = cx.scalar(Lit::Float(0.044715), c)?;
            let x2 = cx.node("Mul", &[x, x], vec![]);
            let x3 = cx.node("Mul", &[&x2, x], vec![]);
            let ax3 = cx.node("Mul", &[&a, &x3], vec![]);
            let s = cx.node("Add", &[x, &ax3], vec![]);
            let ks = cx.node("Mul", &[&k, &s], vec![]);
            cx.node("Tanh", &[&ks], vec![])
        } else {
            let r = cx.scalar(Lit::Float(std::f64::consts::FRAC_1_SQRT_2), c)?;
            let xr = cx.node("Mul", &[x, &r], vec![]);
            cx.node("Erf", &[&xr], vec![])
        };
        let p = cx.node("Add", &[&inner, &one], vec![]);
        let hx = cx.node("Mul", &[x, &half], vec![]);
        Ok(cx.node("Mul", &[&hx, &p], vec![]))
    })
}

fn leaky_relu(cx: &mut Cx) -> Result<()> {
    let slope = lit(cx, "negative_slope")?.map_or(0.01, Lit::as_f64);
    activation(cx, "LeakyRelu", &[("alpha", slope)])
}

fn elu(cx: &mut Cx) -> Result<()> {
    let alpha = lit(cx, "alpha")?.map_or(1.0, Lit::as_f64);
    let scale = lit(cx, "scale")?.map_or(1.0, Lit::as_f64);
    let input_scale = lit(cx, "input_scale")?.map_or(1.0, Lit::as_f64);
    if scale == 1.0 && input_scale == 1.0 {
        return activation(cx, "Elu", &[("alpha", alpha)]);
    }
    if input_scale == 1.0 {
        // selu and friends: scale * (x > 0 ? x : alpha * (exp(x) - 1))
        return activation(cx, "Selu", &[("alpha", alpha), ("gamma", scale)]);
    }
    // scale * (x > 0 ? x : alpha * (exp(x * input_scale) - 1))
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let (s, is, sa) = (
            cx.scalar(Lit::Float(scale), c)?,
            cx.scalar(Lit::Float(input_scale), c)?,
            cx.scalar(Lit::Float(scale * alpha), c)?,
        );
        let (zero, one) = (
            cx.scalar(Lit::Float(0.0), c)?,
            cx.scalar(Lit::Float(1.0), c)?,
        );
        let pos = cx.node("Mul", &[x, &s], vec![]);
        let xi = cx.node("Mul", &[x, &is], vec![]);
        let e = cx.node("Exp", &[&xi], vec![]);
        let em1 = cx.node("Sub", &[&e, &one], vec![]);
        let neg = cx.node("Mul", &[&em1, &sa], vec![]);
        let up = cx.node("Greater", &[x, &zero], vec![]);
        Ok(cx.node("Where", &[&up, &pos, &neg], vec![]))
    })
}

/// mish(x) = x tanh(softplus(x)): ONNX `Mish` from opset 18, composed before.
fn mish(cx: &mut Cx) -> Result<()> {
    if cx.opset() >= 18 {
        return unary(cx, "Mish");
    }
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let sp = cx.node("Softplus", &[x], vec![]);
        let t = cx.node("Tanh", &[&sp], vec![]);
        Ok(cx.node("Mul", &[x, &t], vec![]))
    })
}

/// softplus(x) = log(1 + exp(beta x)) / beta, and x where beta x > threshold.
fn softplus(cx: &mut Cx) -> Result<()> {
    let beta = lit(cx, "beta")?.map_or(1.0, Lit::as_f64);
    let threshold = lit(cx, "threshold")?.map_or(20.0, Lit::as_f64);
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let b = cx.scalar(Lit::Float(beta), c)?;
        let bx = cx.node("Mul", &[x, &b], vec![]);
        let sp = cx.node("Softplus", &[&bx], vec![]);
        let y = cx.node("Div", &[&sp, &b], vec![]);
        let t = cx.scalar(Lit::Float(threshold), c)?;
        let big = cx.node("Greater", &[&bx, &t], vec![]);
        Ok(cx.node("Where", &[&big, x, &y], vec![]))
    })
}

/// Clip with constant bounds (hardtanh, relu6, clamp with scalars).
fn clip(cx: &mut Cx, min: Option<Operand>, max: Option<Operand>) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let lo = match &min {
            Some(m) => cx.operand_as(m, c)?,
            None => String::new(),
        };
        let hi = match &max {
            Some(m) => cx.operand_as(m, c)?,
            None => String::new(),
        };
        if hi.is_empty() {
            Ok(cx.node("Clip", &[x, &lo], vec![]))
        } else {
            Ok(cx.node("Clip", &[x, &lo, &hi], vec![]))
        }
    })
}

fn hardtanh(cx: &mut Cx) -> Result<()> {
    if cx.node.target.name == "relu6" {
        return clip(
            cx,
            Some(Operand::Lit(Lit::Float(0.0))),
            Some(Operand::Lit(Lit::Float(6.0))),
        );
    }
    let lo = lit(cx, "min_val")?.unwrap_or(Lit::Float(-1.0));
    let hi = lit(cx, "max_val")?.unwrap_or(Lit::Float(1.0));
    clip(cx, Some(Operand::Lit(lo)), Some(Operand::Lit(hi)))
}

fn clamp(cx: &mut Cx) -> Result<()> {
    let min = if cx.has("min") {
        Some(cx.operand("min")?)
    } else {
        None
    };
    let max = if cx.has("max") {
        Some(cx.operand("max")?)
    } else {
        None
    };
    let is_rank0 = |o: &Option<Operand>| match o {
        Some(Operand::Tensor { rank0, .. }) => *rank0,
        _ => true,
    };
    if is_rank0(&min) && is_rank0(&max) {
        return clip(cx, min, max);
    }
    clamp_tensor(cx)
}

/// Clamp with tensor bounds: Max then Min, broadcasting.
fn clamp_tensor(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let min = if cx.has("min") {
        Some(cx.operand("min")?)
    } else {
        None
    };
    let max = if cx.has("max") {
        Some(cx.operand("max")?)
    } else {
        None
    };
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let mut y = x.to_string();
        if let Some(m) = &min {
            let m = cx.operand_as(m, c)?;
            y = cx.node("Max", &[&y, &m], vec![]);
        }
        if let Some(m) = &max {
            let m = cx.operand_as(m, c)?;
            y = cx.node("Min", &[&y, &m], vec![]);
        }
        Ok(y)
    })
}

fn logical_not(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let b = cx.cast(&x, meta.dtype, Dtype::Bool)?;
    let y = cx.node("Not", &[&b], vec![]);
    let out = cx.out_dtype(0)?;
    let y = cx.cast(&y, Dtype::Bool, out)?;
    cx.set(0, y);
    Ok(())
}

fn bitwise_not(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    if meta.dtype == Dtype::Bool {
        return logical_not(cx);
    }
    if cx.opset() < 18 {
        // ~x == -x - 1 for two's complement integers.
        let one = cx.scalar(Lit::Int(1), meta.dtype)?;
        let n = cx.node("Neg", &[&x], vec![]);
        let y = cx.node("Sub", &[&n, &one], vec![]);
        cx.set(0, y);
        return Ok(());
    }
    let y = cx.node("BitwiseNot", &[&x], vec![]);
    cx.set(0, y);
    Ok(())
}

fn predicate(cx: &mut Cx, op: &str) -> Result<()> {
    let (x, meta) = first(cx)?;
    let c = cx.compute(meta.dtype);
    let xc = cx.cast(&x, meta.dtype, c)?;
    let y = if meta.dtype.is_floating() {
        cx.node(op, &[&xc], vec![])
    } else {
        // Integers are never NaN or infinite.
        let shape = cx.shape(&x);
        constant_of_shape(cx, &shape, Lit::Bool(false), Dtype::Bool)?
    };
    cx.set(0, y);
    Ok(())
}

// ---------------------------------------------------------------------------
// binary

/// `op(a, b)` computed in the output dtype.
fn arith(cx: &mut Cx, op: &str, a: &str, b: &str) -> Result<()> {
    let x = cx.operand(a)?;
    let y = cx.operand(b)?;
    binary_op(cx, op, &x, &y)
}

fn binary_op(cx: &mut Cx, op: &str, x: &Operand, y: &Operand) -> Result<()> {
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    // Bool arithmetic is logic in torch.
    let op = match (c, op) {
        (Dtype::Bool, "Add") | (Dtype::Bool, "Max") => "Or",
        (Dtype::Bool, "Mul") | (Dtype::Bool, "Min") => "And",
        _ => op,
    };
    let xs = cx.operand_as(x, c)?;
    let ys = cx.operand_as(y, c)?;
    let r = cx.node(op, &[&xs, &ys], vec![]);
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

/// add/sub with `alpha`; `reverse` for rsub (other - alpha * self).
fn add_sub(cx: &mut Cx, op: &str, reverse: bool) -> Result<()> {
    let (a, b) = if reverse {
        ("other", "self")
    } else {
        ("self", "other")
    };
    let x = cx.operand(a)?;
    let y = cx.operand(b)?;
    let alpha = lit(cx, "alpha")?.unwrap_or(Lit::Int(1));
    if alpha.as_f64() == 1.0 {
        return binary_op(cx, op, &x, &y);
    }
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.operand_as(&x, c)?;
    let ys = cx.operand_as(&y, c)?;
    let k = cx.scalar(alpha, c)?;
    let scaled = cx.node("Mul", &[&ys, &k], vec![]);
    let r = cx.node(op, &[&xs, &scaled], vec![]);
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

/// True division, or with `rounding_mode` trunc/floor.
fn div(cx: &mut Cx) -> Result<()> {
    let x = cx.operand("self")?;
    let y = cx.operand("other")?;
    let mode = if cx.node.target.name == "floor_divide" {
        Some("floor".to_string())
    } else {
        cx.opt_string("rounding_mode")?
    };
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.operand_as(&x, c)?;
    let ys = cx.operand_as(&y, c)?;
    let q = cx.node("Div", &[&xs, &ys], vec![]);
    let r = match mode.as_deref() {
        None => q,
        Some("trunc") if c.is_floating() => {
            let a = cx.node("Abs", &[&q], vec![]);
            let f = cx.node("Floor", &[&a], vec![]);
            let s = cx.node("Sign", &[&q], vec![]);
            cx.node("Mul", &[&s, &f], vec![])
        }
        // ONNX integer division truncates.
        Some("trunc") => q,
        Some("floor") if c.is_floating() => cx.node("Floor", &[&q], vec![]),
        Some("floor") => {
            // q - (q * y != x and (x < 0) != (y < 0))
            let zero = cx.scalar(Lit::Int(0), c)?;
            let one = cx.scalar(Lit::Int(1), c)?;
            let back = cx.node("Mul", &[&q, &ys], vec![]);
            let exact = cx.node("Equal", &[&back, &xs], vec![]);
            let inexact = cx.node("Not", &[&exact], vec![]);
            let xn = cx.node("Less", &[&xs, &zero], vec![]);
            let yn = cx.node("Less", &[&ys, &zero], vec![]);
            let signs = cx.node("Xor", &[&xn, &yn], vec![]);
            let fix = cx.node("And", &[&inexact, &signs], vec![]);
            let q1 = cx.node("Sub", &[&q, &one], vec![]);
            cx.node("Where", &[&fix, &q1, &q], vec![])
        }
        Some(m) => return Err(Error::unsupported(format!("rounding_mode={m:?}"))),
    };
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

/// Python's remainder (the sign of the divisor).
fn remainder(cx: &mut Cx) -> Result<()> {
    let x = cx.operand("self")?;
    let y = cx.operand("other")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.operand_as(&x, c)?;
    let ys = cx.operand_as(&y, c)?;
    let r = if c.is_floating() {
        let q = cx.node("Div", &[&xs, &ys], vec![]);
        let f = cx.node("Floor", &[&q], vec![]);
        let m = cx.node("Mul", &[&f, &ys], vec![]);
        cx.node("Sub", &[&xs, &m], vec![])
    } else {
        cx.node("Mod", &[&xs, &ys], vec![attr_int("fmod", 0)])
    };
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

fn fmod(cx: &mut Cx) -> Result<()> {
    let x = cx.operand("self")?;
    let y = cx.operand("other")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.operand_as(&x, c)?;
    let ys = cx.operand_as(&y, c)?;
    let r = cx.node("Mod", &[&xs, &ys], vec![attr_int("fmod", 1)]);
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

fn pow(cx: &mut Cx) -> Result<()> {
    let x = cx.operand("self")?;
    let e = cx.operand("exponent")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.operand_as(&x, c)?;
    let r = match e {
        // x**2 as a product is exact where Pow may not be.
        Operand::Lit(l) if l.as_f64() == 2.0 => cx.node("Mul", &[&xs, &xs], vec![]),
        Operand::Lit(l) if l.as_f64() == 1.0 => xs,
        Operand::Lit(l) if l.as_f64() == 0.5 && c.is_floating() => cx.node("Sqrt", &[&xs], vec![]),
        _ => {
            let es = cx.operand_as(&e, c)?;
            cx.node("Pow", &[&xs, &es], vec![])
        }
    };
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

fn compare(cx: &mut Cx, op: &str, negate: bool) -> Result<()> {
    let x = cx.operand("self")?;
    let y = cx.operand("other")?;
    let c = cx.compute(promote(&[&x, &y]));
    // ONNX's order comparisons take no bools.
    let c = if c == Dtype::Bool && op != "Equal" {
        Dtype::Int32
    } else {
        c
    };
    let xs = cx.operand_as(&x, c)?;
    let ys = cx.operand_as(&y, c)?;
    let mut r = cx.node(op, &[&xs, &ys], vec![]);
    if negate {
        r = cx.node("Not", &[&r], vec![]);
    }
    cx.set(0, r);
    Ok(())
}

fn logical(cx: &mut Cx, op: &str) -> Result<()> {
    let x = cx.operand("self")?;
    let y = cx.operand("other")?;
    let xs = cx.operand_as(&x, Dtype::Bool)?;
    let ys = cx.operand_as(&y, Dtype::Bool)?;
    let r = cx.node(op, &[&xs, &ys], vec![]);
    let out = cx.out_dtype(0)?;
    let r = cx.cast(&r, Dtype::Bool, out)?;
    cx.set(0, r);
    Ok(())
}

fn bitwise(cx: &mut Cx, bool_op: &str, int_op: &str) -> Result<()> {
    let out = cx.out_dtype(0)?;
    if out == Dtype::Bool {
        return logical(cx, bool_op);
    }
    if cx.opset() < 18 {
        return Err(Error::unsupported(format!(
            "{int_op} on integers needs opset 18"
        )));
    }
    arith(cx, int_op, "self", "other")
}

fn where_(cx: &mut Cx) -> Result<()> {
    let cond = cx.operand("condition")?;
    let x = cx.operand("self")?;
    let y = cx.operand("other")?;
    where_op(cx, &cond, &x, &y)
}

fn where_op(cx: &mut Cx, cond: &Operand, x: &Operand, y: &Operand) -> Result<()> {
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let cs = cx.operand_as(cond, Dtype::Bool)?;
    let xs = cx.operand_as(x, c)?;
    let ys = cx.operand_as(y, c)?;
    let r = cx.node("Where", &[&cs, &xs, &ys], vec![]);
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

fn masked_fill(cx: &mut Cx) -> Result<()> {
    let x = cx.operand("self")?;
    let mask = cx.operand("mask")?;
    let value = cx.operand("value")?;
    where_op(cx, &mask, &value, &x)
}

/// self + value * tensor1 * tensor2
fn addcmul(cx: &mut Cx) -> Result<()> {
    let x = cx.operand("self")?;
    let a = cx.operand("tensor1")?;
    let b = cx.operand("tensor2")?;
    let value = lit(cx, "value")?.unwrap_or(Lit::Int(1));
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let (xs, as_, bs) = (
        cx.operand_as(&x, c)?,
        cx.operand_as(&a, c)?,
        cx.operand_as(&b, c)?,
    );
    let mut p = cx.node("Mul", &[&as_, &bs], vec![]);
    if value.as_f64() != 1.0 {
        let k = cx.scalar(value, c)?;
        p = cx.node("Mul", &[&p, &k], vec![]);
    }
    let r = cx.node("Add", &[&xs, &p], vec![]);
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

// ---------------------------------------------------------------------------
// linear algebra

fn matmul(cx: &mut Cx, a: &str, b: &str) -> Result<()> {
    let x = cx.operand(a)?;
    let y = cx.operand(b)?;
    binary_op(cx, "MatMul", &x, &y)
}

/// beta * self + alpha * (mat1 @ mat2), as Gemm where ONNX Runtime has it.
fn addmm(cx: &mut Cx) -> Result<()> {
    let bias = cx.operand("self")?;
    let m1 = cx.operand("mat1")?;
    let m2 = cx.operand("mat2")?;
    let beta = lit(cx, "beta")?.unwrap_or(Lit::Int(1)).as_f64();
    let alpha = lit(cx, "alpha")?.unwrap_or(Lit::Int(1)).as_f64();
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let (a, b) = (cx.operand_as(&m1, c)?, cx.operand_as(&m2, c)?);
    let r = if matches!(c, Dtype::Float32 | Dtype::Float64 | Dtype::Float16) {
        let mut attrs = Vec::new();
        if alpha != 1.0 {
            attrs.push(attr_float("alpha", alpha));
        }
        if beta != 1.0 {
            attrs.push(attr_float("beta", beta));
        }
        if beta == 0.0 {
            cx.node("Gemm", &[&a, &b], attrs)
        } else {
            let bias = cx.operand_as(&bias, c)?;
            cx.node("Gemm", &[&a, &b, &bias], attrs)
        }
    } else {
        scaled_matmul_add(cx, &a, &b, &bias, alpha, beta, c)?
    };
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

/// `beta * bias + alpha * (a @ b)` (addmm / baddbmm forms), in dtype `c`.
fn scaled_matmul_add(
    cx: &mut Cx,
    a: &str,
    b: &str,
    bias: &Operand,
    alpha: f64,
    beta: f64,
    c: Dtype,
) -> Result<String> {
    let mut p = cx.node("MatMul", &[a, b], vec![]);
    if alpha != 1.0 {
        let k = cx.scalar(Lit::Float(alpha), c)?;
        p = cx.node("Mul", &[&p, &k], vec![]);
    }
    if beta != 0.0 {
        let mut s = cx.operand_as(bias, c)?;
        if beta != 1.0 {
            let k = cx.scalar(Lit::Float(beta), c)?;
            s = cx.node("Mul", &[&s, &k], vec![]);
        }
        p = cx.node("Add", &[&p, &s], vec![]);
    }
    Ok(p)
}

fn baddbmm(cx: &mut Cx) -> Result<()> {
    let bias = cx.operand("self")?;
    let b1 = cx.operand("batch1")?;
    let b2 = cx.operand("batch2")?;
    let beta = lit(cx, "beta")?.unwrap_or(Lit::Int(1)).as_f64();
    let alpha = lit(cx, "alpha")?.unwrap_or(Lit::Int(1)).as_f64();
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let (a, b) = (cx.operand_as(&b1, c)?, cx.operand_as(&b2, c)?);
    let p = scaled_matmul_add(cx, &a, &b, &bias, alpha, beta, c)?;
    let r = cx.cast(&p, c, out)?;
    cx.set(0, r);
    Ok(())
}

/// input @ weight.T + bias: Gemm for 2-D inputs, MatMul otherwise.
fn linear(cx: &mut Cx) -> Result<()> {
    let x = cx.input("input")?;
    let xd = cx.dtype("input")?;
    let w = cx.input("weight")?;
    let wd = cx.dtype("weight")?;
    let rank = cx.rank("input")?;
    let w_rank = cx.rank("weight")?;
    let bias = cx.opt_input("bias")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, xd, c)?;
    let ws = cx.cast(&w, wd, c)?;
    let bs = match &bias {
        Some(b) => {
            let bd = cx.dtype("bias")?;
            Some(cx.cast(b, bd, c)?)
        }
        None => None,
    };
    let r = if rank == 2
        && w_rank == 2
        && matches!(c, Dtype::Float32 | Dtype::Float64 | Dtype::Float16)
    {
        let attrs = vec![attr_int("transB", 1)];
        match &bs {
            Some(b) => cx.node("Gemm", &[&xs, &ws, b], attrs),
            None => cx.node("Gemm", &[&xs, &ws], attrs),
        }
    } else {
        let wt = if w_rank == 2 {
            cx.transpose(&ws, &[1, 0])
        } else {
            ws
        };
        let p = cx.node("MatMul", &[&xs, &wt], vec![]);
        match &bs {
            Some(b) => cx.node("Add", &[&p, b], vec![]),
            None => p,
        }
    };
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

/// A per-spatial-dim list argument, repeating a single value.
fn spatial(cx: &Cx, name: &str, n: usize, default: i64) -> Result<Vec<i64>> {
    let v = cx.opt_ints(name)?.unwrap_or_default();
    Ok(match v.len() {
        0 => vec![default; n],
        1 => vec![v[0]; n],
        _ => v,
    })
}

/// Adds a batch dim to an unbatched input (torch allows them), returning
/// whether it did.
fn batch(cx: &mut Cx, x: &str, rank: usize, spatial_dims: usize) -> (String, bool) {
    if rank == spatial_dims + 1 {
        (cx.unsqueeze(x, &[0]), true)
    } else {
        (x.to_string(), false)
    }
}

fn unbatch(cx: &mut Cx, y: String, added: bool) -> String {
    if added {
        cx.squeeze(&y, &[0])
    } else {
        y
    }
}

fn convolution(cx: &mut Cx) -> Result<()> {
    let transposed = cx.node.target.name == "convolution" && cx.bool("transposed")?;
    let x = cx.input("input")?;
    let xd = cx.dtype("input")?;
    let rank = cx.rank("input")?;
    let w = cx.input("weight")?;
    let wd = cx.dtype("weight")?;
    let n = cx.rank("weight")?.saturating_sub(2);
    let bias = cx.opt_input("bias")?;
    let stride = spatial(cx, "stride", n, 1)?;
    let dilation = spatial(cx, "dilation", n, 1)?;
    let groups = cx.opt_int("groups")?.unwrap_or(1);
    let mut attrs = vec![
        attr_ints("strides", &stride),
        attr_ints("dilations", &dilation),
        attr_int("group", groups),
    ];
    match cx.arg("padding")? {
        Argument::String(mode) => match mode.as_str() {
            "valid" => attrs.push(attr_ints("pads", &vec![0; 2 * n])),
            // torch pads the extra element at the end, like SAME_UPPER.
            "same" => attrs.push(attr_str("auto_pad", "SAME_UPPER")),
            other => return Err(Error::unsupported(format!("padding={other:?}"))),
        },
        _ => {
            let p = spatial(cx, "padding", n, 0)?;
            attrs.push(attr_ints("pads", &[p.clone(), p].concat()));
        }
    }
    let op = if transposed {
        let op = spatial(cx, "output_padding", n, 0)?;
        if op.iter().any(|v| *v != 0) {
            attrs.push(attr_ints("output_padding", &op));
        }
        "ConvTranspose"
    } else {
        "Conv"
    };
    conv_node(cx, op, (&x, xd, rank), (&w, wd), bias, n, attrs)
}

fn conv_node(
    cx: &mut Cx,
    op: &str,
    (x, xd, rank): (&str, Dtype, usize),
    (w, wd): (&str, Dtype),
    bias: Option<String>,
    n: usize,
    attrs: Vec<onnx_protobuf::AttributeProto>,
) -> Result<()> {
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(x, xd, c)?;
    let ws = cx.cast(w, wd, c)?;
    let (xs, added) = batch(cx, &xs, rank, n);
    let y = match bias {
        Some(b) => {
            let bd = cx.dtype("bias")?;
            let bs = cx.cast(&b, bd, c)?;
            cx.node(op, &[&xs, &ws, &bs], attrs)
        }
        None => cx.node(op, &[&xs, &ws], attrs),
    };
    let y = unbatch(cx, y, added);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

fn conv_transpose(cx: &mut Cx) -> Result<()> {
    let x = cx.input("input")?;
    let xd = cx.dtype("input")?;
    let rank = cx.rank("input")?;
    let w = cx.input("weight")?;
    let wd = cx.dtype("weight")?;
    let n = cx.rank("weight")?.saturating_sub(2);
    let bias = cx.opt_input("bias")?;
    let stride = spatial(cx, "stride", n, 1)?;
    let dilation = spatial(cx, "dilation", n, 1)?;
    let padding = spatial(cx, "padding", n, 0)?;
    let output_padding = spatial(cx, "output_padding", n, 0)?;
    let groups = cx.opt_int("groups")?.unwrap_or(1);
    let mut attrs = vec![
        attr_ints("strides", &stride),
        attr_ints("dilations", &dilation),
        attr_int("group", groups),
        attr_ints("pads", &[padding.clone(), padding].concat()),
    ];
    if output_padding.iter().any(|v| *v != 0) {
        attrs.push(attr_ints("output_padding", &output_padding));
    }
    conv_node(
        cx,
        "ConvTranspose",
        (&x, xd, rank),
        (&w, wd),
        bias,
        n,
        attrs,
    )
}

/// softmax(q kᵀ · scale + mask) v, with the causal mask built from Trilu.
fn sdpa(cx: &mut Cx) -> Result<()> {
    if cx.opt_bool("enable_gqa")?.unwrap_or(false) {
        let hq = cx.meta("query")?.sizes.iter().rev().nth(2).cloned();
        let hk = cx.meta("key")?.sizes.iter().rev().nth(2).cloned();
        if hq != hk {
            return Err(Error::unsupported(
                "grouped-query attention (enable_gqa with fewer key heads)",
            ));
        }
    }
    let q = cx.input("query")?;
    let k = cx.input("key")?;
    let v = cx.input("value")?;
    let qm = cx.meta("query")?;
    let km = cx.meta("key")?;
    let vd = cx.dtype("value")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let rank = km.sizes.len();
    if rank < 2 {
        return Err(Error::bad_input("attention inputs need at least 2 dims"));
    }
    let scale = match cx.opt_float("scale")? {
        Some(s) => Lit::Float(s),
        None => match qm.sizes.last().and_then(Sym::as_int) {
            Some(e) => Lit::Float(1.0 / (e as f64).sqrt()),
            None => {
                return Err(Error::unsupported(
                    "attention with a symbolic head size and no scale",
                ))
            }
        },
    };
    let qs = cx.cast(&q, qm.dtype, c)?;
    let ks = cx.cast(&k, km.dtype, c)?;
    let vs = cx.cast(&v, vd, c)?;
    let mut perm: Vec<i64> = (0..rank as i64).collect();
    perm.swap(rank - 1, rank - 2);
    let kt = cx.transpose(&ks, &perm);
    let scores = cx.node("MatMul", &[&qs, &kt], vec![]);
    let s = cx.scalar(scale, c)?;
    let mut scores = cx.node("Mul", &[&scores, &s], vec![]);
    if cx.opt_bool("is_causal")?.unwrap_or(false) {
        // Row i sees columns <= i: lower triangle of an L x S matrix of ones.
        let l = qm.sizes[qm.sizes.len() - 2].clone();
        let src = km.sizes[rank - 2].clone();
        let ls = cx.sizes(&[l, src])?;
        let ones = constant_of_shape(cx, &ls, Lit::Bool(true), Dtype::Bool)?;
        let zero = cx.const_i64(0);
        let mask = cx.node("Trilu", &[&ones, &zero], vec![attr_int("upper", 0)]);
        let ninf = cx.scalar(Lit::Float(f64::NEG_INFINITY), c)?;
        scores = cx.node("Where", &[&mask, &scores, &ninf], vec![]);
    }
    if let Some(mask) = cx.opt_input("attn_mask")? {
        let md = cx.dtype("attn_mask")?;
        if md == Dtype::Bool {
            let ninf = cx.scalar(Lit::Float(f64::NEG_INFINITY), c)?;
            scores = cx.node("Where", &[&mask, &scores, &ninf], vec![]);
        } else {
            let m = cx.cast(&mask, md, c)?;
            scores = cx.node("Add", &[&scores, &m], vec![]);
        }
    }
    let attn = cx.node("Softmax", &[&scores], vec![attr_int("axis", -1)]);
    let y = cx.node("MatMul", &[&attn, &vs], vec![]);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

// ---------------------------------------------------------------------------
// normalization

/// A per-channel parameter, or a constant of ones/zeros when absent.
fn param_or(cx: &mut Cx, name: &str, fill: f64, channels: &Sym, dtype: Dtype) -> Result<String> {
    match cx.opt_input(name)? {
        Some(p) => {
            let pd = cx.dtype(name)?;
            cx.cast(&p, pd, dtype)
        }
        None => {
            let n = channels.as_int().ok_or_else(|| {
                Error::unsupported(format!(
                    "'{name}' is absent and the channel count is symbolic"
                ))
            })?;
            cx.filled(Lit::Float(fill), dtype, &[n])
        }
    }
}

fn batch_norm(cx: &mut Cx) -> Result<()> {
    let training = match cx.node.target.name.as_str() {
        "_native_batch_norm_legit_no_training" => false,
        _ => cx.opt_bool("training")?.unwrap_or(false),
    };
    if training || cx.node.target.overload == "no_stats" {
        return batch_norm_batch_stats(cx);
    }
    let x = cx.input("input")?;
    let meta = cx.meta("input")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let channels = meta
        .sizes
        .get(1)
        .cloned()
        .ok_or_else(|| Error::bad_input("batch norm of a tensor with fewer than 2 dims"))?;
    let eps = cx.opt_float("eps")?.unwrap_or(1e-5);
    let momentum = cx.opt_float("momentum")?.unwrap_or(0.1);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let scale = param_or(cx, "weight", 1.0, &channels, c)?;
    let bias = param_or(cx, "bias", 0.0, &channels, c)?;
    let mean = param_or(cx, "running_mean", 0.0, &channels, c)?;
    let var = param_or(cx, "running_var", 1.0, &channels, c)?;
    let y = cx.node(
        "BatchNormalization",
        &[&xs, &scale, &bias, &mean, &var],
        vec![
            attr_float("epsilon", eps),
            attr_float("momentum", 1.0 - momentum),
        ],
    );
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    // The saved statistics of an inference batch norm are empty tensors;
    // the running stats pass through unchanged.
    for i in 1..cx.out_count() {
        if !cx.out_used(i) {
            continue;
        }
        let m = cx.out_meta(i)?;
        let sizes = m
            .static_sizes()
            .ok_or_else(|| Error::unsupported("batch norm statistics with symbolic sizes"))?;
        let numel: i64 = sizes.iter().product();
        let y = match (i, numel) {
            (_, 0) => cx.filled(Lit::Int(0), m.dtype, &sizes)?,
            (3, _) => mean.clone(),
            (4, _) => var.clone(),
            _ => return Err(Error::unsupported("batch norm statistics outputs")),
        };
        cx.set(i, y);
    }
    Ok(())
}

fn layer_norm(cx: &mut Cx) -> Result<()> {
    let x = cx.input("input")?;
    let meta = cx.meta("input")?;
    let shape = cx.ints("normalized_shape")?;
    let eps = cx.opt_float("eps")?.unwrap_or(1e-5);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let dims = shape.clone();
    let scale = match cx.opt_input("weight")? {
        Some(w) => {
            let wd = cx.dtype("weight")?;
            cx.cast(&w, wd, c)?
        }
        None => cx.filled(Lit::Float(1.0), c, &dims)?,
    };
    let mut inputs = vec![xs, scale];
    if let Some(b) = cx.opt_input("bias")? {
        let bd = cx.dtype("bias")?;
        inputs.push(cx.cast(&b, bd, c)?);
    }
    let want = (1..cx.out_count())
        .filter(|i| cx.out_used(*i))
        .max()
        .unwrap_or(0);
    let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let ys = cx.node_n(
        "LayerNormalization",
        &refs,
        vec![
            attr_int("axis", -(shape.len() as i64)),
            attr_float("epsilon", eps),
        ],
        want + 1,
    );
    let y = cx.cast(&ys[0], c, out)?;
    cx.set(0, y);
    // Mean and inverse std dev, computed in float32 (stash_type 1).
    for (i, name) in ys.iter().enumerate().skip(1) {
        let d = cx.out_dtype(i)?;
        let s = cx.cast(name, Dtype::Float32, d)?;
        cx.set(i, s);
    }
    Ok(())
}

/// Group norm: normalize [N, G, -1], then the per-channel affine.
fn group_norm(cx: &mut Cx) -> Result<()> {
    let x = cx.input("input")?;
    let meta = cx.meta("input")?;
    let groups = if cx.node.target.name == "native_group_norm" {
        cx.int("group")?
    } else {
        cx.int("num_groups")?
    };
    let eps = cx.opt_float("eps")?.unwrap_or(1e-5);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let rank = meta.sizes.len();
    let channels = meta
        .sizes
        .get(1)
        .cloned()
        .ok_or_else(|| Error::bad_input("group norm of a 1-D tensor"))?;
    let xs = cx.cast(&x, meta.dtype, c)?;
    let n = meta.sizes[0].clone();
    let grouped_shape = cx.sizes(&[n, Sym::Int(groups), Sym::Int(-1)])?;
    let g = cx.node("Reshape", &[&xs, &grouped_shape], vec![]);
    let mean = cx.reduce("ReduceMean", &g, Some(&[2]), true);
    let d = cx.node("Sub", &[&g, &mean], vec![]);
    let d2 = cx.node("Mul", &[&d, &d], vec![]);
    let var = cx.reduce("ReduceMean", &d2, Some(&[2]), true);
    let e = cx.scalar(Lit::Float(eps), c)?;
    let ve = cx.node("Add", &[&var, &e], vec![]);
    let sd = cx.node("Sqrt", &[&ve], vec![]);
    let norm = cx.node("Div", &[&d, &sd], vec![]);
    let full_shape = cx.shape(&xs);
    let mut y = cx.node("Reshape", &[&norm, &full_shape], vec![]);
    let affine_shape: Vec<i64> = std::iter::once(-1).chain(vec![1; rank - 2]).collect();
    if cx.has("weight") {
        let w = param_or(cx, "weight", 1.0, &channels, c)?;
        let w = cx.reshape_const(&w, &affine_shape)?;
        y = cx.node("Mul", &[&y, &w], vec![]);
    }
    if cx.has("bias") {
        let b = param_or(cx, "bias", 0.0, &channels, c)?;
        let b = cx.reshape_const(&b, &affine_shape)?;
        y = cx.node("Add", &[&y, &b], vec![]);
    }
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    if cx.out_used(1) || cx.out_used(2) {
        let m = cx.squeeze(&mean, &[2]);
        let md = cx.out_dtype(1)?;
        let m = cx.cast(&m, c, md)?;
        cx.set(1, m);
        let r = cx.node("Reciprocal", &[&sd], vec![]);
        let r = cx.squeeze(&r, &[2]);
        let r = cx.cast(&r, c, md)?;
        cx.set(2, r);
    }
    Ok(())
}

/// x / sqrt(mean(x², normalized dims) + eps) * weight
fn rms_norm(cx: &mut Cx) -> Result<()> {
    let x = cx.input("input")?;
    let meta = cx.meta("input")?;
    let shape = cx.ints("normalized_shape")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let eps = match cx.opt_float("eps")? {
        Some(e) => e,
        // torch uses the dtype's machine epsilon.
        None => match c {
            Dtype::Float64 => f64::EPSILON,
            Dtype::Float16 => 0.0009765625,
            _ => f32::EPSILON as f64,
        },
    };
    let rank = meta.sizes.len() as i64;
    let axes: Vec<i64> = (rank - shape.len() as i64..rank).collect();
    let xs = cx.cast(&x, meta.dtype, c)?;
    let sq = cx.node("Mul", &[&xs, &xs], vec![]);
    let ms = cx.reduce("ReduceMean", &sq, Some(&axes), true);
    let e = cx.scalar(Lit::Float(eps), c)?;
    let se = cx.node("Add", &[&ms, &e], vec![]);
    let r = cx.node("Sqrt", &[&se], vec![]);
    let mut y = cx.node("Div", &[&xs, &r], vec![]);
    if let Some(w) = cx.opt_input("weight")? {
        let wd = cx.dtype("weight")?;
        let ws = cx.cast(&w, wd, c)?;
        y = cx.node("Mul", &[&y, &ws], vec![]);
    }
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

fn softmax(cx: &mut Cx, op: &str) -> Result<()> {
    let (x, meta) = first(cx)?;
    let dim = norm_dim(cx.int("dim")?, meta.sizes.len());
    if meta.sizes.is_empty() {
        let y = if op == "Softmax" {
            let out = cx.out_dtype(0)?;
            cx.scalar(Lit::Float(1.0), out)?
        } else {
            let out = cx.out_dtype(0)?;
            cx.scalar(Lit::Float(0.0), out)?
        };
        cx.set(0, y);
        return Ok(());
    }
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        Ok(cx.node(op, &[x], vec![attr_int("axis", dim)]))
    })
}

// ---------------------------------------------------------------------------
// pooling

/// A pooling op's spatial rank, kernel and stride (a single value or an
/// empty stride expanded as torch does).
fn pool_window(cx: &Cx) -> Result<(usize, Vec<i64>, Vec<i64>)> {
    let kernel = cx.ints("kernel_size")?;
    let n = if kernel.len() > 1 {
        kernel.len()
    } else {
        match cx.node.target.name.as_str() {
            n if n.contains("1d") => 1,
            n if n.contains("3d") => 3,
            _ => 2,
        }
    };
    let kernel = if kernel.len() == 1 {
        vec![kernel[0]; n]
    } else {
        kernel
    };
    let mut stride = cx.opt_ints("stride")?.unwrap_or_default();
    if stride.is_empty() {
        stride = kernel.clone();
    } else if stride.len() == 1 {
        stride = vec![stride[0]; n];
    }
    Ok((n, kernel, stride))
}

fn max_pool(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let (n, kernel, stride) = pool_window(cx)?;
    let padding = spatial(cx, "padding", n, 0)?;
    let dilation = spatial(cx, "dilation", n, 1)?;
    let ceil = cx.opt_bool("ceil_mode")?.unwrap_or(false);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let (xs, added) = batch(cx, &xs, meta.sizes.len(), n);
    let attrs = vec![
        attr_ints("kernel_shape", &kernel),
        attr_ints("strides", &stride),
        attr_ints("pads", &[padding.clone(), padding].concat()),
        attr_ints("dilations", &dilation),
        attr_int("ceil_mode", ceil as i64),
    ];
    let want_indices = cx.out_count() > 1 && cx.out_used(1);
    let ys = cx.node_n("MaxPool", &[&xs], attrs, if want_indices { 2 } else { 1 });
    let y = unbatch(cx, ys[0].clone(), added);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    if want_indices {
        // ONNX indexes the whole tensor, torch each channel's plane.
        let plane: Vec<Sym> = meta.sizes[meta.sizes.len() - n..].to_vec();
        let plane_shape = cx.sizes(&plane)?;
        let numel = cx.reduce("ReduceProd", &plane_shape, None, false);
        let idx = cx.node("Mod", &[&ys[1], &numel], vec![attr_int("fmod", 0)]);
        let idx = unbatch(cx, idx, added);
        cx.set(1, idx);
    }
    Ok(())
}

fn avg_pool(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let (n, kernel, stride) = pool_window(cx)?;
    let padding = spatial(cx, "padding", n, 0)?;
    let ceil = cx.opt_bool("ceil_mode")?.unwrap_or(false);
    let include_pad = cx.opt_bool("count_include_pad")?.unwrap_or(true);
    if cx.has("divisor_override") {
        return Err(Error::unsupported("avg_pool with divisor_override"));
    }
    let attrs = vec![
        attr_ints("kernel_shape", &kernel),
        attr_ints("strides", &stride),
        attr_ints("pads", &[padding.clone(), padding].concat()),
        attr_int("ceil_mode", ceil as i64),
        attr_int("count_include_pad", include_pad as i64),
    ];
    let rank = meta.sizes.len();
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let (xs, added) = batch(cx, x, rank, n);
        let y = cx.node("AveragePool", &[&xs], attrs);
        Ok(unbatch(cx, y, added))
    })
}

/// Global pooling for output size 1, a plain pool when the input divides
/// evenly, otherwise unsupported.
fn adaptive_avg_pool(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let output = cx.ints("output_size")?;
    let n = output.len();
    let rank = meta.sizes.len();
    let input: Option<Vec<i64>> = meta.sizes[rank - n..].iter().map(Sym::as_int).collect();
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let (xs, added) = batch(cx, x, rank, n);
        let y = if output.iter().all(|o| *o == 1) {
            cx.node("GlobalAveragePool", &[&xs], vec![])
        } else {
            let input = input
                .clone()
                .ok_or_else(|| Error::unsupported("adaptive pooling of symbolic spatial sizes"))?;
            if input
                .iter()
                .zip(&output)
                .any(|(i, o)| *o == 0 || i % o != 0)
            {
                return Err(Error::unsupported(format!(
                    "adaptive pooling of {input:?} to {output:?} (sizes that do not divide)"
                )));
            }
            let k: Vec<i64> = input.iter().zip(&output).map(|(i, o)| i / o).collect();
            cx.node(
                "AveragePool",
                &[&xs],
                vec![attr_ints("kernel_shape", &k), attr_ints("strides", &k)],
            )
        };
        Ok(unbatch(cx, y, added))
    })
}

// ---------------------------------------------------------------------------
// reductions

/// The reduced dims of a `dim` argument (`None`: all).
fn reduce_dims(cx: &Cx, dim_arg: Option<&str>, rank: usize) -> Result<Option<Vec<i64>>> {
    let Some(name) = dim_arg else { return Ok(None) };
    let dims = cx.opt_ints(name)?;
    Ok(dims.filter(|d| !d.is_empty()).map(|d| {
        if rank == 0 {
            return Vec::new();
        }
        d.iter().map(|x| norm_dim(*x, rank)).collect()
    }))
}

fn reduce(cx: &mut Cx, op: &str, dim_arg: Option<&str>) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dims = reduce_dims(cx, dim_arg, rank)?;
    let keepdim = cx.opt_bool("keepdim")?.unwrap_or(false);
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        if rank == 0 {
            return Ok(x.to_string());
        }
        Ok(cx.reduce(op, x, dims.as_deref(), keepdim))
    })
}

/// any/all: a max/min over the values as 0/1.
fn any_all(cx: &mut Cx, op: &str) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dims = match cx.node.arg("dim") {
        None | Some(Argument::None) => None,
        Some(_) => reduce_dims(cx, Some("dim"), rank)?,
    };
    let keepdim = cx.opt_bool("keepdim")?.unwrap_or(false);
    let b = cx.cast(&x, meta.dtype, Dtype::Bool)?;
    let i = cx.cast(&b, Dtype::Bool, Dtype::Int32)?;
    let r = if rank == 0 {
        i
    } else {
        cx.reduce(op, &i, dims.as_deref(), keepdim)
    };
    let y = cx.cast(&r, Dtype::Int32, Dtype::Bool)?;
    let out = cx.out_dtype(0)?;
    let y = cx.cast(&y, Dtype::Bool, out)?;
    cx.set(0, y);
    Ok(())
}

/// var/std with Bessel's `correction`: sum((x - mean)²) / (N - correction).
fn var_std(cx: &mut Cx, sqrt: bool) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dims = reduce_dims(cx, Some("dim"), rank)?;
    let keepdim = cx.opt_bool("keepdim")?.unwrap_or(false);
    let correction = match cx.opt_bool("unbiased")? {
        Some(unbiased) => unbiased as i64 as f64,
        None => lit(cx, "correction")?.map_or(1.0, Lit::as_f64),
    };
    let all: Vec<i64> = (0..rank as i64).collect();
    let axes = dims.clone().unwrap_or(all);
    let count: Vec<Sym> = axes
        .iter()
        .map(|a| meta.sizes[*a as usize].clone())
        .collect();
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let mean = cx.reduce("ReduceMean", x, Some(&axes), true);
        let d = cx.node("Sub", &[x, &mean], vec![]);
        let d2 = cx.node("Mul", &[&d, &d], vec![]);
        let s = cx.reduce("ReduceSum", &d2, Some(&axes), keepdim);
        let n = match count.iter().map(Sym::as_int).collect::<Option<Vec<i64>>>() {
            Some(v) => cx.scalar(Lit::Float(v.iter().product::<i64>() as f64 - correction), c)?,
            None => {
                let sizes = cx.sizes(&count)?;
                let p = cx.reduce("ReduceProd", &sizes, None, false);
                let pf = cx.cast(&p, Dtype::Int64, c)?;
                let k = cx.scalar(Lit::Float(correction), c)?;
                cx.node("Sub", &[&pf, &k], vec![])
            }
        };
        let v = cx.node("Div", &[&s, &n], vec![]);
        Ok(if sqrt {
            cx.node("Sqrt", &[&v], vec![])
        } else {
            v
        })
    })
}

fn max_min_dim(cx: &mut Cx, reduce_op: &str, arg_op: &str) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dim = norm_dim(cx.int("dim")?, rank);
    let keepdim = cx.opt_bool("keepdim")?.unwrap_or(false);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let v = cx.reduce(reduce_op, &xs, Some(&[dim]), keepdim);
    let v = cx.cast(&v, c, out)?;
    cx.set(0, v);
    if cx.out_used(1) {
        let i = cx.node(
            arg_op,
            &[&xs],
            vec![attr_int("axis", dim), attr_int("keepdims", keepdim as i64)],
        );
        cx.set(1, i);
    }
    Ok(())
}

fn arg_max_min(cx: &mut Cx, op: &str) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let keepdim = cx.opt_bool("keepdim")?.unwrap_or(false);
    let c = cx.compute(meta.dtype);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let y = match cx.opt_int("dim")? {
        Some(d) => cx.node(
            op,
            &[&xs],
            vec![
                attr_int("axis", norm_dim(d, rank)),
                attr_int("keepdims", keepdim as i64),
            ],
        ),
        None => {
            let flat = cx.reshape_const(&xs, &[-1])?;
            let i = cx.node(
                op,
                &[&flat],
                vec![attr_int("axis", 0), attr_int("keepdims", 0)],
            );
            if keepdim {
                cx.reshape_const(&i, &vec![1; rank])?
            } else {
                i
            }
        }
    };
    cx.set(0, y);
    Ok(())
}

fn cumsum(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let dim = norm_dim(cx.int("dim")?, meta.sizes.len());
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let axis = cx.const_i64(dim);
        Ok(cx.node("CumSum", &[x, &axis], vec![]))
    })
}

fn topk(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dim = norm_dim(cx.opt_int("dim")?.unwrap_or(-1), rank);
    let largest = cx.opt_bool("largest")?.unwrap_or(true);
    let sorted = cx.opt_bool("sorted")?.unwrap_or(true);
    let k = match cx.arg("k")? {
        Argument::SymInt(r) => *r,
        Argument::Int(v) => SymRef::Int(*v),
        other => return Err(Error::bad_input(format!("topk k: {other:?}"))),
    };
    let k = cx.sym_int(&k)?;
    let k = cx.reshape_const(&k, &[1])?;
    topk_node(cx, &x, meta.dtype, &k, dim, largest, sorted)
}

fn topk_node(
    cx: &mut Cx,
    x: &str,
    from: Dtype,
    k: &str,
    axis: i64,
    largest: bool,
    sorted: bool,
) -> Result<()> {
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(x, from, c)?;
    let ys = cx.node_n(
        "TopK",
        &[&xs, k],
        vec![
            attr_int("axis", axis),
            attr_int("largest", largest as i64),
            attr_int("sorted", sorted as i64),
        ],
        2,
    );
    let v = cx.cast(&ys[0], c, out)?;
    cx.set(0, v);
    cx.set(1, ys[1].clone());
    Ok(())
}

/// sort as a TopK over the whole dim (ties may order differently).
fn sort(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dim = norm_dim(cx.opt_int("dim")?.unwrap_or(-1), rank);
    let descending = cx.opt_bool("descending")?.unwrap_or(false);
    let size = cx.sym_size(&meta.sizes[dim as usize])?;
    let k = cx.reshape_const(&size, &[1])?;
    if cx.node.target.name == "argsort" {
        let c = cx.compute(meta.dtype);
        let xs = cx.cast(&x, meta.dtype, c)?;
        let ys = cx.node_n(
            "TopK",
            &[&xs, &k],
            vec![
                attr_int("axis", dim),
                attr_int("largest", descending as i64),
                attr_int("sorted", 1),
            ],
            2,
        );
        cx.set(0, ys[1].clone());
        return Ok(());
    }
    topk_node(cx, &x, meta.dtype, &k, dim, descending, true)
}

// ---------------------------------------------------------------------------
// shape and layout

fn reshape(cx: &mut Cx, arg: &str) -> Result<()> {
    let (x, _) = first(cx)?;
    let zero = matches!(cx.arg(arg)?, Argument::Ints(v) if v.contains(&0))
        || matches!(cx.arg(arg)?, Argument::SymInts(v) if v.contains(&SymRef::Int(0)));
    let shape = cx.int_list(arg)?;
    let attrs = if zero {
        vec![attr_int("allowzero", 1)]
    } else {
        vec![]
    };
    let y = cx.node("Reshape", &[&x, &shape], attrs);
    cx.set(0, y);
    Ok(())
}

fn view_as(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let other = cx.input("other")?;
    let shape = cx.shape(&other);
    let y = cx.node("Reshape", &[&x, &shape], vec![]);
    cx.set(0, y);
    Ok(())
}

/// Reshapes to the output's recorded sizes (flatten, unflatten).
fn reshape_to_output(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let sizes = cx.out_meta(0)?.sizes.clone();
    if sizes == meta.sizes {
        cx.set(0, x);
        return Ok(());
    }
    let y = cx.reshape_to(&x, &sizes)?;
    cx.set(0, y);
    Ok(())
}

fn permute(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let perm: Vec<i64> = cx
        .ints("dims")?
        .iter()
        .map(|d| norm_dim(*d, rank))
        .collect();
    if perm.iter().enumerate().all(|(i, p)| *p == i as i64) {
        cx.set(0, x);
        return Ok(());
    }
    let y = cx.transpose(&x, &perm);
    cx.set(0, y);
    Ok(())
}

fn transpose(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let (a, b) = if cx.node.target.name == "transpose" {
        (
            norm_dim(cx.int("dim0")?, rank),
            norm_dim(cx.int("dim1")?, rank),
        )
    } else if rank < 2 {
        (0, 0)
    } else {
        (rank as i64 - 2, rank as i64 - 1)
    };
    if a == b || rank < 2 {
        cx.set(0, x);
        return Ok(());
    }
    let mut perm: Vec<i64> = (0..rank as i64).collect();
    if cx.node.target.name == "numpy_T" {
        perm.reverse();
    } else {
        perm.swap(a as usize, b as usize);
    }
    let y = cx.transpose(&x, &perm);
    cx.set(0, y);
    Ok(())
}

/// torch squeezes only dims of size 1; the recorded sizes say which.
fn squeeze(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let candidates: Vec<i64> = match cx.node.arg("dim") {
        None | Some(Argument::None) => (0..rank as i64).collect(),
        Some(_) => cx.ints("dim")?.iter().map(|d| norm_dim(*d, rank)).collect(),
    };
    let axes: Vec<i64> = candidates
        .into_iter()
        .filter(|d| meta.sizes.get(*d as usize).and_then(Sym::as_int) == Some(1))
        .collect();
    if axes.is_empty() || rank == 0 {
        cx.set(0, x);
        return Ok(());
    }
    let y = cx.squeeze(&x, &axes);
    cx.set(0, y);
    Ok(())
}

fn unsqueeze(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let dim = cx.int("dim")?;
    let dim = if dim < 0 {
        dim + meta.sizes.len() as i64 + 1
    } else {
        dim
    };
    let y = cx.unsqueeze(&x, &[dim]);
    cx.set(0, y);
    Ok(())
}

/// Expand with torch's -1 (keep) as ONNX's broadcasting 1.
fn expand(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let out = cx.out_meta(0)?;
    if out.sizes == meta.sizes {
        cx.set(0, x);
        return Ok(());
    }
    let size = match cx.arg("size")? {
        Argument::Ints(v) => v
            .iter()
            .map(|s| SymRef::Int(if *s == -1 { 1 } else { *s }))
            .collect::<Vec<_>>(),
        Argument::SymInts(v) => v
            .iter()
            .map(|s| {
                if *s == SymRef::Int(-1) {
                    SymRef::Int(1)
                } else {
                    *s
                }
            })
            .collect(),
        other => return Err(Error::bad_input(format!("expand size: {other:?}"))),
    };
    let shape = cx.sym_list(&size)?;
    let y = cx.node("Expand", &[&x, &shape], vec![]);
    cx.set(0, y);
    Ok(())
}

fn expand_as(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let other = cx.input("other")?;
    let shape = cx.shape(&other);
    let y = cx.node("Expand", &[&x, &shape], vec![]);
    cx.set(0, y);
    Ok(())
}

fn repeat(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let reps = match cx.arg("repeats")? {
        Argument::Ints(v) => v.iter().map(|r| SymRef::Int(*r)).collect::<Vec<_>>(),
        Argument::SymInts(v) => v.clone(),
        other => return Err(Error::bad_input(format!("repeats: {other:?}"))),
    };
    let rank = meta.sizes.len();
    let x = if reps.len() > rank {
        let axes: Vec<i64> = (0..(reps.len() - rank) as i64).collect();
        cx.unsqueeze(&x, &axes)
    } else {
        x
    };
    let r = cx.sym_list(&reps)?;
    let y = cx.node("Tile", &[&x, &r], vec![]);
    cx.set(0, y);
    Ok(())
}

fn cat(cx: &mut Cx) -> Result<()> {
    let tensors = cx.tensors("tensors")?;
    let out = cx.out_meta(0)?;
    let rank = out.sizes.len();
    let dim = norm_dim(cx.opt_int("dim")?.unwrap_or(0), rank);
    let dtype = out.dtype;
    let mut parts = Vec::new();
    for (name, meta) in tensors {
        // torch skips legacy empty 1-D tensors of another rank.
        if meta.sizes.len() != rank && meta.sizes.len() == 1 && meta.sizes[0].as_int() == Some(0) {
            continue;
        }
        parts.push(cx.cast(&name, meta.dtype, dtype)?);
    }
    let y = match parts.len() {
        0 => return Err(Error::unsupported("cat of nothing but empty tensors")),
        _ => cx.concat(&parts, dim),
    };
    cx.set(0, y);
    Ok(())
}

fn stack(cx: &mut Cx) -> Result<()> {
    let tensors = cx.tensors("tensors")?;
    let out = cx.out_meta(0)?;
    let rank = out.sizes.len();
    let dim = norm_dim(cx.opt_int("dim")?.unwrap_or(0), rank);
    let mut parts = Vec::new();
    for (name, meta) in tensors {
        let c = cx.cast(&name, meta.dtype, out.dtype)?;
        parts.push(cx.unsqueeze(&c, &[dim]));
    }
    let y = cx.concat(&parts, dim);
    cx.set(0, y);
    Ok(())
}

/// split / split_with_sizes / chunk / unbind: one Split with the output
/// sizes the graph recorded.
fn split(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let unbind = cx.node.target.name == "unbind";
    let dim = norm_dim(cx.opt_int("dim")?.unwrap_or(0), rank);
    let n = cx.out_count();
    if n == 0 {
        return Ok(());
    }
    let mut sizes = Vec::with_capacity(n);
    for i in 0..n {
        sizes.push(if unbind {
            Sym::Int(1)
        } else {
            cx.out_meta(i)?.sizes[dim as usize].clone()
        });
    }
    if n == 1 {
        let y = if unbind { cx.squeeze(&x, &[dim]) } else { x };
        cx.set(0, y);
        return Ok(());
    }
    let split = cx.sizes(&sizes)?;
    let ys = cx.node_n("Split", &[&x, &split], vec![attr_int("axis", dim)], n);
    for (i, y) in ys.into_iter().enumerate() {
        let y = if unbind { cx.squeeze(&y, &[dim]) } else { y };
        cx.set(i, y);
    }
    Ok(())
}

/// A 1-element int64 value for an optional symbolic int argument.
fn sym_arg(cx: &mut Cx, name: &str, default: i64) -> Result<String> {
    let r = match cx.node.arg(name) {
        None | Some(Argument::None) => SymRef::Int(default),
        Some(Argument::Int(v)) => SymRef::Int(*v),
        Some(Argument::SymInt(r)) => *r,
        Some(other) => return Err(Error::bad_input(format!("argument '{name}': {other:?}"))),
    };
    match r {
        SymRef::Int(v) => Ok(cx.const_i64s(&[v])),
        other => {
            let s = cx.sym_int(&other)?;
            cx.reshape_const(&s, &[1])
        }
    }
}

fn slice(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dim = norm_dim(cx.opt_int("dim")?.unwrap_or(0), rank);
    let out = cx.out_meta(0)?;
    if out.sizes == meta.sizes {
        // A slice of everything.
        cx.set(0, x);
        return Ok(());
    }
    let (start, end, step) = if cx.node.target.name == "narrow" {
        let start = sym_arg(cx, "start", 0)?;
        let length = sym_arg(cx, "length", 0)?;
        let end = cx.node("Add", &[&start, &length], vec![]);
        (start, end, cx.const_i64s(&[1]))
    } else {
        (
            sym_arg(cx, "start", 0)?,
            sym_arg(cx, "end", i64::MAX)?,
            sym_arg(cx, "step", 1)?,
        )
    };
    let axes = cx.const_i64s(&[dim]);
    let y = cx.node("Slice", &[&x, &start, &end, &axes, &step], vec![]);
    cx.set(0, y);
    Ok(())
}

fn select(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dim = norm_dim(cx.int("dim")?, rank);
    let index = match cx.arg("index")? {
        Argument::Int(v) => SymRef::Int(*v),
        Argument::SymInt(r) => *r,
        other => return Err(Error::bad_input(format!("select index: {other:?}"))),
    };
    let i = cx.sym_int(&index)?;
    let y = cx.node("Gather", &[&x, &i], vec![attr_int("axis", dim)]);
    cx.set(0, y);
    Ok(())
}

fn index_select(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let rank = cx.rank("self")?;
    let dim = norm_dim(cx.int("dim")?, rank);
    let index = cx.input("index")?;
    let y = cx.node("Gather", &[&x, &index], vec![attr_int("axis", dim)]);
    cx.set(0, y);
    Ok(())
}

/// Advanced indexing. One index tensor is a Gather; several are broadcast
/// together, stacked and read with GatherND after moving the indexed dims
/// to the front; adjacent indexed dims then move back to where torch puts
/// them (non-adjacent ones lead, as in torch).
fn index(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let rank = cx.rank("self")?;
    let indices = cx.optional_tensors("indices")?;
    let given: Vec<(usize, String, Dtype)> = indices
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.as_ref().map(|(n, m)| (i, n.clone(), m.dtype)))
        .collect();
    if let Some((_, _, d)) = given
        .iter()
        .find(|(_, _, d)| matches!(d, Dtype::Bool | Dtype::Uint8))
    {
        return Err(Error::unsupported(format!(
            "indexing with a {} mask (data-dependent shape)",
            d.torch_name()
        )));
    }
    if given.is_empty() {
        cx.set(0, x);
        return Ok(());
    }
    if let [(axis, idx, _)] = given.as_slice() {
        let y = cx.node("Gather", &[&x, idx], vec![attr_int("axis", *axis as i64)]);
        cx.set(0, y);
        return Ok(());
    }
    let k = given.len();
    let positions: Vec<usize> = given.iter().map(|g| g.0).collect();
    let adjacent = positions.windows(2).all(|w| w[1] == w[0] + 1);
    let first_pos = positions[0];
    // Indexed dims first, the others after in order.
    let mut perm: Vec<i64> = positions.iter().map(|p| *p as i64).collect();
    perm.extend((0..rank as i64).filter(|d| !positions.contains(&(*d as usize))));
    let xt = if perm.iter().enumerate().all(|(i, p)| *p == i as i64) {
        x
    } else {
        cx.transpose(&x, &perm)
    };
    let mut idx64 = Vec::new();
    for (_, name, d) in &given {
        idx64.push(cx.cast(name, *d, Dtype::Int64)?);
    }
    // The broadcast shape of all index tensors.
    let mut sum = idx64[0].clone();
    for i in &idx64[1..] {
        sum = cx.node("Add", &[&sum, i], vec![]);
    }
    let bshape = cx.shape(&sum);
    let mut stacked = Vec::new();
    for i in &idx64 {
        let e = cx.node("Expand", &[i, &bshape], vec![]);
        stacked.push(cx.unsqueeze(&e, &[-1]));
    }
    let nd = cx.concat(&stacked, -1);
    let mut y = cx.node("GatherND", &[&xt, &nd], vec![]);
    if adjacent && first_pos > 0 {
        let out_rank = cx.out_meta(0)?.sizes.len() as i64;
        let nb = out_rank - (rank as i64 - k as i64);
        let p = first_pos as i64;
        let back: Vec<i64> = (nb..nb + p).chain(0..nb).chain(nb + p..out_rank).collect();
        y = cx.transpose(&y, &back);
    }
    cx.set(0, y);
    Ok(())
}

/// n-th forward difference along `dim`, after prepending/appending.
fn diff(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let n = cx.opt_int("n")?.unwrap_or(1);
    let dim = norm_dim(cx.opt_int("dim")?.unwrap_or(-1), rank);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let mut parts = Vec::new();
    for (name, value) in [("prepend", None), ("self", Some(x)), ("append", None)] {
        let v = match value {
            Some(v) => Some((v, meta.dtype)),
            None => match cx.opt_input(name)? {
                Some(v) => Some((v, cx.dtype(name)?)),
                None => None,
            },
        };
        if let Some((v, d)) = v {
            parts.push(cx.cast(&v, d, c)?);
        }
    }
    let mut y = cx.concat(&parts, dim);
    let axes = cx.const_i64s(&[dim]);
    let one = cx.const_i64s(&[1]);
    let zero = cx.const_i64s(&[0]);
    let minus_one = cx.const_i64s(&[-1]);
    let end = cx.const_i64s(&[i64::MAX]);
    for _ in 0..n {
        let hi = cx.node("Slice", &[&y, &one, &end, &axes], vec![]);
        let lo = cx.node("Slice", &[&y, &zero, &minus_one, &axes], vec![]);
        let op = if c == Dtype::Bool { "Xor" } else { "Sub" };
        y = cx.node(op, &[&hi, &lo], vec![]);
    }
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// torch's LSTM as one ONNX LSTM per layer. torch orders the gates
/// (input, forget, cell, output), ONNX (input, output, forget, cell).
fn lstm(cx: &mut Cx) -> Result<()> {
    let x = cx.input("input")?;
    let xm = cx.meta("input")?;
    let hx = cx.tensors("hx")?;
    let params = cx.tensors("params")?;
    let has_biases = cx.bool("has_biases")?;
    let layers = cx.int("num_layers")? as usize;
    let bidirectional = cx.bool("bidirectional")?;
    let batch_first = cx.bool("batch_first")?;
    let dirs = if bidirectional { 2 } else { 1 };
    let per = if has_biases { 4 } else { 2 };
    if params.len() != layers * dirs * per || hx.len() != 2 {
        return Err(Error::unsupported(
            "LSTM with projections (proj_size) or an unexpected parameter list",
        ));
    }
    let hidden = params[1]
        .1
        .sizes
        .get(1)
        .and_then(Sym::as_int)
        .ok_or_else(|| Error::unsupported("LSTM with a symbolic hidden size"))?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let unbatched = xm.sizes.len() == 2;
    let mut input = cx.cast(&x, xm.dtype, c)?;
    if unbatched {
        input = cx.unsqueeze(&input, &[1]);
    } else if batch_first {
        input = cx.transpose(&input, &[1, 0, 2]);
    }
    let mut state = Vec::new();
    for (name, meta) in &hx {
        let s = cx.cast(name, meta.dtype, c)?;
        state.push(if unbatched { cx.unsqueeze(&s, &[1]) } else { s });
    }
    let gate_sizes = cx.const_i64s(&[hidden; 4]);
    let reorder = |cx: &mut Cx, w: &str, d: Dtype| -> Result<String> {
        let w = cx.cast(w, d, c)?;
        let g = cx.node_n("Split", &[&w, &gate_sizes], vec![attr_int("axis", 0)], 4);
        Ok(cx.concat(&[g[0].clone(), g[3].clone(), g[1].clone(), g[2].clone()], 0))
    };
    let (mut hs, mut cs) = (Vec::new(), Vec::new());
    for layer in 0..layers {
        let (mut ws, mut rs, mut bs) = (Vec::new(), Vec::new(), Vec::new());
        for d in 0..dirs {
            let base = (layer * dirs + d) * per;
            let w = reorder(cx, &params[base].0, params[base].1.dtype)?;
            ws.push(cx.unsqueeze(&w, &[0]));
            let r = reorder(cx, &params[base + 1].0, params[base + 1].1.dtype)?;
            rs.push(cx.unsqueeze(&r, &[0]));
            if has_biases {
                let bi = reorder(cx, &params[base + 2].0, params[base + 2].1.dtype)?;
                let bh = reorder(cx, &params[base + 3].0, params[base + 3].1.dtype)?;
                let b = cx.concat(&[bi, bh], 0);
                bs.push(cx.unsqueeze(&b, &[0]));
            }
        }
        let w = cx.concat(&ws, 0);
        let r = cx.concat(&rs, 0);
        let b = if has_biases {
            cx.concat(&bs, 0)
        } else {
            String::new()
        };
        let starts = cx.const_i64s(&[(layer * dirs) as i64]);
        let ends = cx.const_i64s(&[((layer + 1) * dirs) as i64]);
        let axes = cx.const_i64s(&[0]);
        let h0 = cx.node("Slice", &[&state[0], &starts, &ends, &axes], vec![]);
        let c0 = cx.node("Slice", &[&state[1], &starts, &ends, &axes], vec![]);
        let ys = cx.node_n(
            "LSTM",
            &[&input, &w, &r, &b, "", &h0, &c0],
            vec![
                attr_int("hidden_size", hidden),
                attr_str(
                    "direction",
                    if bidirectional {
                        "bidirectional"
                    } else {
                        "forward"
                    },
                ),
            ],
            3,
        );
        // Y is [seq, dirs, batch, hidden]: directions side by side.
        let t = cx.transpose(&ys[0], &[0, 2, 1, 3]);
        let merged = cx.const_i64s(&[0, 0, -1]);
        input = cx.node("Reshape", &[&t, &merged], vec![]);
        hs.push(ys[1].clone());
        cs.push(ys[2].clone());
    }
    let mut y = input;
    if unbatched {
        y = cx.squeeze(&y, &[1]);
    } else if batch_first {
        y = cx.transpose(&y, &[1, 0, 2]);
    }
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    for (i, parts) in [(1, hs), (2, cs)] {
        let mut s = cx.concat(&parts, 0);
        if unbatched {
            s = cx.squeeze(&s, &[1]);
        }
        let d = cx.out_dtype(i)?;
        let s = cx.cast(&s, c, d)?;
        cx.set(i, s);
    }
    Ok(())
}

fn gather(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let rank = cx.rank("self")?;
    let dim = norm_dim(cx.int("dim")?, rank);
    let index = cx.input("index")?;
    let y = cx.node("GatherElements", &[&x, &index], vec![attr_int("axis", dim)]);
    cx.set(0, y);
    Ok(())
}

fn embedding(cx: &mut Cx) -> Result<()> {
    let w = cx.input("weight")?;
    let idx = cx.input("indices")?;
    let y = cx.node("Gather", &[&w, &idx], vec![attr_int("axis", 0)]);
    cx.set(0, y);
    Ok(())
}

/// torch pads from the last dim backwards in (before, after) pairs.
fn pad(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let pads = if cx.has("pad") {
        cx.ints("pad")?
    } else {
        cx.ints("padding")?
    };
    if pads.len() % 2 != 0 || pads.len() / 2 > rank {
        return Err(Error::bad_input(format!(
            "pad list {pads:?} for a rank-{rank} tensor"
        )));
    }
    let mut onnx = vec![0i64; 2 * rank];
    for (i, pair) in pads.chunks(2).enumerate() {
        let d = rank - 1 - i;
        onnx[d] = pair[0];
        onnx[rank + d] = pair[1];
    }
    let op_mode = match cx.node.target.name.as_str() {
        n if n.starts_with("reflection_pad") => Some("reflect".to_string()),
        n if n.starts_with("replication_pad") => Some("replicate".to_string()),
        _ => cx.opt_string("mode")?,
    };
    let mode = match op_mode.as_deref() {
        None | Some("constant") => "constant",
        Some("reflect") => "reflect",
        Some("replicate") => "edge",
        Some("circular") if cx.opset() >= 19 => "wrap",
        Some(m) => return Err(Error::unsupported(format!("pad mode {m:?}"))),
    };
    let value = if cx.node.target.name == "constant_pad_nd" {
        lit(cx, "value")?.unwrap_or(Lit::Int(0))
    } else {
        Lit::Float(cx.opt_float("value")?.unwrap_or(0.0))
    };
    let p = cx.const_i64s(&onnx);
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        if mode == "constant" {
            let v = cx.scalar(value, c)?;
            Ok(cx.node("Pad", &[x, &p, &v], vec![attr_str("mode", mode)]))
        } else {
            Ok(cx.node("Pad", &[x, &p], vec![attr_str("mode", mode)]))
        }
    })
}

fn flip(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dims: Vec<i64> = cx
        .ints("dims")?
        .iter()
        .map(|d| norm_dim(*d, rank))
        .collect();
    if dims.is_empty() {
        cx.set(0, x);
        return Ok(());
    }
    let n = dims.len();
    let starts = cx.const_i64s(&vec![-1; n]);
    let ends = cx.const_i64s(&vec![i64::MIN; n]);
    let axes = cx.const_i64s(&dims);
    let steps = cx.const_i64s(&vec![-1; n]);
    let y = cx.node("Slice", &[&x, &starts, &ends, &axes, &steps], vec![]);
    cx.set(0, y);
    Ok(())
}

fn trilu(cx: &mut Cx, upper: bool) -> Result<()> {
    let (x, meta) = first(cx)?;
    let k = sym_arg(cx, "diagonal", 0)?;
    let k = cx.reshape_const(&k, &[])?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        Ok(cx.node("Trilu", &[x, &k], vec![attr_int("upper", upper as i64)]))
    })
}

// ---------------------------------------------------------------------------
// creation

fn full(cx: &mut Cx) -> Result<()> {
    let out = cx.out_dtype(0)?;
    let value = match cx.node.target.name.as_str() {
        "full" | "new_full" => cx.operand("fill_value")?,
        "ones" | "new_ones" => Operand::Lit(Lit::Int(1)),
        _ => Operand::Lit(Lit::Int(0)),
    };
    let shape = cx.int_list("size")?;
    let y = fill_shape(cx, &shape, &value, out)?;
    cx.set(0, y);
    Ok(())
}

fn full_like(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let out = cx.out_dtype(0)?;
    let value = match cx.node.target.name.as_str() {
        "full_like" => cx.operand("fill_value")?,
        "ones_like" => Operand::Lit(Lit::Int(1)),
        _ => Operand::Lit(Lit::Int(0)),
    };
    let shape = cx.shape(&x);
    let y = fill_shape(cx, &shape, &value, out)?;
    cx.set(0, y);
    Ok(())
}

fn scalar_tensor(cx: &mut Cx) -> Result<()> {
    let v = cx.operand("s")?;
    let out = cx.out_dtype(0)?;
    let y = cx.operand_as(&v, out)?;
    cx.set(0, y);
    Ok(())
}

fn arange(cx: &mut Cx) -> Result<()> {
    let out = cx.out_dtype(0)?;
    // ONNX Range takes float, double, int16, int32 and int64 only.
    let c = match cx.compute(out) {
        Dtype::Float16 | Dtype::BFloat16 => Dtype::Float32,
        Dtype::Uint8 | Dtype::Int8 | Dtype::Uint16 | Dtype::Uint32 | Dtype::Uint64 => Dtype::Int64,
        d => d,
    };
    let start = if cx.has("start") {
        cx.operand("start")?
    } else {
        Operand::Lit(Lit::Int(0))
    };
    let end = cx.operand("end")?;
    let step = if cx.has("step") {
        cx.operand("step")?
    } else {
        Operand::Lit(Lit::Int(1))
    };
    let s = cx.operand_as(&start, c)?;
    let e = cx.operand_as(&end, c)?;
    let d = cx.operand_as(&step, c)?;
    let y = cx.node("Range", &[&s, &e, &d], vec![]);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

// ---------------------------------------------------------------------------
// symbolic scalars (rank-0 ONNX values: int64, double, bool)

fn sym_size(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let rank = cx.rank("self")?;
    let dim = norm_dim(cx.int("dim")?, rank);
    let shape = cx.shape(&x);
    let i = cx.const_i64(dim);
    let y = cx.node("Gather", &[&shape, &i], vec![attr_int("axis", 0)]);
    cx.set(0, y);
    Ok(())
}

fn sym_numel(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let y = cx.node("Size", &[&x], vec![]);
    cx.set(0, y);
    Ok(())
}

/// Strides and storage offsets have no ONNX meaning: only their recorded
/// constant values convert.
fn sym_constant(cx: &mut Cx) -> Result<()> {
    match cx.out_kind(0)? {
        ValueKind::SymInt(Sym::Int(k)) => {
            let y = cx.const_i64(*k);
            cx.set(0, y);
            Ok(())
        }
        _ => Err(Error::unsupported(
            "symbolic strides and storage offsets have no ONNX equivalent",
        )),
    }
}

fn item(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let out = cx.out_dtype(0)?;
    let s = cx.reshape_const(&x, &[])?;
    let y = cx.cast(&s, meta.dtype, out)?;
    cx.set(0, y);
    Ok(())
}

/// The positional operands of a Python function on symbolic scalars.
fn sym_operands(cx: &Cx) -> Result<Vec<Operand>> {
    cx.node
        .inputs
        .iter()
        .map(|a| cx.operand_of(&a.arg, &a.name))
        .collect()
}

fn sym_dtype(op: &Operand) -> Dtype {
    match op {
        Operand::Tensor { dtype, .. } | Operand::Sym { dtype, .. } => *dtype,
        Operand::Lit(Lit::Int(_)) => Dtype::Int64,
        Operand::Lit(Lit::Float(_)) => Dtype::Float64,
        Operand::Lit(Lit::Bool(_)) => Dtype::Bool,
    }
}

fn sym_binary(cx: &mut Cx, op: &str) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a, b] = ops.as_slice() else {
        return Err(Error::bad_input(format!("{op} takes two operands")));
    };
    let out = cx.out_dtype(0)?;
    // Compute in the output's type (truediv of ints gives a float).
    let c = match (op, out) {
        ("And" | "Or", _) => Dtype::Bool,
        (_, Dtype::Bool) => promote_sym(a, b),
        _ => out,
    };
    let x = cx.operand_as(a, c)?;
    let y = cx.operand_as(b, c)?;
    let r = cx.node(op, &[&x, &y], vec![]);
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

fn promote_sym(a: &Operand, b: &Operand) -> Dtype {
    match (sym_dtype(a), sym_dtype(b)) {
        (Dtype::Float64, _) | (_, Dtype::Float64) => Dtype::Float64,
        (Dtype::Bool, Dtype::Bool) => Dtype::Bool,
        _ => Dtype::Int64,
    }
}

fn sym_compare(cx: &mut Cx, op: &str, negate: bool) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a, b] = ops.as_slice() else {
        return Err(Error::bad_input(format!("{op} takes two operands")));
    };
    let c = match promote_sym(a, b) {
        Dtype::Bool if op != "Equal" => Dtype::Int64,
        d => d,
    };
    let x = cx.operand_as(a, c)?;
    let y = cx.operand_as(b, c)?;
    let mut r = cx.node(op, &[&x, &y], vec![]);
    if negate {
        r = cx.node("Not", &[&r], vec![]);
    }
    cx.set(0, r);
    Ok(())
}

/// Python floor division of integers (sizes may be negative in general).
fn sym_floordiv(cx: &mut Cx) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a, b] = ops.as_slice() else {
        return Err(Error::bad_input("floordiv takes two operands"));
    };
    let out = cx.out_dtype(0)?;
    if out.is_floating() {
        let x = cx.operand_as(a, out)?;
        let y = cx.operand_as(b, out)?;
        let q = cx.node("Div", &[&x, &y], vec![]);
        let r = cx.node("Floor", &[&q], vec![]);
        cx.set(0, r);
        return Ok(());
    }
    let x = cx.operand_as(a, Dtype::Int64)?;
    let y = cx.operand_as(b, Dtype::Int64)?;
    // (x - mod(x, y)) / y is exact and floors, with Python's mod.
    let m = cx.node("Mod", &[&x, &y], vec![attr_int("fmod", 0)]);
    let d = cx.node("Sub", &[&x, &m], vec![]);
    let r = cx.node("Div", &[&d, &y], vec![]);
    cx.set(0, r);
    Ok(())
}

fn sym_mod(cx: &mut Cx) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a, b] = ops.as_slice() else {
        return Err(Error::bad_input("mod takes two operands"));
    };
    let out = cx.out_dtype(0)?;
    let x = cx.operand_as(a, out)?;
    let y = cx.operand_as(b, out)?;
    let fmod = out.is_floating() as i64;
    let r = if out.is_floating() {
        let q = cx.node("Div", &[&x, &y], vec![]);
        let f = cx.node("Floor", &[&q], vec![]);
        let p = cx.node("Mul", &[&f, &y], vec![]);
        cx.node("Sub", &[&x, &p], vec![])
    } else {
        cx.node("Mod", &[&x, &y], vec![attr_int("fmod", fmod)])
    };
    cx.set(0, r);
    Ok(())
}

fn sym_unary(cx: &mut Cx, op: &str) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a] = ops.as_slice() else {
        return Err(Error::bad_input(format!("{op} takes one operand")));
    };
    let out = cx.out_dtype(0)?;
    let x = cx.operand_as(a, out)?;
    let r = cx.node(op, &[&x], vec![]);
    cx.set(0, r);
    Ok(())
}

fn sym_cast(cx: &mut Cx) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a] = ops.as_slice() else {
        return Err(Error::bad_input("a cast takes one operand"));
    };
    let out = cx.out_dtype(0)?;
    let from = sym_dtype(a);
    let x = cx.operand_as(a, from)?;
    // float -> int truncates, as Python's int() does.
    let x = if from.is_floating() && !out.is_floating() {
        let a = cx.node("Abs", &[&x], vec![]);
        let f = cx.node("Floor", &[&a], vec![]);
        let s = cx.node("Sign", &[&x], vec![]);
        cx.node("Mul", &[&s, &f], vec![])
    } else {
        x
    };
    let r = cx.cast(&x, from, out)?;
    cx.set(0, r);
    Ok(())
}

fn sym_round(cx: &mut Cx, op: &str) -> Result<()> {
    let ops = sym_operands(cx)?;
    let [a] = ops.as_slice() else {
        return Err(Error::bad_input(format!("{op} takes one operand")));
    };
    let out = cx.out_dtype(0)?;
    let from = sym_dtype(a);
    if !from.is_floating() {
        let r = cx.operand_as(a, out)?;
        cx.set(0, r);
        return Ok(());
    }
    let x = cx.operand_as(a, from)?;
    let r = cx.node(op, &[&x], vec![]);
    let r = cx.cast(&r, from, out)?;
    cx.set(0, r);
    Ok(())
}

// ---------------------------------------------------------------------------
// control flow

/// The ONNX names of the values in a list argument of a higher-order op
/// (operands, carried, mapped or additional tensors).
fn value_names(cx: &Cx, arg: &Argument) -> Result<Vec<String>> {
    let mut refs = Vec::new();
    arg.value_refs(&mut refs);
    refs.iter().map(|v| cx.value_name(*v)).collect()
}

/// The dtype of a subgraph's one output (a predicate).
fn predicate_dtype(graph: &Graph, what: &str) -> Result<Dtype> {
    let mut refs = Vec::new();
    graph.outputs.iter().for_each(|a| a.value_refs(&mut refs));
    let [v] = refs.as_slice() else {
        return Err(Error::bad_input(format!(
            "the {what} graph returns {} values, not one predicate",
            refs.len()
        )));
    };
    match &graph.value(*v).kind {
        ValueKind::Tensor(meta) => Ok(meta.dtype),
        ValueKind::SymBool(_) => Ok(Dtype::Bool),
        ValueKind::SymInt(_) => Ok(Dtype::Int64),
        other => Err(Error::unsupported(format!(
            "a {what} graph returning {other:?}"
        ))),
    }
}

/// `cond(pred, true_graph, false_graph, operands)` as an If whose branches
/// read the operands from the enclosing scope.
fn cond(cx: &mut Cx) -> Result<()> {
    let pred = cx.operand_of(cx.pos(0)?, "pred")?;
    let (Argument::Graph(then_g), Argument::Graph(else_g)) = (cx.pos(1)?, cx.pos(2)?) else {
        return Err(Error::bad_input("cond without its branch graphs"));
    };
    let operands = value_names(cx, cx.pos(3)?)?;
    let p = cx.operand_as(&pred, Dtype::Bool)?;
    let node_name = cx.node.name.clone();
    let then_branch = cx.subgraph(
        &then_g.graph,
        &operands,
        &format!("{node_name}.{}", then_g.name),
    )?;
    let else_branch = cx.subgraph(
        &else_g.graph,
        &operands,
        &format!("{node_name}.{}", else_g.name),
    )?;
    let n = cx.out_count();
    let ys = cx.node_n(
        "If",
        &[&p],
        vec![
            attr_graph("then_branch", then_branch),
            attr_graph("else_branch", else_branch),
        ],
        n,
    );
    for (i, y) in ys.into_iter().enumerate() {
        cx.set(i, y);
    }
    Ok(())
}

/// `while_loop(cond_graph, body_graph, carried, additional)` as a Loop
/// with no trip count. The cond graph is inlined twice: before the Loop on
/// the initial values (the first condition) and at the end of the body on
/// the body's results (the next one). The body's carried values are its
/// graph inputs; the additional inputs are read from the enclosing scope.
fn while_loop(cx: &mut Cx) -> Result<()> {
    let (Argument::Graph(cond_g), Argument::Graph(body_g)) = (cx.pos(0)?, cx.pos(1)?) else {
        return Err(Error::bad_input(
            "while_loop without its cond and body graphs",
        ));
    };
    let carried = value_names(cx, cx.pos(2)?)?;
    let additional = match cx.node.inputs.get(3) {
        Some(a) => value_names(cx, &a.arg)?,
        None => Vec::new(),
    };
    let n = cx.out_count();
    if carried.len() != n || body_g.graph.inputs.len() != n + additional.len() {
        return Err(Error::unsupported(format!(
            "while_loop with {} carried tensors, {n} outputs and a body of {} inputs \
             (only tensors can be carried)",
            carried.len(),
            body_g.graph.inputs.len()
        )));
    }
    let cond_graph: &Graph = &cond_g.graph;
    let cond_dtype = predicate_dtype(cond_graph, "while_loop cond")?;
    let node_name = cx.node.name.clone();

    let mut inputs = carried.clone();
    inputs.extend(additional.iter().cloned());
    let first = cx.inline(cond_graph, &inputs)?;
    let [first] = first.as_slice() else {
        return Err(Error::bad_input(
            "the while_loop cond graph gives no predicate",
        ));
    };
    let first = cx.cast(first, cond_dtype, Dtype::Bool)?;

    let iter = cx.conv.unique(&format!("{node_name}.iter"));
    let cond_in = cx.conv.unique(&format!("{node_name}.cond_in"));
    let leading = vec![
        cx.conv
            .scalar_info(&iter, Dtype::Int64, "iteration number")?,
        cx.conv.scalar_info(&cond_in, Dtype::Bool, "condition")?,
    ];
    let body = cx.body(
        &body_g.graph,
        leading,
        &additional,
        &format!("{node_name}.{}", body_g.name),
        |conv, outs| {
            let mut inputs = outs.to_vec();
            inputs.extend(additional.iter().cloned());
            let next = conv.inline_subgraph(cond_graph, &inputs)?;
            let [next] = next.as_slice() else {
                return Err(Error::bad_input(
                    "the while_loop cond graph gives no predicate",
                ));
            };
            // Always a node of its own: the predicate may be a body input
            // or output as it is, and graph outputs need names of their own.
            let cond_out = format!("{node_name}.cond_out");
            let cond_out = if cond_dtype == Dtype::Bool {
                conv.add_node("Identity", &[next], vec![], &cond_out)
            } else {
                let to = super::onnx_dtype(Dtype::Bool, conv.opset)? as i64;
                conv.add_node("Cast", &[next], vec![attr_int("to", to)], &cond_out)
            };
            Ok(vec![conv.scalar_info(
                &cond_out,
                Dtype::Bool,
                "condition",
            )?])
        },
    )?;
    let mut loop_inputs: Vec<&str> = vec!["", &first];
    loop_inputs.extend(carried.iter().map(String::as_str));
    let ys = cx.node_n("Loop", &loop_inputs, vec![attr_graph("body", body)], n);
    for (i, y) in ys.into_iter().enumerate() {
        cx.set(i, y);
    }
    Ok(())
}

/// `map_impl(body_graph, xs, args)` as a Scan with no state over dim 0 of
/// every xs: the body's outputs are stacked along a new dim 0, as map
/// stacks them; args are read from the enclosing scope.
fn map_impl(cx: &mut Cx) -> Result<()> {
    let Argument::Graph(body_g) = cx.pos(0)? else {
        return Err(Error::bad_input("map_impl without its body graph"));
    };
    let xs = value_names(cx, cx.pos(1)?)?;
    let args = match cx.node.inputs.get(2) {
        Some(a) => value_names(cx, &a.arg)?,
        None => Vec::new(),
    };
    if xs.is_empty() || body_g.graph.inputs.len() != xs.len() + args.len() {
        return Err(Error::unsupported(format!(
            "map_impl over {} tensors with {} other inputs and a body of {} inputs \
             (only tensors can be mapped over and passed)",
            xs.len(),
            args.len(),
            body_g.graph.inputs.len()
        )));
    }
    let node_name = cx.node.name.clone();
    let body = cx.body(
        &body_g.graph,
        Vec::new(),
        &args,
        &format!("{node_name}.{}", body_g.name),
        |_, _| Ok(Vec::new()),
    )?;
    let inputs: Vec<&str> = xs.iter().map(String::as_str).collect();
    let n = cx.out_count();
    let ys = cx.node_n(
        "Scan",
        &inputs,
        vec![
            attr_graph("body", body),
            attr_int("num_scan_inputs", xs.len() as i64),
        ],
        n,
    );
    for (i, y) in ys.into_iter().enumerate() {
        cx.set(i, y);
    }
    Ok(())
}

/// A wrapper HOP that only scopes a region (grad mode): its subgraph, at
/// argument `graph_at`, is inlined with the arguments after it as inputs.
fn wrapped_region(cx: &mut Cx, graph_at: usize) -> Result<()> {
    let Argument::Graph(sub) = cx.pos(graph_at)? else {
        return Err(Error::bad_input(format!(
            "argument {graph_at} should be a graph"
        )));
    };
    let mut inputs = Vec::new();
    for a in &cx.node.inputs[graph_at + 1..] {
        let mut refs = Vec::new();
        a.arg.value_refs(&mut refs);
        for v in refs {
            inputs.push(cx.value_name(v)?);
        }
    }
    let outputs = cx.inline(&sub.graph, &inputs)?;
    for (i, o) in outputs.into_iter().enumerate() {
        cx.set(i, o);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// more elementwise

fn erfc(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let one = cx.scalar(Lit::Int(1), c)?;
        let e = cx.node("Erf", &[x], vec![]);
        Ok(cx.node("Sub", &[&one, &e], vec![]))
    })
}

fn exp2(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let two = cx.scalar(Lit::Int(2), c)?;
        Ok(cx.node("Pow", &[&two, x], vec![]))
    })
}

/// x - trunc(x)
fn frac(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let a = cx.node("Abs", &[x], vec![]);
        let f = cx.node("Floor", &[&a], vec![]);
        let s = cx.node("Sign", &[x], vec![]);
        let t = cx.node("Mul", &[&s, &f], vec![]);
        Ok(cx.node("Sub", &[x, &t], vec![]))
    })
}

/// x where x > threshold, else value.
fn threshold(cx: &mut Cx) -> Result<()> {
    let x = cx.operand("self")?;
    let t = cx.operand("threshold")?;
    let v = cx.operand("value")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.operand_as(&x, c)?;
    let ts = cx.operand_as(&t, c)?;
    let vs = cx.operand_as(&v, c)?;
    let keep = cx.node("Greater", &[&xs, &ts], vec![]);
    let y = cx.node("Where", &[&keep, &xs, &vs], vec![]);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

fn nan_to_num(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    if !meta.dtype.is_floating() {
        return alias(cx);
    }
    let (max, min) = match meta.dtype {
        Dtype::Float64 => (f64::MAX, f64::MIN),
        Dtype::Float16 => (65504.0, -65504.0),
        Dtype::BFloat16 => (3.3895313892515355e38, -3.3895313892515355e38),
        _ => (f32::MAX as f64, f32::MIN as f64),
    };
    let nan = cx.opt_float("nan")?.unwrap_or(0.0);
    let posinf = cx.opt_float("posinf")?.unwrap_or(max);
    let neginf = cx.opt_float("neginf")?.unwrap_or(min);
    let dtype = meta.dtype;
    elementwise(cx, &x, dtype, |cx, x, c| {
        let is_nan = cx.node("IsNaN", &[x], vec![]);
        let n = cx.scalar(Lit::Float(nan), c)?;
        let y = cx.node("Where", &[&is_nan, &n, x], vec![]);
        let is_pos = cx.node("IsInf", &[x], vec![attr_int("detect_negative", 0)]);
        let p = cx.scalar(Lit::Float(posinf), c)?;
        let y = cx.node("Where", &[&is_pos, &p, &y], vec![]);
        let is_neg = cx.node("IsInf", &[x], vec![attr_int("detect_positive", 0)]);
        let m = cx.scalar(Lit::Float(neginf), c)?;
        Ok(cx.node("Where", &[&is_neg, &m, &y], vec![]))
    })
}

/// atan2(y, x) from Atan(y / x) and the quadrant.
fn atan2(cx: &mut Cx) -> Result<()> {
    let y = cx.operand("self")?;
    let x = cx.operand("other")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let ys = cx.operand_as(&y, c)?;
    let xs = cx.operand_as(&x, c)?;
    let pi = std::f64::consts::PI;
    let zero = cx.scalar(Lit::Int(0), c)?;
    let q = cx.node("Div", &[&ys, &xs], vec![]);
    let a = cx.node("Atan", &[&q], vec![]);
    let y_neg = cx.node("Less", &[&ys, &zero], vec![]);
    let pos_pi = cx.scalar(Lit::Float(pi), c)?;
    let neg_pi = cx.scalar(Lit::Float(-pi), c)?;
    let turn = cx.node("Where", &[&y_neg, &neg_pi, &pos_pi], vec![]);
    let turned = cx.node("Add", &[&a, &turn], vec![]);
    let x_neg = cx.node("Less", &[&xs, &zero], vec![]);
    let r = cx.node("Where", &[&x_neg, &turned, &a], vec![]);
    // x == 0: ±pi/2 by the sign of y, 0 when y is 0 too.
    let half = cx.scalar(Lit::Float(pi / 2.0), c)?;
    let s = cx.node("Sign", &[&ys], vec![]);
    let axis = cx.node("Mul", &[&s, &half], vec![]);
    let x_zero = cx.node("Equal", &[&xs, &zero], vec![]);
    let r = cx.node("Where", &[&x_zero, &axis, &r], vec![]);
    let r = cx.cast(&r, c, out)?;
    cx.set(0, r);
    Ok(())
}

// ---------------------------------------------------------------------------
// more linear algebra, sampling and normalization

fn einsum(cx: &mut Cx) -> Result<()> {
    let equation = cx.string("equation")?;
    let tensors = cx.tensors("tensors")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let mut inputs = Vec::new();
    for (name, meta) in tensors {
        inputs.push(cx.cast(&name, meta.dtype, c)?);
    }
    let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let y = cx.node("Einsum", &refs, vec![attr_str("equation", &equation)]);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

fn grid_sample(cx: &mut Cx) -> Result<()> {
    let x = cx.input("input")?;
    let xd = cx.dtype("input")?;
    let grid = cx.input("grid")?;
    let gd = cx.dtype("grid")?;
    let new_names = cx.opset() >= 20;
    let mode = match (cx.int("interpolation_mode")?, new_names) {
        (0, true) => "linear",
        (0, false) => "bilinear",
        (1, _) => "nearest",
        (2, true) => "cubic",
        (2, false) => "bicubic",
        (m, _) => {
            return Err(Error::unsupported(format!(
                "grid_sampler interpolation_mode {m}"
            )))
        }
    };
    let padding = match cx.int("padding_mode")? {
        0 => "zeros",
        1 => "border",
        2 => "reflection",
        m => return Err(Error::unsupported(format!("grid_sampler padding_mode {m}"))),
    };
    let align = cx.bool("align_corners")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, xd, c)?;
    let gs = cx.cast(&grid, gd, c)?;
    let y = cx.node(
        "GridSample",
        &[&xs, &gs],
        vec![
            attr_str("mode", mode),
            attr_str("padding_mode", padding),
            attr_int("align_corners", align as i64),
        ],
    );
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// upsample_*: Resize to the recorded output sizes, or by the given scale
/// factors (torch maps coordinates with the scale when it is given).
fn resize(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let name = cx.node.target.name.clone();
    let rank = meta.sizes.len();
    let n = rank.saturating_sub(2);
    let align = cx.opt_bool("align_corners")?.unwrap_or(false);
    let mut attrs = if name.contains("nearest") {
        vec![
            attr_str("mode", "nearest"),
            attr_str("coordinate_transformation_mode", "asymmetric"),
            attr_str("nearest_mode", "floor"),
        ]
    } else {
        let mode = if name.contains("bicubic") {
            "cubic"
        } else {
            "linear"
        };
        let mut a = vec![
            attr_str("mode", mode),
            attr_str(
                "coordinate_transformation_mode",
                if align {
                    "align_corners"
                } else {
                    "pytorch_half_pixel"
                },
            ),
        ];
        if mode == "cubic" {
            a.push(attr_float("cubic_coeff_a", -0.75));
        }
        a
    };
    // Scale factors: the .vec overload's list, or scales_h/scales_w/...
    let scales: Option<Vec<f64>> = if cx.node.target.overload == "vec" {
        match cx.node.arg("scale_factors") {
            Some(Argument::Floats(f)) if !f.is_empty() => Some(f.clone()),
            _ => None,
        }
    } else {
        let keys: &[&str] = match n {
            1 => &["scales"],
            2 => &["scales_h", "scales_w"],
            _ => &["scales_d", "scales_h", "scales_w"],
        };
        let v: Vec<Option<f64>> = keys
            .iter()
            .map(|k| cx.opt_float(k))
            .collect::<Result<_>>()?;
        v.into_iter().collect()
    };
    let out_sizes = cx.out_meta(0)?.sizes.clone();
    let (scales_in, sizes_in) = match scales {
        Some(f) if f.len() == n => {
            let all: Vec<f32> = [1.0, 1.0]
                .into_iter()
                .chain(f.iter().map(|v| *v as f32))
                .collect();
            let raw: Vec<u8> = all.iter().flat_map(|v| v.to_le_bytes()).collect();
            (
                cx.constant(Dtype::Float32, &[all.len() as i64], raw)?,
                String::new(),
            )
        }
        _ => (String::new(), cx.sizes(&out_sizes)?),
    };
    let _ = &mut attrs;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        if sizes_in.is_empty() {
            Ok(cx.node("Resize", &[x, "", &scales_in], attrs))
        } else {
            Ok(cx.node("Resize", &[x, "", "", &sizes_in], attrs))
        }
    })
}

fn pixel_shuffle(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    if meta.sizes.len() != 4 {
        return Err(Error::unsupported(
            "pixel_shuffle of a tensor that is not 4-D",
        ));
    }
    let r = cx.int("upscale_factor")?;
    let y = cx.node(
        "DepthToSpace",
        &[&x],
        vec![attr_int("blocksize", r), attr_str("mode", "CRD")],
    );
    cx.set(0, y);
    Ok(())
}

fn instance_norm(cx: &mut Cx) -> Result<()> {
    if !cx.bool("use_input_stats")? {
        return batch_norm(cx);
    }
    let x = cx.input("input")?;
    let meta = cx.meta("input")?;
    let channels = meta
        .sizes
        .get(1)
        .cloned()
        .ok_or_else(|| Error::bad_input("instance norm of a 1-D tensor"))?;
    let eps = cx.opt_float("eps")?.unwrap_or(1e-5);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let scale = param_or(cx, "weight", 1.0, &channels, c)?;
    let bias = param_or(cx, "bias", 0.0, &channels, c)?;
    let y = cx.node(
        "InstanceNormalization",
        &[&xs, &scale, &bias],
        vec![attr_float("epsilon", eps)],
    );
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

fn vector_norm(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dims = reduce_dims(cx, Some("dim"), rank)?;
    let keepdim = cx.opt_bool("keepdim")?.unwrap_or(false);
    let ord = lit(cx, "ord")?.map_or(2.0, Lit::as_f64);
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let d = dims.as_deref();
        Ok(if ord == 2.0 {
            cx.reduce("ReduceL2", x, d, keepdim)
        } else if ord == 1.0 {
            cx.reduce("ReduceL1", x, d, keepdim)
        } else if ord.is_infinite() {
            let a = cx.node("Abs", &[x], vec![]);
            cx.reduce(
                if ord > 0.0 { "ReduceMax" } else { "ReduceMin" },
                &a,
                d,
                keepdim,
            )
        } else if ord == 0.0 {
            let zero = cx.scalar(Lit::Int(0), c)?;
            let nz = cx.node("Equal", &[x, &zero], vec![]);
            let nz = cx.node("Not", &[&nz], vec![]);
            let f = cx.cast(&nz, Dtype::Bool, c)?;
            cx.reduce("ReduceSum", &f, d, keepdim)
        } else {
            let a = cx.node("Abs", &[x], vec![]);
            let p = cx.scalar(Lit::Float(ord), c)?;
            let ap = cx.node("Pow", &[&a, &p], vec![]);
            let s = cx.reduce("ReduceSum", &ap, d, keepdim);
            let inv = cx.scalar(Lit::Float(1.0 / ord), c)?;
            cx.node("Pow", &[&s, &inv], vec![])
        })
    })
}

// ---------------------------------------------------------------------------
// more indexing and creation

fn roll(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let shifts = cx.ints("shifts")?;
    let dims: Vec<i64> = cx.opt_ints("dims")?.unwrap_or_default();
    let (mut y, flat) = if dims.is_empty() {
        (cx.reshape_const(&x, &[-1])?, true)
    } else {
        (x.clone(), false)
    };
    let pairs: Vec<(i64, i64)> = if flat {
        vec![(shifts.first().copied().unwrap_or(0), 0)]
    } else {
        shifts
            .iter()
            .zip(&dims)
            .map(|(s, d)| (*s, norm_dim(*d, rank)))
            .collect()
    };
    for (shift, dim) in pairs {
        let size = if flat {
            meta.static_sizes().map(|s| s.iter().product::<i64>())
        } else {
            meta.sizes[dim as usize].as_int()
        };
        let shift = match size {
            Some(n) if n > 0 => shift.rem_euclid(n),
            _ => shift,
        };
        if shift == 0 {
            continue;
        }
        let axes = cx.const_i64s(&[dim]);
        let neg = cx.const_i64s(&[-shift]);
        let zero = cx.const_i64s(&[0]);
        let end = cx.const_i64s(&[i64::MAX]);
        let tail = cx.node("Slice", &[&y, &neg, &end, &axes], vec![]);
        let head = cx.node("Slice", &[&y, &zero, &neg, &axes], vec![]);
        y = cx.concat(&[tail, head], dim);
    }
    if flat {
        let shape = cx.shape(&x);
        y = cx.node("Reshape", &[&y, &shape], vec![]);
    }
    cx.set(0, y);
    Ok(())
}

fn one_hot(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let out = cx.out_meta(0)?;
    let depth = match cx.opt_int("num_classes")? {
        Some(n) if n >= 0 => n,
        _ => out
            .sizes
            .last()
            .and_then(Sym::as_int)
            .ok_or_else(|| Error::unsupported("one_hot with an unknown number of classes"))?,
    };
    let idx = cx.cast(&x, meta.dtype, Dtype::Int64)?;
    let d = cx.const_i64s(&[depth]);
    let values = cx.const_i64s(&[0, 1]);
    let y = cx.node("OneHot", &[&idx, &d, &values], vec![attr_int("axis", -1)]);
    cx.set(0, y);
    Ok(())
}

fn nonzero(cx: &mut Cx) -> Result<()> {
    let (x, _) = first(cx)?;
    let nz = cx.node("NonZero", &[&x], vec![]);
    let y = cx.transpose(&nz, &[1, 0]);
    cx.set(0, y);
    Ok(())
}

/// scatter / scatter_add / scatter_reduce as ScatterElements.
fn scatter(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let rank = meta.sizes.len();
    let dim = norm_dim(cx.int("dim")?, rank);
    let index = cx.input("index")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let reduction = match cx.node.target.name.as_str() {
        "scatter_add" => "add",
        "scatter_reduce" => {
            if !cx.opt_bool("include_self")?.unwrap_or(true) {
                return Err(Error::unsupported("scatter_reduce with include_self=False"));
            }
            match cx.string("reduce")?.as_str() {
                "sum" => "add",
                "prod" => "mul",
                "amax" if cx.opset() >= 18 => "max",
                "amin" if cx.opset() >= 18 => "min",
                r => {
                    return Err(Error::unsupported(format!(
                        "scatter_reduce reduce={r:?} at opset {}",
                        cx.opset()
                    )))
                }
            }
        }
        _ => "none",
    };
    let xs = cx.cast(&x, meta.dtype, c)?;
    let updates = if cx.has("src") {
        let sd = cx.dtype("src")?;
        let src = cx.input("src")?;
        let src = cx.cast(&src, sd, c)?;
        // torch reads only the index's extent of src.
        let same = cx.meta("src")?.sizes == cx.meta("index")?.sizes;
        if same {
            src
        } else {
            let shape = cx.shape(&index);
            let zeros = cx.const_i64s(&vec![0; rank]);
            cx.node("Slice", &[&src, &zeros, &shape], vec![])
        }
    } else {
        let v = cx.operand("value")?;
        let v = cx.operand_as(&v, c)?;
        let shape = cx.shape(&index);
        cx.node("Expand", &[&v, &shape], vec![])
    };
    let y = cx.node(
        "ScatterElements",
        &[&xs, &index, &updates],
        vec![attr_int("axis", dim), attr_str("reduction", reduction)],
    );
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// slice_scatter / select_scatter: src written over a strided range of
/// `dim`, as ScatterElements with the range's indices.
fn slice_scatter(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let rank = meta.sizes.len();
    let dim = norm_dim(cx.opt_int("dim")?.unwrap_or(0), rank);
    let size = meta.sizes[dim as usize].as_int();
    let select = cx.node.target.name == "select_scatter";
    let src = cx.input("src")?;
    let src_meta = cx.meta("src")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let mut src = cx.cast(&src, src_meta.dtype, c)?;
    let normalize = |v: i64| -> Result<i64> {
        if v >= 0 {
            Ok(v)
        } else {
            size.map(|n| v + n)
                .ok_or_else(|| Error::unsupported("a negative position in a symbolic dim"))
        }
    };
    let (start, step, count) = if select {
        src = cx.unsqueeze(&src, &[dim]);
        let index = match cx.arg("index")? {
            Argument::Int(v) | Argument::SymInt(SymRef::Int(v)) => normalize(*v)?,
            _ => return Err(Error::unsupported("select_scatter at a symbolic index")),
        };
        (cx.const_i64(index), cx.const_i64(1), cx.const_i64(1))
    } else {
        let start = match cx.node.arg("start") {
            None | Some(Argument::None) => cx.const_i64(0),
            Some(Argument::Int(v)) | Some(Argument::SymInt(SymRef::Int(v))) => {
                let v = normalize(*v)?;
                cx.const_i64(v)
            }
            Some(Argument::SymInt(r)) => {
                let r = *r;
                cx.sym_int(&r)?
            }
            Some(other) => return Err(Error::bad_input(format!("slice_scatter start: {other:?}"))),
        };
        let step = cx.opt_int("step")?.unwrap_or(1);
        let count = cx.sym_size(&src_meta.sizes[dim as usize])?;
        (start, cx.const_i64(step), count)
    };
    let zero = cx.const_i64(0);
    let one = cx.const_i64(1);
    let r = cx.node("Range", &[&zero, &count, &one], vec![]);
    let r = cx.node("Mul", &[&r, &step], vec![]);
    let r = cx.node("Add", &[&r, &start], vec![]);
    let shape: Vec<i64> = (0..rank)
        .map(|d| if d as i64 == dim { -1 } else { 1 })
        .collect();
    let r = cx.reshape_const(&r, &shape)?;
    let src_shape = cx.shape(&src);
    let idx = cx.node("Expand", &[&r, &src_shape], vec![]);
    let y = cx.node(
        "ScatterElements",
        &[&xs, &idx, &src],
        vec![attr_int("axis", dim)],
    );
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// index_put: a boolean mask with one value is a Where; integer indices
/// are a ScatterND (with add for accumulate) on the indexed dims moved first.
fn index_put(cx: &mut Cx) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let rank = meta.sizes.len();
    let indices = cx.optional_tensors("indices")?;
    let values = cx.input("values")?;
    let vm = cx.meta("values")?;
    let accumulate = cx.opt_bool("accumulate")?.unwrap_or(false);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let vs = cx.cast(&values, vm.dtype, c)?;
    let given: Vec<(usize, String, &TensorMeta)> = indices
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.as_ref().map(|(n, m)| (i, n.clone(), *m)))
        .collect();
    let one_value = vm
        .static_sizes()
        .is_some_and(|s| s.iter().product::<i64>() == 1);
    if let [(0, mask, mm)] = given.as_slice() {
        if mm.dtype == Dtype::Bool && one_value && !accumulate {
            let v = cx.reshape_const(&vs, &[])?;
            let extra: Vec<i64> = (mm.sizes.len() as i64..rank as i64).collect();
            let m = if extra.is_empty() {
                mask.clone()
            } else {
                cx.unsqueeze(mask, &extra)
            };
            let y = cx.node("Where", &[&m, &v, &xs], vec![]);
            let y = cx.cast(&y, c, out)?;
            cx.set(0, y);
            return Ok(());
        }
    }
    if given.is_empty()
        || given
            .iter()
            .any(|(_, _, m)| matches!(m.dtype, Dtype::Bool | Dtype::Uint8))
    {
        return Err(Error::unsupported(
            "index_put with boolean masks (other than one value at a full mask)",
        ));
    }
    let positions: Vec<usize> = given.iter().map(|g| g.0).collect();
    let adjacent = positions.windows(2).all(|w| w[1] == w[0] + 1);
    if adjacent && positions[0] > 0 {
        return Err(Error::unsupported(
            "index_put on adjacent dims after the first",
        ));
    }
    let k = given.len();
    let mut perm: Vec<i64> = positions.iter().map(|p| *p as i64).collect();
    perm.extend((0..rank as i64).filter(|d| !positions.contains(&(*d as usize))));
    let identity = perm.iter().enumerate().all(|(i, p)| *p == i as i64);
    let xt = if identity {
        xs
    } else {
        cx.transpose(&xs, &perm)
    };
    let mut idx64 = Vec::new();
    for (_, name, m) in &given {
        idx64.push(cx.cast(name, m.dtype, Dtype::Int64)?);
    }
    let mut sum = idx64[0].clone();
    for i in &idx64[1..] {
        sum = cx.node("Add", &[&sum, i], vec![]);
    }
    let bshape = cx.shape(&sum);
    let mut stacked = Vec::new();
    for i in &idx64 {
        let e = cx.node("Expand", &[i, &bshape], vec![]);
        stacked.push(cx.unsqueeze(&e, &[-1]));
    }
    let nd = cx.concat(&stacked, -1);
    // Updates have the shape B + the dims not indexed.
    let xt_shape = cx.shape(&xt);
    let kk = cx.const_i64s(&[k as i64]);
    let end = cx.const_i64s(&[i64::MAX]);
    let rest = cx.node("Slice", &[&xt_shape, &kk, &end], vec![]);
    let ushape = cx.concat(&[bshape, rest], 0);
    let updates = cx.node("Expand", &[&vs, &ushape], vec![]);
    let attrs = if accumulate {
        vec![attr_str("reduction", "add")]
    } else {
        vec![]
    };
    let mut y = cx.node("ScatterND", &[&xt, &nd, &updates], attrs);
    if !identity {
        let mut inverse = vec![0i64; rank];
        for (i, p) in perm.iter().enumerate() {
            inverse[*p as usize] = i as i64;
        }
        y = cx.transpose(&y, &inverse);
    }
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// rand / randn: ONNX's random generators (not torch's stream).
fn random(cx: &mut Cx) -> Result<()> {
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let shape = cx.int_list("size")?;
    let zeros = constant_of_shape(cx, &shape, Lit::Float(0.0), c)?;
    let op = if cx.node.target.name == "randn" {
        "RandomNormalLike"
    } else {
        "RandomUniformLike"
    };
    let y = cx.node(op, &[&zeros], vec![]);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// Batch norm with the batch's own statistics (training mode, or the
/// decomposition of instance norm): normalize over every dim but 1. The
/// saved mean and inverse std and, for the functional form, the updated
/// running stats are outputs too.
fn batch_norm_batch_stats(cx: &mut Cx) -> Result<()> {
    let x = cx.input("input")?;
    let meta = cx.meta("input")?;
    let rank = meta.sizes.len();
    if rank < 2 {
        return Err(Error::bad_input(
            "batch norm of a tensor with fewer than 2 dims",
        ));
    }
    let channels = meta.sizes[1].clone();
    let eps = cx.opt_float("eps")?.unwrap_or(1e-5);
    let momentum = cx.opt_float("momentum")?.unwrap_or(0.1);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let axes: Vec<i64> = std::iter::once(0).chain(2..rank as i64).collect();
    let mean = cx.reduce("ReduceMean", &xs, Some(&axes), true);
    let d = cx.node("Sub", &[&xs, &mean], vec![]);
    let d2 = cx.node("Mul", &[&d, &d], vec![]);
    let var = cx.reduce("ReduceMean", &d2, Some(&axes), true);
    let e = cx.scalar(Lit::Float(eps), c)?;
    let ve = cx.node("Add", &[&var, &e], vec![]);
    let sd = cx.node("Sqrt", &[&ve], vec![]);
    let mut y = cx.node("Div", &[&d, &sd], vec![]);
    let affine: Vec<i64> = std::iter::once(-1).chain(vec![1; rank - 2]).collect();
    if cx.has("weight") {
        let w = param_or(cx, "weight", 1.0, &channels, c)?;
        let w = cx.reshape_const(&w, &affine)?;
        y = cx.node("Mul", &[&y, &w], vec![]);
    }
    if cx.has("bias") {
        let b = param_or(cx, "bias", 0.0, &channels, c)?;
        let b = cx.reshape_const(&b, &affine)?;
        y = cx.node("Add", &[&y, &b], vec![]);
    }
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    let flat = |cx: &mut Cx, v: &str| cx.reshape_const(v, &[-1]);
    if cx.out_used(1) {
        let m = flat(cx, &mean)?;
        let d = cx.out_dtype(1)?;
        let m = cx.cast(&m, c, d)?;
        cx.set(1, m);
    }
    if cx.out_used(2) {
        let r = cx.node("Reciprocal", &[&sd], vec![]);
        let r = flat(cx, &r)?;
        let d = cx.out_dtype(2)?;
        let r = cx.cast(&r, c, d)?;
        cx.set(2, r);
    }
    if cx.out_count() > 3 && (cx.out_used(3) || cx.out_used(4)) {
        // running = (1 - momentum) * running + momentum * batch (unbiased var).
        let count = match meta.static_sizes() {
            Some(s) => s.iter().product::<i64>() / s[1].max(1),
            None => {
                return Err(Error::unsupported(
                    "running stats of symbolic batch norm inputs",
                ))
            }
        };
        let keep = cx.scalar(Lit::Float(1.0 - momentum), c)?;
        let m = cx.scalar(Lit::Float(momentum), c)?;
        let bessel = cx.scalar(Lit::Float(count as f64 / (count as f64 - 1.0).max(1.0)), c)?;
        let unbiased = cx.node("Mul", &[&var, &bessel], vec![]);
        for (i, (name, batch)) in [
            (3, ("running_mean", mean.clone())),
            (4, ("running_var", unbiased)),
        ] {
            let rs = cx.input(name)?;
            let rd = cx.dtype(name)?;
            let rs = cx.cast(&rs, rd, c)?;
            let b = flat(cx, &batch)?;
            let a = cx.node("Mul", &[&rs, &keep], vec![]);
            let bm = cx.node("Mul", &[&b, &m], vec![]);
            let r = cx.node("Add", &[&a, &bm], vec![]);
            let d = cx.out_dtype(i)?;
            let r = cx.cast(&r, c, d)?;
            cx.set(i, r);
        }
    }
    Ok(())
}
