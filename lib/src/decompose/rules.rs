//! The decomposition table: each entry rewrites one op into core ATen ops,
//! to the same result as torch's own decomposition
//! (`torch._decomp.core_aten_decompositions()` and the CompositeImplicit
//! kernels `run_decompositions()` traces through). Results that are not
//! core themselves are decomposed again by the driver.
//!
//! A rule returns, for each value the node defines, the value that now
//! holds it: the same id when the rule wrote into it, another value when
//! the op was an identity (a no-op `to`, dropout in eval mode).

use super::args::A;
use super::edit::{ints_arg, is_contiguous, norm_dim, scalar, sym_ints_arg, syms, Emitter, Out};
use crate::ir::{Argument, Dtype, MemoryFormat, Sym, SymRef, TensorMeta, ValueId};
use crate::{Error, Result};

pub type RuleFn = fn(&mut Emitter, &A) -> Result<Vec<ValueId>>;

pub struct Rule {
    /// The op it rewrites (`aten.linear.default`).
    pub source: &'static str,
    /// The ops it may emit (for `--list`; the driver lowers them further).
    pub results: &'static [&'static str],
    pub apply: RuleFn,
}

macro_rules! rules {
    ($( $src:literal => [$($res:literal),*] $f:expr ;)*) => {
        pub static RULES: &[Rule] = &[ $( Rule { source: $src, results: &[$($res),*], apply: $f } ),* ];
    };
}

rules! {
    "aten.linear.default" => ["aten.permute.default", "aten.addmm.default", "aten.mm.default", "aten.view.default", "aten.matmul.default", "aten.add.Tensor"] linear;
    "aten.matmul.default" => ["aten.mm.default", "aten.bmm.default", "aten.view.default", "aten.expand.default", "aten.unsqueeze.default", "aten.squeeze.dims", "aten.clone.default", "aten.mul.Tensor", "aten.sum.dim_IntList"] matmul_rule;
    "aten.transpose.int" => ["aten.permute.default"] transpose;
    "aten.t.default" => ["aten.permute.default"] t;
    "aten.reshape.default" => ["aten.view.default", "aten.clone.default"] reshape_rule;
    "aten._unsafe_view.default" => ["aten.view.default"] unsafe_view;
    "aten.view_as.default" => ["aten.view.default"] view_as;
    "aten.flatten.using_ints" => ["aten.view.default", "aten.clone.default"] flatten;
    "aten.unflatten.int" => ["aten.view.default", "aten.clone.default"] unflatten;
    "aten.squeeze.dim" => ["aten.squeeze.dims"] squeeze_dim;
    "aten.squeeze.default" => ["aten.squeeze.dims"] squeeze_all;
    "aten.contiguous.default" => ["aten.clone.default"] contiguous;
    "aten.lift_fresh_copy.default" => ["aten.clone.default"] lift_fresh_copy;
    "aten.dropout.default" => ["aten.native_dropout.default"] dropout;
    "aten.feature_dropout.default" => [] dropout;
    "aten.alpha_dropout.default" => [] dropout;
    "aten.layer_norm.default" => ["aten.native_layer_norm.default"] layer_norm;
    "aten.group_norm.default" => ["aten.native_group_norm.default"] group_norm;
    "aten.batch_norm.default" => ["aten._native_batch_norm_legit_no_training.default"] batch_norm;
    "aten.conv1d.default" => ["aten.convolution.default"] conv;
    "aten.conv2d.default" => ["aten.convolution.default"] conv;
    "aten.conv3d.default" => ["aten.convolution.default"] conv;
    "aten.conv1d.padding" => ["aten.convolution.default", "aten.constant_pad_nd.default"] conv;
    "aten.conv2d.padding" => ["aten.convolution.default", "aten.constant_pad_nd.default"] conv;
    "aten.conv3d.padding" => ["aten.convolution.default", "aten.constant_pad_nd.default"] conv;
    "aten.conv_transpose1d.default" => ["aten.convolution.default"] conv_transpose;
    "aten.conv_transpose2d.input" => ["aten.convolution.default"] conv_transpose;
    "aten.conv_transpose3d.input" => ["aten.convolution.default"] conv_transpose;
    "aten._convolution.default" => ["aten.convolution.default"] underscore_convolution;
    "aten.max_pool2d.default" => ["aten.max_pool2d_with_indices.default"] max_pool2d;
    "aten.max_pool3d.default" => ["aten.max_pool3d_with_indices.default"] max_pool3d;
    "aten.max_pool1d.default" => ["aten.unsqueeze.default", "aten.max_pool2d_with_indices.default", "aten.squeeze.dims"] max_pool1d;
    "aten.adaptive_avg_pool2d.default" => ["aten.mean.dim", "aten._adaptive_avg_pool2d.default"] adaptive_avg_pool2d;
    "aten.softmax.int" => ["aten._softmax.default", "aten._to_copy.default"] softmax;
    "aten.log_softmax.int" => ["aten._log_softmax.default", "aten._to_copy.default"] log_softmax;
    "aten.to.dtype" => ["aten._to_copy.default"] to;
    "aten.to.dtype_layout" => ["aten._to_copy.default"] to;
    "aten.to.device" => ["aten._to_copy.default"] to;
    "aten.to.other" => ["aten._to_copy.default"] to;
    "aten.type_as.default" => ["aten._to_copy.default"] to;
    "aten.__and__.Tensor" => ["aten.bitwise_and.Tensor"] renamed;
    "aten.__or__.Tensor" => ["aten.bitwise_or.Tensor"] renamed;
    "aten.__xor__.Tensor" => ["aten.bitwise_xor.Tensor"] renamed;
    "aten.__and__.Scalar" => ["aten.bitwise_and.Scalar"] renamed;
    "aten.__or__.Scalar" => ["aten.bitwise_or.Scalar"] renamed;
    "aten.arange.default" => ["aten.arange.start_step"] arange;
    "aten.arange.start" => ["aten.arange.start_step"] arange;
    "aten.zeros.default" => ["aten.full.default"] full_of;
    "aten.ones.default" => ["aten.full.default"] full_of;
    "aten.new_zeros.default" => ["aten.full.default"] full_of;
    "aten.new_ones.default" => ["aten.full.default"] full_of;
    "aten.new_full.default" => ["aten.full.default"] full_of;
    "aten.zeros_like.default" => ["aten.full_like.default"] full_like_of;
    "aten.ones_like.default" => ["aten.full_like.default"] full_like_of;
    "aten.where.ScalarOther" => ["aten.scalar_tensor.default", "aten.where.self"] where_scalar;
    "aten.where.ScalarSelf" => ["aten.scalar_tensor.default", "aten.where.self"] where_scalar;
    "aten.where.Scalar" => ["aten.scalar_tensor.default", "aten.where.self"] where_scalar;
    "aten.masked_fill.Scalar" => ["aten.scalar_tensor.default", "aten.where.self"] masked_fill;
    "aten.masked_fill.Tensor" => ["aten.where.self"] masked_fill;
    "aten.split.Tensor" => ["aten.split_with_sizes.default"] split;
    "aten.chunk.default" => ["aten.split_with_sizes.default"] chunk;
    "aten.unbind.int" => ["aten.select.int"] unbind;
    "aten.stack.default" => ["aten.unsqueeze.default", "aten.cat.default"] stack;
    "aten.diff.default" => ["aten.slice.Tensor", "aten.sub.Tensor", "aten.logical_xor.default", "aten.cat.default"] diff;
    "aten.scaled_dot_product_attention.default" => ["aten.mul.Scalar", "aten.permute.default", "aten.matmul.default", "aten.add.Tensor", "aten._softmax.default", "aten.eq.Scalar", "aten.logical_not.default", "aten.any.dim", "aten.full_like.default", "aten.where.self", "aten.native_dropout.default", "aten.arange.start_step", "aten.ge.Tensor"] sdpa;
    "aten.silu.default" => ["aten.sigmoid.default", "aten.mul.Tensor"] silu;
    "aten.hardswish.default" => ["aten.add.Tensor", "aten.clamp.default", "aten.div.Tensor", "aten.mul.Tensor"] hardswish;
    "aten.hardsigmoid.default" => ["aten.add.Tensor", "aten.clamp.default", "aten.div.Tensor"] hardsigmoid;
    "aten.relu6.default" => ["aten.hardtanh.default"] relu6;
    "aten.clamp_min.default" => ["aten.clamp.default"] clamp_one;
    "aten.clamp_max.default" => ["aten.clamp.default"] clamp_one;
    "aten.square.default" => ["aten.pow.Tensor_Scalar"] square;
    "aten.rsub.Scalar" => ["aten.sub.Tensor"] rsub;
    "aten.softplus.default" => ["aten.mul.Tensor", "aten.exp.default", "aten.log1p.default", "aten.div.Tensor", "aten.gt.Scalar", "aten.where.self"] softplus;
    "aten.mish.default" => ["aten.softplus.default", "aten.tanh.default", "aten.mul.Tensor"] mish;
    "aten.sum.default" => ["aten.sum.dim_IntList"] sum_all;
    "aten.std.correction" => ["aten.var.correction", "aten.sqrt.default"] std;
    "aten.expand_as.default" => ["aten.expand.default"] expand_as;
    "aten.baddbmm.default" => ["aten.bmm.default", "aten.mul.Tensor", "aten.add.Tensor"] baddbmm;
    "aten.pad.default" => ["aten.constant_pad_nd.default", "aten.reflection_pad1d.default", "aten.reflection_pad2d.default", "aten.reflection_pad3d.default", "aten.replication_pad1d.default", "aten.replication_pad2d.default", "aten.replication_pad3d.default"] pad;
    "aten.replication_pad1d.default" => ["aten.unsqueeze.default", "aten.replication_pad2d.default", "aten.squeeze.dims"] replication_pad1d;
    "aten.cdist.default" => ["aten._cdist_forward.default"] same_args;
    "aten.pdist.default" => ["aten._pdist_forward.default"] same_args;
    "aten.embedding_bag.padding_idx" => ["aten._embedding_bag.default"] same_args;
    "aten.empty_permuted.default" => ["aten.empty.memory_format"] empty_of;
    "aten.fill.Scalar" => ["aten.full_like.default"] fill;
    "aten.gru.input" => ["aten.select.int", "aten.linear.default", "aten.chunk.default", "aten.sigmoid.default", "aten.tanh.default", "aten.mul.Tensor", "aten.add.Tensor", "aten.sub.Tensor", "aten.stack.default", "aten.cat.default", "aten.transpose.int"] lstm;
    "aten.rnn_tanh.input" => ["aten.select.int", "aten.linear.default", "aten.tanh.default", "aten.add.Tensor", "aten.stack.default", "aten.cat.default", "aten.transpose.int"] lstm;
    "aten.rnn_relu.input" => ["aten.select.int", "aten.linear.default", "aten.relu.default", "aten.add.Tensor", "aten.stack.default", "aten.cat.default", "aten.transpose.int"] lstm;
    "aten.lstm.input" => ["aten.select.int", "aten.linear.default", "aten.chunk.default", "aten.sigmoid.default", "aten.tanh.default", "aten.mul.Tensor", "aten.add.Tensor", "aten.stack.default", "aten.cat.default", "aten.transpose.int", "aten.dropout.default"] lstm;
    "higher_order.wrap_with_set_grad_enabled" => [] inline_subgraph;
    "aten.selu.default" => ["aten.elu.default"] selu;
    "aten.exp2.default" => ["aten.pow.Scalar"] exp2;
    "aten.rrelu_with_noise_functional.default" => ["aten.leaky_relu.default"] rrelu;
    "aten._convolution_mode.default" => ["aten.convolution.default", "aten.constant_pad_nd.default"] conv;
    "aten.addr.default" => ["aten.outer.default", "aten.mul.Tensor", "aten.add.Tensor"] addr;
    "aten.all.default" => ["aten.logical_not.default", "aten.any.default"] all;
    "aten.all.dim" => ["aten.logical_not.default", "aten.any.dim"] all;
    "aten.all.dims" => ["aten.logical_not.default", "aten.any.dims"] all;
    "aten.broadcast_tensors.default" => ["aten.expand.default"] broadcast_tensors;
    "aten.channel_shuffle.default" => ["aten.view.default", "aten.permute.default", "aten.clone.default"] channel_shuffle;
    "aten.count_nonzero.default" => ["aten.ne.Scalar", "aten.sum.dim_IntList"] count_nonzero;
    "aten.count_nonzero.dim_IntList" => ["aten.ne.Scalar", "aten.sum.dim_IntList"] count_nonzero;
    "aten.deg2rad.default" => ["aten.mul.Tensor"] deg_rad;
    "aten.rad2deg.default" => ["aten.mul.Tensor"] deg_rad;
    "aten.dot.default" => ["aten.mul.Tensor", "aten.sum.dim_IntList"] dot;
    "aten.mv.default" => ["aten.matmul.default"] mv;
    "aten.outer.default" => ["aten.unsqueeze.default", "aten.mul.Tensor"] outer;
    "aten.eye.default" => ["aten.arange.start_step", "aten.unsqueeze.default", "aten.eq.Tensor", "aten._to_copy.default"] eye;
    "aten.eye.m" => ["aten.arange.start_step", "aten.unsqueeze.default", "aten.eq.Tensor", "aten._to_copy.default"] eye;
    "aten.fliplr.default" => ["aten.flip.default"] flip_lr_ud;
    "aten.flipud.default" => ["aten.flip.default"] flip_lr_ud;
    "aten.floor_divide.default" => ["aten.div.Tensor_mode"] floor_divide;
    "aten.floor_divide.Scalar" => ["aten.div.Scalar_mode"] floor_divide;
    "aten.frac.default" => ["aten.trunc.default", "aten.sub.Tensor"] frac;
    "aten.hstack.default" => ["aten.cat.default"] hvstack;
    "aten.vstack.default" => ["aten.unsqueeze.default", "aten.cat.default"] hvstack;
    "aten.isfinite.default" => ["aten.isinf.default", "aten.isnan.default", "aten.logical_or.default", "aten.logical_not.default"] isfinite;
    "aten.isposinf.default" => ["aten.eq.Scalar"] isinf_signed;
    "aten.isneginf.default" => ["aten.eq.Scalar"] isinf_signed;
    "aten.lerp.Tensor" => ["aten.sub.Tensor", "aten.mul.Tensor", "aten.add.Tensor", "aten.lt.Scalar", "aten.where.self"] lerp_tensor;
    "aten.logaddexp.default" => ["aten.maximum.default", "aten.sub.Tensor", "aten.abs.default", "aten.neg.default", "aten.exp.default", "aten.log1p.default", "aten.add.Tensor"] logaddexp;
    "aten.mse_loss.default" => ["aten.sub.Tensor", "aten.mul.Tensor", "aten.mean.default", "aten.sum.dim_IntList"] loss;
    "aten.l1_loss.default" => ["aten.sub.Tensor", "aten.abs.default", "aten.mean.default", "aten.sum.dim_IntList"] loss;
    "aten.huber_loss.default" => ["aten.sub.Tensor", "aten.abs.default", "aten.lt.Scalar", "aten.mul.Tensor", "aten.where.self", "aten.mean.default"] loss;
    "aten.smooth_l1_loss.default" => ["aten.sub.Tensor", "aten.abs.default", "aten.lt.Scalar", "aten.mul.Tensor", "aten.div.Tensor", "aten.where.self", "aten.mean.default"] loss;
    "aten.nan_to_num.default" => ["aten.isnan.default", "aten.eq.Scalar", "aten.scalar_tensor.default", "aten.where.self"] nan_to_num;
    "aten.nansum.default" => ["aten.isnan.default", "aten.where.self", "aten.sum.dim_IntList"] nan_reduce;
    "aten.nanmean.default" => ["aten.isnan.default", "aten.where.self", "aten.sum.dim_IntList", "aten.logical_not.default", "aten.div.Tensor"] nan_reduce;
    "aten.new_empty.default" => ["aten.empty.memory_format"] empty_of;
    "aten.empty_like.default" => ["aten.empty.memory_format"] empty_of;
    "aten.numpy_T.default" => ["aten.permute.default"] numpy_t;
    "aten.one_hot.default" => ["aten.arange.start_step", "aten.unsqueeze.default", "aten.eq.Tensor", "aten._to_copy.default"] one_hot;
    "aten.rms_norm.default" => ["aten.mul.Tensor", "aten.mean.dim", "aten.add.Tensor", "aten.rsqrt.default"] rms_norm;
    "aten.rot90.default" => ["aten.flip.default", "aten.permute.default", "aten.clone.default"] rot90;
    "aten.rrelu.default" => ["aten.leaky_relu.default"] rrelu;
    "aten.rsub.Tensor" => ["aten.sub.Tensor"] rsub_tensor;
    "aten.sinc.default" => ["aten.mul.Tensor", "aten.sin.default", "aten.div.Tensor", "aten.eq.Scalar", "aten.scalar_tensor.default", "aten.where.self"] sinc;
    "aten.std_mean.dim" => ["aten.var.correction", "aten.sqrt.default", "aten.mean.dim"] var_mean;
    "aten.std_mean.correction" => ["aten.var.correction", "aten.sqrt.default", "aten.mean.dim"] var_mean;
    "aten.tile.default" => ["aten.repeat.default"] tile;
    "aten.trace.default" => ["aten.diag.default", "aten.sum.dim_IntList"] trace;
    "aten.upsample_nearest1d.vec" => ["aten.arange.start_step", "aten.mul.Tensor", "aten._to_copy.default", "aten.index.Tensor"] upsample_nearest1d;
    "aten.lstm_cell.default" => ["aten.linear.default", "aten.chunk.default", "aten.sigmoid.default", "aten.tanh.default", "aten.mul.Tensor", "aten.add.Tensor"] rnn_cell;
    "aten.gru_cell.default" => ["aten.linear.default", "aten.chunk.default", "aten.sigmoid.default", "aten.tanh.default", "aten.mul.Tensor", "aten.add.Tensor", "aten.sub.Tensor"] rnn_cell;
    "aten.rnn_tanh_cell.default" => ["aten.linear.default", "aten.tanh.default", "aten.add.Tensor"] rnn_cell;
    "aten.rnn_relu_cell.default" => ["aten.linear.default", "aten.relu.default", "aten.add.Tensor"] rnn_cell;
    "aten.alias_copy.default" => ["aten.alias.default", "aten.clone.default"] copy_variant;
    "aten.t_copy.default" => ["aten.t.default", "aten.clone.default"] copy_variant;
    "aten.transpose_copy.int" => ["aten.transpose.int", "aten.clone.default"] copy_variant;
    "aten.unsqueeze_copy.default" => ["aten.unsqueeze.default", "aten.clone.default"] copy_variant;
    "aten.squeeze_copy.default" => ["aten.squeeze.default", "aten.clone.default"] copy_variant;
    "aten.squeeze_copy.dim" => ["aten.squeeze.dim", "aten.clone.default"] copy_variant;
    "aten.squeeze_copy.dims" => ["aten.squeeze.dims", "aten.clone.default"] copy_variant;
    "aten.expand_copy.default" => ["aten.expand.default", "aten.clone.default"] copy_variant;
    "aten.permute_copy.default" => ["aten.permute.default", "aten.clone.default"] copy_variant;
    "aten.view_copy.default" => ["aten.view.default", "aten.clone.default"] copy_variant;
    "aten.slice_copy.Tensor" => ["aten.slice.Tensor", "aten.clone.default"] copy_variant;
    "aten.select_copy.int" => ["aten.select.int", "aten.clone.default"] copy_variant;
    "aten.unfold_copy.default" => ["aten.unfold.default", "aten.clone.default"] copy_variant;
    "aten.split_with_sizes_copy.default" => ["aten.split_with_sizes.default", "aten.clone.default"] copy_variant;
    "aten.unfold.default" => ["aten.arange.start_step", "aten.mul.Tensor", "aten.add.Tensor", "aten.unsqueeze.default", "aten.index.Tensor", "aten.permute.default"] unfold;
    "aten.take.default" => ["aten.view.default", "aten.index.Tensor"] take;
    "aten.take_along_dim.default" => ["aten.expand.default", "aten.gather.default", "aten.view.default"] take_along_dim;
    "aten.argsort.default" => ["aten.sort.default"] sort_like;
    "aten.argsort.stable" => ["aten.sort.default"] sort_like;
    "aten.msort.default" => ["aten.sort.default"] sort_like;
    "aten.aminmax.default" => ["aten.amin.default", "aten.amax.default"] aminmax;
    "aten.block_diag.default" => ["aten.constant_pad_nd.default", "aten.cat.default"] block_diag;
    "aten.chain_matmul.default" => ["aten.mm.default"] chain_matmul;
    "aten.column_stack.default" => ["aten.view.default", "aten.cat.default"] column_stack;
    "aten.dstack.default" => ["aten.view.default", "aten.cat.default"] column_stack;
    "aten.diag_embed.default" => ["aten.arange.start_step", "aten.sub.Tensor", "aten.eq.Scalar", "aten.constant_pad_nd.default", "aten.unsqueeze.default", "aten.where.self"] diag_embed;
    "aten.fill.Tensor" => ["aten.expand.default", "aten.clone.default", "aten._to_copy.default"] fill_tensor;
    "aten.float_power.Tensor_Scalar" => ["aten._to_copy.default", "aten.pow.Tensor_Scalar"] float_power;
    "aten.float_power.Tensor_Tensor" => ["aten._to_copy.default", "aten.pow.Tensor_Tensor"] float_power;
    "aten.float_power.Scalar" => ["aten._to_copy.default", "aten.pow.Scalar"] float_power;
    "aten.heaviside.default" => ["aten.eq.Scalar", "aten.gt.Scalar", "aten._to_copy.default", "aten.where.self"] heaviside;
    "aten.inner.default" => ["aten.matmul.default", "aten.permute.default", "aten.view.default"] inner;
    "aten.tensordot.default" => ["aten.permute.default", "aten.view.default", "aten.mm.default"] tensordot;
    "aten.isclose.default" => ["aten.sub.Tensor", "aten.abs.default", "aten.mul.Tensor", "aten.add.Tensor", "aten.le.Tensor", "aten.eq.Tensor", "aten.logical_or.default"] isclose;
    "aten.kron.default" => ["aten.unsqueeze.default", "aten.mul.Tensor", "aten.view.default"] kron;
    "aten.linalg_cross.default" => ["aten.slice.Tensor", "aten.mul.Tensor", "aten.sub.Tensor", "aten.cat.default"] cross;
    "aten.linspace.default" => ["aten.arange.start_step", "aten.mul.Tensor", "aten.add.Tensor", "aten.where.self"] linspace;
    "aten.logaddexp2.default" => ["aten.maximum.default", "aten.pow.Scalar", "aten.log1p.default", "aten.add.Tensor"] logaddexp;
    "aten.max_pool1d_with_indices.default" => ["aten.unsqueeze.default", "aten.max_pool2d_with_indices.default", "aten.squeeze.dims"] max_pool1d;
    "aten.meshgrid.indexing" => ["aten.view.default", "aten.expand.default"] meshgrid;
    "aten.meshgrid.default" => ["aten.view.default", "aten.expand.default"] meshgrid;
    "aten.pairwise_distance.default" => ["aten.sub.Tensor", "aten.add.Tensor", "aten.linalg_vector_norm.default"] pairwise_distance;
    "aten.xlogy.Scalar_Self" => ["aten.scalar_tensor.default", "aten.log.default", "aten.mul.Tensor", "aten.where.self"] xlogy;
    "aten.xlogy.Scalar_Other" => ["aten.scalar_tensor.default", "aten.log.default", "aten.mul.Tensor", "aten.where.self"] xlogy;
    "aten.xlogy.Tensor" => ["aten.log.default", "aten.mul.Tensor", "aten.eq.Scalar", "aten.isnan.default", "aten.where.self"] xlogy;
    "aten.celu.default" => ["aten.elu.default"] celu;
    "aten.erfc.default" => ["aten.erf.default", "aten.neg.default", "aten.add.Tensor"] erfc;
    "aten.glu.default" => ["aten.split_with_sizes.default", "aten.sigmoid.default", "aten.mul.Tensor"] glu;
    "aten.hardshrink.default" => ["aten.abs.default", "aten.le.Scalar", "aten.scalar_tensor.default", "aten.where.self"] hardshrink;
    "aten.softshrink.default" => ["aten.gt.Scalar", "aten.lt.Scalar", "aten.sub.Tensor", "aten.add.Tensor", "aten.scalar_tensor.default", "aten.where.self"] softshrink;
    "aten.threshold.default" => ["aten.le.Scalar", "aten.scalar_tensor.default", "aten.where.self"] threshold;
    "aten.lerp.Scalar" => ["aten.sub.Tensor", "aten.mul.Tensor", "aten.add.Tensor"] lerp;
    "aten.log_sigmoid.default" => ["aten.abs.default", "aten.neg.default", "aten.exp.default", "aten.log1p.default", "aten.clamp.default", "aten.sub.Tensor"] log_sigmoid;
    "aten.logit.default" => ["aten.clamp.default", "aten.neg.default", "aten.add.Tensor", "aten.div.Tensor", "aten.log.default"] logit;
    "aten.prelu.default" => ["aten.view.default", "aten.mul.Tensor", "aten.gt.Scalar", "aten.where.self"] prelu;
    "aten.addcmul.default" => ["aten.mul.Tensor", "aten.add.Tensor"] addc;
    "aten.addcdiv.default" => ["aten.div.Tensor", "aten.mul.Tensor", "aten.add.Tensor"] addc;
    "aten.diag.default" => ["aten.arange.start_step", "aten.index.Tensor"] diag;
    "aten.einsum.default" => ["aten.sum.dim_IntList", "aten.permute.default", "aten.view.default", "aten.bmm.default", "aten.clone.default"] einsum;
    "aten.mT.default" => ["aten.permute.default"] mt_rule;
    "aten.movedim.int" => ["aten.permute.default"] movedim;
    "aten.swapaxes.default" => ["aten.permute.default"] swapaxes;
    "aten.narrow.default" => ["aten.slice.Tensor"] narrow;
    "aten.pixel_shuffle.default" => ["aten.view.default", "aten.permute.default", "aten.clone.default"] pixel_shuffle;
    "aten.pixel_unshuffle.default" => ["aten.view.default", "aten.permute.default", "aten.clone.default"] pixel_shuffle;
    "aten.repeat_interleave.self_int" => ["aten.unsqueeze.default", "aten.expand.default", "aten.clone.default", "aten.view.default"] repeat_interleave;
    "aten.roll.default" => ["aten.slice.Tensor", "aten.cat.default", "aten.view.default"] roll;
    "aten.tril.default" => ["aten.arange.start_step", "aten.unsqueeze.default", "aten.sub.Tensor", "aten.le.Scalar", "aten.scalar_tensor.default", "aten.where.self"] tri;
    "aten.triu.default" => ["aten.arange.start_step", "aten.unsqueeze.default", "aten.sub.Tensor", "aten.ge.Scalar", "aten.scalar_tensor.default", "aten.where.self"] tri;
    "aten.cosine_similarity.default" => ["aten.mul.Tensor", "aten.sum.dim_IntList", "aten.sqrt.default", "aten.clamp.default", "aten.div.Tensor"] cosine_similarity;
    "aten.instance_norm.default" => ["aten.mean.dim", "aten.var.correction", "aten.sub.Tensor", "aten.add.Tensor", "aten.rsqrt.default", "aten.mul.Tensor", "aten.view.default"] instance_norm;
    "aten.linalg_vector_norm.default" => ["aten.abs.default", "aten.mul.Tensor", "aten.pow.Tensor_Scalar", "aten.sum.dim_IntList", "aten.sqrt.default", "aten.amax.default", "aten.amin.default", "aten.ne.Scalar", "aten._to_copy.default"] vector_norm;
    "aten.logsumexp.default" => ["aten.amax.default", "aten.abs.default", "aten.eq.Scalar", "aten.scalar_tensor.default", "aten.where.self", "aten.sub.Tensor", "aten.exp.default", "aten.sum.dim_IntList", "aten.log.default", "aten.squeeze.dims", "aten.add.Tensor"] logsumexp;
    "aten.std.dim" => ["aten.var.correction", "aten.sqrt.default"] std_dim;
    "aten.var.dim" => ["aten.var.correction"] var_dim;
    "aten.var_mean.dim" => ["aten.var.correction", "aten.mean.dim"] var_mean;
    "aten.var_mean.correction" => ["aten.var.correction", "aten.mean.dim"] var_mean;
    "higher_order.wrap_with_autocast" => [] inline_subgraph;
    "aten.zero.default" => ["aten.full_like.default"] fill;
}

/// Ops that are another op under another name: (alias, op). Arguments
/// map by name, or by position where the names differ.
pub static ALIASES: &[(&str, &str)] = &[
    ("aten.absolute.default", "aten.abs.default"),
    ("aten.arccos.default", "aten.acos.default"),
    ("aten.arccosh.default", "aten.acosh.default"),
    ("aten.arcsin.default", "aten.asin.default"),
    ("aten.arcsinh.default", "aten.asinh.default"),
    ("aten.arctan.default", "aten.atan.default"),
    ("aten.arctan2.default", "aten.atan2.default"),
    ("aten.arctanh.default", "aten.atanh.default"),
    ("aten.clip.default", "aten.clamp.default"),
    ("aten.clip.Tensor", "aten.clamp.Tensor"),
    ("aten.clamp_min.Tensor", "aten.clamp.Tensor"),
    ("aten.clamp_max.Tensor", "aten.clamp.Tensor"),
    ("aten.concat.default", "aten.cat.default"),
    ("aten.concatenate.default", "aten.cat.default"),
    ("aten.divide.Tensor", "aten.div.Tensor"),
    ("aten.divide.Scalar", "aten.div.Scalar"),
    ("aten.divide.Tensor_mode", "aten.div.Tensor_mode"),
    ("aten.divide.Scalar_mode", "aten.div.Scalar_mode"),
    ("aten.true_divide.Tensor", "aten.div.Tensor"),
    ("aten.true_divide.Scalar", "aten.div.Scalar"),
    ("aten.multiply.Tensor", "aten.mul.Tensor"),
    ("aten.multiply.Scalar", "aten.mul.Scalar"),
    ("aten.subtract.Tensor", "aten.sub.Tensor"),
    ("aten.subtract.Scalar", "aten.sub.Scalar"),
    ("aten.negative.default", "aten.neg.default"),
    ("aten.fix.default", "aten.trunc.default"),
    ("aten.sgn.default", "aten.sign.default"),
    ("aten.greater.Tensor", "aten.gt.Tensor"),
    ("aten.greater.Scalar", "aten.gt.Scalar"),
    ("aten.greater_equal.Tensor", "aten.ge.Tensor"),
    ("aten.greater_equal.Scalar", "aten.ge.Scalar"),
    ("aten.less.Tensor", "aten.lt.Tensor"),
    ("aten.less.Scalar", "aten.lt.Scalar"),
    ("aten.less_equal.Tensor", "aten.le.Tensor"),
    ("aten.less_equal.Scalar", "aten.le.Scalar"),
    ("aten.not_equal.Tensor", "aten.ne.Tensor"),
    ("aten.not_equal.Scalar", "aten.ne.Scalar"),
    ("aten.max.other", "aten.maximum.default"),
    ("aten.min.other", "aten.minimum.default"),
    ("aten.unsafe_split.Tensor", "aten.split.Tensor"),
    (
        "aten.unsafe_split_with_sizes.default",
        "aten.split_with_sizes.default",
    ),
    ("aten._unsafe_index.Tensor", "aten.index.Tensor"),
    ("aten._unsafe_index_put.default", "aten.index_put.default"),
    (
        "aten.adaptive_avg_pool3d.default",
        "aten._adaptive_avg_pool3d.default",
    ),
    ("aten.size.int", "aten.sym_size.int"),
    ("aten.stride.int", "aten.sym_stride.int"),
    ("aten.item.default", "aten._local_scalar_dense.default"),
    ("prims.scalar_tensor.default", "aten.scalar_tensor.default"),
    ("aten.ger.default", "aten.outer.default"),
    ("aten.vdot.default", "aten.dot.default"),
    ("aten.row_stack.default", "aten.vstack.default"),
    (
        "aten.native_channel_shuffle.default",
        "aten.channel_shuffle.default",
    ),
    ("aten.var.default", "aten.var.dim"),
    ("aten.std.default", "aten.std.dim"),
    ("aten.std_mean.default", "aten.std_mean.dim"),
    ("aten.var_mean.default", "aten.var_mean.dim"),
];

fn alias_rules() -> &'static [Rule] {
    static R: std::sync::OnceLock<Vec<Rule>> = std::sync::OnceLock::new();
    R.get_or_init(|| {
        ALIASES
            .iter()
            .map(|(src, _)| Rule {
                source: src,
                results: std::slice::from_ref(&ALIASES.iter().find(|(s, _)| s == src).unwrap().1),
                apply: alias,
            })
            .collect()
    })
}

/// Every rule: the table, then the aliases.
pub fn all_rules() -> impl Iterator<Item = &'static Rule> {
    RULES.iter().chain(alias_rules())
}

/// The rule for an op identity (`aten.linear.default`), if there is one.
pub fn rule_for(op: &str) -> Option<&'static Rule> {
    all_rules().find(|r| r.source == op)
}

fn alias(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let src = a.0.target.to_string();
    let op = ALIASES
        .iter()
        .find(|(s, _)| *s == src)
        .map(|(_, t)| *t)
        .unwrap();
    let target = crate::ir::Target::parse(&format!("torch.ops.{op}")).unwrap();
    let args = super::edit::args_for(a.0, &target)?;
    let outs = a.outs();
    em.call(
        op,
        super::edit::borrow_args(&args),
        outs.iter().map(|o| Out::Into(*o)).collect(),
    )?;
    // Outputs exactly as the alias had them (lists, symbolic ints).
    if let Some(n) = em.nodes.last_mut() {
        n.outputs = a.0.outputs.clone();
    }
    Ok(outs)
}

// ---- helpers: one emitted op each, with its result's meta ----

fn unary(em: &mut Emitter, op: &str, x: ValueId) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let meta = em.meta_like(x, m.dtype, m.sizes)?;
    em.op(op, vec![("self", Argument::Tensor(x))], meta)
}

/// A binary op on a tensor and a scalar, keeping the tensor's meta.
fn with_scalar(em: &mut Emitter, op: &str, x: ValueId, other: Argument) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let meta = em.meta_like(x, m.dtype, m.sizes)?;
    em.op(
        op,
        vec![("self", Argument::Tensor(x)), ("other", other)],
        meta,
    )
}

/// Broadcast sizes (numpy rules) of two metas.
fn broadcast(a: &[Sym], b: &[Sym]) -> Vec<Sym> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let x = (i + a.len()).checked_sub(n).map(|j| &a[j]);
            let y = (i + b.len()).checked_sub(n).map(|j| &b[j]);
            match (x, y) {
                (Some(x), None) => x.clone(),
                (None, Some(y)) => y.clone(),
                (Some(Sym::Int(1)), Some(y)) => y.clone(),
                (Some(x), _) => x.clone(),
                (None, None) => Sym::Int(1),
            }
        })
        .collect()
}

/// `op(a, b)` on two tensors with a result dtype.
fn binary(
    em: &mut Emitter,
    op: &str,
    a: ValueId,
    b: ValueId,
    dtype: Dtype,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let sizes = broadcast(&em.sizes(a)?, &em.sizes(b)?);
    let meta = em.meta_like(a, dtype, sizes)?;
    em.op_to(
        op,
        vec![
            ("self", Argument::Tensor(a)),
            ("other", Argument::Tensor(b)),
        ],
        out,
        meta,
    )
}

fn permute(em: &mut Emitter, x: ValueId, perm: &[usize], out: Option<ValueId>) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let meta = TensorMeta {
        sizes: perm.iter().map(|&p| m.sizes[p].clone()).collect(),
        strides: perm.iter().map(|&p| m.strides[p].clone()).collect(),
        ..m
    };
    let dims: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
    em.op_to(
        "aten.permute.default",
        vec![("self", Argument::Tensor(x)), ("dims", ints_arg(&dims))],
        out,
        meta,
    )
}

/// Swaps the last two dims.
fn mt(em: &mut Emitter, x: ValueId) -> Result<ValueId> {
    let r = em.rank(x)?;
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    permute(em, x, &perm, None)
}

/// Resolves a `-1` in view sizes from the input's static numel.
fn view_syms(em: &Emitter, x: ValueId, sizes: &[SymRef]) -> Result<Vec<Sym>> {
    let mut out = syms(em, sizes);
    if let Some(pos) = out.iter().position(|s| *s == Sym::Int(-1)) {
        let total: Option<i64> = em.meta(x)?.static_sizes().map(|s| s.iter().product());
        let known: Option<i64> = out
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != pos)
            .map(|(_, s)| s.as_int())
            .product();
        out[pos] = match (total, known) {
            (Some(t), Some(k)) if k != 0 => Sym::Int(t / k),
            _ => {
                return Err(Error::unsupported(
                    "a view with -1 over symbolic sizes cannot be given a static shape",
                ))
            }
        };
    }
    Ok(out)
}

/// The strides of `x.view(new)` when the view needs no copy (torch's
/// `computeStride`), for static sizes; `None` when a copy is needed or a
/// size is symbolic.
fn view_strides(m: &TensorMeta, new: &[Sym]) -> Option<Vec<i64>> {
    let old = m.static_sizes()?;
    let stride = m.static_strides()?;
    let new: Vec<i64> = new.iter().map(Sym::as_int).collect::<Option<_>>()?;
    if old.is_empty() {
        return Some(vec![1; new.len()]);
    }
    let numel: i64 = old.iter().product();
    if numel == 0 {
        return (old == new)
            .then(|| stride.clone())
            .or_else(|| Some(crate::ir::contiguous_strides(&new)));
    }
    let mut out = vec![0i64; new.len()];
    let mut view_d = new.len() as i64 - 1;
    let mut chunk_base = *stride.last()?;
    let (mut tensor_numel, mut view_numel) = (1i64, 1i64);
    for d in (0..old.len()).rev() {
        tensor_numel *= old[d];
        if d == 0 || (old[d - 1] != 1 && stride[d - 1] != tensor_numel * chunk_base) {
            while view_d >= 0 && (view_numel < tensor_numel || new[view_d as usize] == 1) {
                out[view_d as usize] = view_numel * chunk_base;
                view_numel *= new[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if d > 0 {
                chunk_base = stride[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    (view_d == -1).then_some(out)
}

fn view(em: &mut Emitter, x: ValueId, sizes: &[SymRef], out: Option<ValueId>) -> Result<ValueId> {
    let dtype = em.dtype(x)?;
    let new = view_syms(em, x, sizes)?;
    let mut meta = em.meta_like(x, dtype, new.clone())?;
    if let Some(st) = view_strides(em.meta(x)?, &new) {
        meta.strides = st.into_iter().map(Sym::Int).collect();
    }
    em.op_to(
        "aten.view.default",
        vec![("self", Argument::Tensor(x)), ("size", sym_ints_arg(sizes))],
        out,
        meta,
    )
}

fn clone(em: &mut Emitter, x: ValueId, out: Option<ValueId>) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let meta = em.meta_like(x, m.dtype, m.sizes)?;
    em.op_to(
        "aten.clone.default",
        vec![
            ("self", Argument::Tensor(x)),
            (
                "memory_format",
                Argument::MemoryFormat(MemoryFormat::Contiguous),
            ),
        ],
        out,
        meta,
    )
}

/// `reshape`: a view when one is possible without a copy, else a copy then
/// a view (torch's `reshape` / `_reshape_copy`).
fn reshape(
    em: &mut Emitter,
    x: ValueId,
    sizes: &[SymRef],
    out: Option<ValueId>,
) -> Result<ValueId> {
    let m = em.meta(x)?;
    let viewable = match view_strides(m, &view_syms(em, x, sizes)?) {
        Some(_) => true,
        None => m.static_sizes().is_none() && is_contiguous(m),
    };
    let src = if viewable { x } else { clone(em, x, None)? };
    view(em, src, sizes, out)
}

fn expand(em: &mut Emitter, x: ValueId, sizes: &[SymRef]) -> Result<ValueId> {
    let dtype = em.dtype(x)?;
    let mut meta = em.meta_like(x, dtype, syms(em, sizes))?;
    // An expanded tensor is not contiguous where it broadcasts.
    let in_meta = em.meta(x)?.clone();
    let off = sizes.len() - in_meta.sizes.len();
    for (i, s) in meta.sizes.clone().iter().enumerate() {
        meta.strides[i] = if i < off || (in_meta.sizes[i - off] == Sym::Int(1) && *s != Sym::Int(1))
        {
            Sym::Int(0)
        } else {
            in_meta.strides[i - off].clone()
        };
    }
    em.op(
        "aten.expand.default",
        vec![("self", Argument::Tensor(x)), ("size", sym_ints_arg(sizes))],
        meta,
    )
}

fn unsqueeze(em: &mut Emitter, x: ValueId, dim: usize) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let mut sizes = m.sizes.clone();
    sizes.insert(dim, Sym::Int(1));
    let meta = em.meta_like(x, m.dtype, sizes)?;
    em.op(
        "aten.unsqueeze.default",
        vec![
            ("self", Argument::Tensor(x)),
            ("dim", Argument::Int(dim as i64)),
        ],
        meta,
    )
}

fn squeeze_dims(
    em: &mut Emitter,
    x: ValueId,
    dims: &[usize],
    out: Option<ValueId>,
) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let sizes: Vec<Sym> = m
        .sizes
        .iter()
        .enumerate()
        .filter(|(i, s)| !(dims.contains(i) && **s == Sym::Int(1)))
        .map(|(_, s)| s.clone())
        .collect();
    let meta = em.meta_like(x, m.dtype, sizes)?;
    let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    em.op_to(
        "aten.squeeze.dims",
        vec![("self", Argument::Tensor(x)), ("dim", ints_arg(&dims))],
        out,
        meta,
    )
}

fn mm(
    em: &mut Emitter,
    a: ValueId,
    b: ValueId,
    bias: Option<ValueId>,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let (sa, sb) = (em.sizes(a)?, em.sizes(b)?);
    let meta = em.meta_like(a, em.dtype(a)?, vec![sa[0].clone(), sb[1].clone()])?;
    match bias {
        Some(c) => em.op_to(
            "aten.addmm.default",
            vec![
                ("self", Argument::Tensor(c)),
                ("mat1", Argument::Tensor(a)),
                ("mat2", Argument::Tensor(b)),
            ],
            out,
            meta,
        ),
        None => em.op_to(
            "aten.mm.default",
            vec![("self", Argument::Tensor(a)), ("mat2", Argument::Tensor(b))],
            out,
            meta,
        ),
    }
}

/// Whether `x.view(-1, x.size(-1))` needs no copy (torch's `should_fold`).
fn foldable(m: &TensorMeta) -> bool {
    let n = m.sizes.len();
    (0..n.saturating_sub(2))
        .all(|i| m.strides[i] == super::edit::sym_mul(&m.strides[i + 1], &m.sizes[i + 1]))
}

/// torch's `matmul`, op for op (`at::native::_matmul_impl`).
fn matmul(em: &mut Emitter, a: ValueId, b: ValueId, out: Option<ValueId>) -> Result<ValueId> {
    let (da, db) = (em.rank(a)?, em.rank(b)?);
    let dtype = em.dtype(a)?;
    match (da, db) {
        (1, 1) => {
            let prod = binary(em, "aten.mul.Tensor", a, b, dtype, None)?;
            let meta = em.meta_like(a, dtype, vec![])?;
            return em.op_to(
                "aten.sum.dim_IntList",
                vec![("self", Argument::Tensor(prod)), ("dim", ints_arg(&[0]))],
                out,
                meta,
            );
        }
        (2, 1) => {
            let b2 = unsqueeze(em, b, 1)?;
            let r = mm(em, a, b2, None, None)?;
            return squeeze_dims(em, r, &[1], out);
        }
        (1, 2) => {
            let a2 = unsqueeze(em, a, 0)?;
            let r = mm(em, a2, b, None, None)?;
            return squeeze_dims(em, r, &[0], out);
        }
        (2, 2) => return mm(em, a, b, None, out),
        _ => {}
    }
    if da >= 3 && (db == 1 || db == 2) && foldable(em.meta(a)?) {
        let lead: Vec<SymRef> = (0..da - 1).map(|d| em.size(a, d)).collect::<Result<_>>()?;
        let k = em.size(a, da - 1)?;
        let rows = em.product(&lead)?;
        let a2 = view(em, a, &[rows, k], None)?;
        let b2 = if db == 1 { unsqueeze(em, b, 1)? } else { b };
        let r = mm(em, a2, b2, None, None)?;
        let mut sizes = lead;
        if db == 2 {
            sizes.push(em.size(b, 1)?);
        }
        return view(em, r, &sizes, out);
    }
    // Batched: expand both to the broadcast batch, fold it, bmm, unfold.
    let a_ = if da == 1 { unsqueeze(em, a, 0)? } else { a };
    let b_ = if db == 1 { unsqueeze(em, b, 1)? } else { b };
    let (ra, rb) = (em.rank(a_)?, em.rank(b_)?);
    let sa = em.size_refs(a_)?;
    let sb = em.size_refs(b_)?;
    let (n, m1) = (sa[ra - 2], sa[ra - 1]);
    let (m2, p) = (sb[rb - 2], sb[rb - 1]);
    let batch_a = &sa[..ra - 2];
    let batch_b = &sb[..rb - 2];
    let nb = batch_a.len().max(batch_b.len());
    let mut batch = Vec::new();
    for i in 0..nb {
        let x = (i + batch_a.len()).checked_sub(nb).map(|j| batch_a[j]);
        let y = (i + batch_b.len()).checked_sub(nb).map(|j| batch_b[j]);
        batch.push(match (x, y) {
            (Some(x), None) => x,
            (None, Some(y)) => y,
            (Some(SymRef::Int(1)), Some(y)) => y,
            (Some(x), _) => x,
            (None, None) => SymRef::Int(1),
        });
    }
    let bp = em.product(&batch)?;
    let ea: Vec<SymRef> = batch.iter().copied().chain([n, m1]).collect();
    let eb: Vec<SymRef> = batch.iter().copied().chain([m2, p]).collect();
    let xa = expand(em, a_, &ea)?;
    let xa = reshape(em, xa, &[bp, n, m1], None)?;
    let xb = expand(em, b_, &eb)?;
    let xb = reshape(em, xb, &[bp, m2, p], None)?;
    let meta = em.meta_like(a, dtype, syms(em, &[bp, n, p]))?;
    let r = em.op(
        "aten.bmm.default",
        vec![
            ("self", Argument::Tensor(xa)),
            ("mat2", Argument::Tensor(xb)),
        ],
        meta,
    )?;
    let mut shape = batch;
    if da > 1 {
        shape.push(n);
    }
    if db > 1 {
        shape.push(p);
    }
    view(em, r, &shape, out)
}

fn full_like(
    em: &mut Emitter,
    x: ValueId,
    value: Argument,
    dtype: Dtype,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, dtype, sizes)?;
    em.op_to(
        "aten.full_like.default",
        vec![
            ("self", Argument::Tensor(x)),
            ("fill_value", value),
            ("dtype", Argument::ScalarType(dtype)),
            (
                "memory_format",
                Argument::MemoryFormat(MemoryFormat::Preserve),
            ),
        ],
        out,
        meta,
    )
}

fn scalar_tensor(
    em: &mut Emitter,
    like: ValueId,
    value: Argument,
    dtype: Dtype,
) -> Result<ValueId> {
    let meta = em.meta_like(like, dtype, vec![])?;
    em.op(
        "aten.scalar_tensor.default",
        vec![("s", value), ("dtype", Argument::ScalarType(dtype))],
        meta,
    )
}

fn where_(
    em: &mut Emitter,
    c: ValueId,
    x: ValueId,
    y: ValueId,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let dtype = if em.dtype(x)?.is_floating() {
        em.dtype(x)?
    } else {
        em.dtype(y)?
    };
    let s = broadcast(&broadcast(&em.sizes(c)?, &em.sizes(x)?), &em.sizes(y)?);
    let meta = em.meta_like(x, dtype, s)?;
    em.op_to(
        "aten.where.self",
        vec![
            ("condition", Argument::Tensor(c)),
            ("self", Argument::Tensor(x)),
            ("other", Argument::Tensor(y)),
        ],
        out,
        meta,
    )
}

fn to_copy(em: &mut Emitter, x: ValueId, dtype: Dtype, out: Option<ValueId>) -> Result<ValueId> {
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, dtype, sizes)?;
    em.op_to(
        "aten._to_copy.default",
        vec![
            ("self", Argument::Tensor(x)),
            ("dtype", Argument::ScalarType(dtype)),
        ],
        out,
        meta,
    )
}

// ---- the rules ----

fn linear(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, w, b) = (a.t("input")?, a.t("weight")?, a.ot("bias")?);
    let out = a.out(0)?;
    let wt = permute(em, w, &[1, 0], None)?;
    let rank = em.rank(x)?;
    if rank == 2 {
        return Ok(vec![mm(em, x, wt, b, Some(out))?]);
    }
    if rank >= 3 && b.is_some() && is_contiguous(em.meta(x)?) {
        let lead: Vec<SymRef> = (0..rank - 1)
            .map(|d| em.size(x, d))
            .collect::<Result<_>>()?;
        let k = em.size(x, rank - 1)?;
        let rows = em.product(&lead)?;
        let x2 = view(em, x, &[rows, k], None)?;
        let r = mm(em, x2, wt, b, None)?;
        let mut sizes = lead;
        sizes.push(em.size(w, 0)?);
        return Ok(vec![view(em, r, &sizes, Some(out))?]);
    }
    match b {
        None => Ok(vec![matmul(em, x, wt, Some(out))?]),
        Some(b) => {
            let r = matmul(em, x, wt, None)?;
            let dtype = em.dtype(r)?;
            Ok(vec![binary(em, "aten.add.Tensor", r, b, dtype, Some(out))?])
        }
    }
}

fn matmul_rule(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    Ok(vec![matmul(
        em,
        a.t("self")?,
        a.t("other")?,
        Some(a.out(0)?),
    )?])
}

fn transpose(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let r = em.rank(x)?;
    let (d0, d1) = (norm_dim(a.int("dim0")?, r)?, norm_dim(a.int("dim1")?, r)?);
    let mut perm: Vec<usize> = (0..r).collect();
    if r > 0 {
        perm.swap(d0, d1);
    }
    Ok(vec![permute(em, x, &perm, Some(a.out(0)?))?])
}

fn t(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    if em.rank(x)? < 2 {
        return Ok(vec![x]);
    }
    Ok(vec![permute(em, x, &[1, 0], Some(a.out(0)?))?])
}

fn reshape_rule(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    Ok(vec![reshape(
        em,
        a.t("self")?,
        &a.syms("shape")?,
        Some(a.out(0)?),
    )?])
}

fn unsafe_view(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    Ok(vec![view(
        em,
        a.t("self")?,
        &a.syms("size")?,
        Some(a.out(0)?),
    )?])
}

fn view_as(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let other = a.t("other")?;
    let sizes = em.size_refs(other)?;
    Ok(vec![view(em, a.t("self")?, &sizes, Some(a.out(0)?))?])
}

fn flatten(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let r = em.rank(x)?;
    if r == 0 {
        return Ok(vec![reshape(em, x, &[SymRef::Int(1)], Some(a.out(0)?))?]);
    }
    let (s, e) = (
        norm_dim(a.int("start_dim")?, r)?,
        norm_dim(a.int("end_dim")?, r)?,
    );
    if s == e {
        return Ok(vec![x]);
    }
    let sizes = em.size_refs(x)?;
    let mid = em.product(&sizes[s..=e])?;
    let mut new: Vec<SymRef> = sizes[..s].to_vec();
    new.push(mid);
    new.extend_from_slice(&sizes[e + 1..]);
    Ok(vec![reshape(em, x, &new, Some(a.out(0)?))?])
}

fn unflatten(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let r = em.rank(x)?;
    let d = norm_dim(a.int("dim")?, r)?;
    let sizes = em.size_refs(x)?;
    let mut new: Vec<SymRef> = sizes[..d].to_vec();
    let mut inner = a.syms("sizes")?;
    // Resolve a -1 against the dim it splits.
    if let Some(pos) = inner.iter().position(|s| *s == SymRef::Int(-1)) {
        if let SymRef::Int(total) = sizes[d] {
            let known: i64 = inner
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != pos)
                .map(|(_, s)| if let SymRef::Int(v) = s { *v } else { 1 })
                .product();
            inner[pos] = SymRef::Int(total / known.max(1));
        }
    }
    new.extend(inner);
    new.extend_from_slice(&sizes[d + 1..]);
    Ok(vec![reshape(em, x, &new, Some(a.out(0)?))?])
}

fn squeeze_dim(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let d = norm_dim(a.int("dim")?, em.rank(x)?)?;
    Ok(vec![squeeze_dims(em, x, &[d], Some(a.out(0)?))?])
}

fn squeeze_all(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let sizes = em.static_sizes(x, "squeeze() of every size-1 dim")?;
    let dims: Vec<usize> = (0..sizes.len()).filter(|&i| sizes[i] == 1).collect();
    Ok(vec![squeeze_dims(em, x, &dims, Some(a.out(0)?))?])
}

fn contiguous(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    if is_contiguous(em.meta(x)?) {
        return Ok(vec![x]);
    }
    Ok(vec![clone(em, x, Some(a.out(0)?))?])
}

fn lift_fresh_copy(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    Ok(vec![clone(em, a.t("self")?, Some(a.out(0)?))?])
}

fn dropout(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("input")?;
    let (p, train) = (a.float("p")?, a.bool("train")?);
    if !train || p == 0.0 {
        return Ok(vec![x]);
    }
    if a.0.target.name != "dropout" {
        return Err(Error::unsupported(format!(
            "node {}: {} in training mode has no decomposition",
            a.0.name, a.0.target
        )));
    }
    let mask = em.meta_like(x, Dtype::Bool, em.sizes(x)?)?;
    let r = em.call(
        "aten.native_dropout.default",
        vec![
            ("input", Argument::Tensor(x)),
            ("p", Argument::Float(p)),
            ("train", Argument::Bool(true)),
        ],
        vec![Out::Into(a.out(0)?), Out::New(mask)],
    )?;
    Ok(vec![r[0]])
}

fn layer_norm(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("input")?;
    let ns = a.syms("normalized_shape")?;
    let mut stat = em.sizes(x)?;
    let r = stat.len();
    for s in stat.iter_mut().skip(r - ns.len()) {
        *s = Sym::Int(1);
    }
    let dtype = em.dtype(x)?;
    let m1 = em.meta_like(x, dtype, stat.clone())?;
    let m2 = em.meta_like(x, dtype, stat)?;
    em.call(
        "aten.native_layer_norm.default",
        vec![
            ("input", Argument::Tensor(x)),
            ("normalized_shape", sym_ints_arg(&ns)),
            ("weight", a.arg("weight")),
            ("bias", a.arg("bias")),
            ("eps", Argument::Float(a.float("eps")?)),
        ],
        vec![Out::Into(a.out(0)?), Out::New(m1), Out::New(m2)],
    )?;
    Ok(vec![a.out(0)?])
}

fn group_norm(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("input")?;
    let g = a.int("num_groups")?;
    let sizes = em.size_refs(x)?;
    let (n, c) = (sizes[0], sizes[1]);
    let hw = em.product(&sizes[2..])?;
    let dtype = em.dtype(x)?;
    let stat = vec![em.sym_of(n), Sym::Int(g)];
    let m1 = em.meta_like(x, dtype, stat.clone())?;
    let m2 = em.meta_like(x, dtype, stat)?;
    em.call(
        "aten.native_group_norm.default",
        vec![
            ("input", Argument::Tensor(x)),
            ("weight", a.arg("weight")),
            ("bias", a.arg("bias")),
            ("N", Argument::SymInt(n)),
            ("C", Argument::SymInt(c)),
            ("HxW", Argument::SymInt(hw)),
            ("group", Argument::Int(g)),
            ("eps", Argument::Float(a.float("eps")?)),
        ],
        vec![Out::Into(a.out(0)?), Out::New(m1), Out::New(m2)],
    )?;
    Ok(vec![a.out(0)?])
}

fn batch_norm(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    if a.bool("training")? {
        return Err(Error::unsupported(format!(
            "node {}: batch_norm in training mode (export the model in eval mode: model.eval())",
            a.0.name
        )));
    }
    let x = a.t("input")?;
    let (mean, var) = (a.ot("running_mean")?, a.ot("running_var")?);
    let (Some(mean), Some(var)) = (mean, var) else {
        return Err(Error::unsupported(format!(
            "node {}: batch_norm in eval mode without running statistics",
            a.0.name
        )));
    };
    let dtype = em.dtype(x)?;
    let m1 = em.meta_like(x, dtype, vec![Sym::Int(0)])?;
    let m2 = em.meta_like(x, dtype, vec![Sym::Int(0)])?;
    em.call(
        "aten._native_batch_norm_legit_no_training.default",
        vec![
            ("input", Argument::Tensor(x)),
            ("weight", a.arg("weight")),
            ("bias", a.arg("bias")),
            ("running_mean", Argument::Tensor(mean)),
            ("running_var", Argument::Tensor(var)),
            ("momentum", Argument::Float(a.float("momentum")?)),
            ("eps", Argument::Float(a.float("eps")?)),
        ],
        vec![Out::Into(a.out(0)?), Out::New(m1), Out::New(m2)],
    )?;
    Ok(vec![a.out(0)?])
}

/// `convolution` on a batched input; an unbatched one gets a batch of one.
fn convolution(
    em: &mut Emitter,
    a: &A,
    x: ValueId,
    args: Vec<(&str, Argument)>,
    spatial: usize,
) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let unbatched = em.rank(x)? == spatial + 1;
    let mut all = vec![(
        "input",
        Argument::Tensor(if unbatched { unsqueeze(em, x, 0)? } else { x }),
    )];
    all.extend(args);
    if unbatched {
        let m = em.meta(out)?.clone();
        let mut sizes = m.sizes.clone();
        sizes.insert(0, Sym::Int(1));
        let meta = em.meta_like(out, m.dtype, sizes)?;
        let r = em.op("aten.convolution.default", all, meta)?;
        return Ok(vec![squeeze_dims(em, r, &[0], Some(out))?]);
    }
    em.op_into("aten.convolution.default", all, out)?;
    Ok(vec![out])
}

fn conv(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (mut x, w) = (a.t("input")?, a.t("weight")?);
    let spatial = em.rank(w)? - 2;
    let dilation = a.syms("dilation")?;
    let padding = match a.0.arg("padding") {
        Some(Argument::String(mode)) => {
            let k = em.static_sizes(w, "convolution with padding='same'")?;
            let dil: Vec<i64> = a.ints("dilation")?;
            let mut pad = Vec::new();
            let mut extra = Vec::new();
            for d in 0..spatial {
                let total = if mode == "same" {
                    dil.get(d).copied().unwrap_or(dil[0]) * (k[d + 2] - 1)
                } else {
                    0
                };
                pad.push(SymRef::Int(total / 2));
                extra.push(total % 2);
            }
            if extra.iter().any(|&e| e != 0) {
                // Asymmetric: pad the far side once more, as torch does.
                let mut p = Vec::new();
                for d in (0..spatial).rev() {
                    p.extend([0, extra[d]]);
                }
                let m = em.meta(x)?.clone();
                let mut sizes = m.sizes.clone();
                let r = sizes.len();
                for d in 0..spatial {
                    if extra[d] != 0 {
                        sizes[r - spatial + d] =
                            super::edit::sym_mul(&sizes[r - spatial + d], &Sym::Int(1));
                        if let Sym::Int(v) = sizes[r - spatial + d] {
                            sizes[r - spatial + d] = Sym::Int(v + extra[d]);
                        } else {
                            return Err(Error::unsupported(
                                "padding='same' on a symbolic spatial size",
                            ));
                        }
                    }
                }
                let meta = em.meta_like(x, m.dtype, sizes)?;
                x = em.op(
                    "aten.constant_pad_nd.default",
                    vec![("self", Argument::Tensor(x)), ("pad", ints_arg(&p))],
                    meta,
                )?;
            }
            pad
        }
        _ => a.syms("padding")?,
    };
    let args = vec![
        ("weight", Argument::Tensor(w)),
        ("bias", a.arg("bias")),
        ("stride", sym_ints_arg(&a.syms("stride")?)),
        ("padding", sym_ints_arg(&padding)),
        ("dilation", sym_ints_arg(&dilation)),
        ("transposed", Argument::Bool(false)),
        (
            "output_padding",
            sym_ints_arg(&vec![SymRef::Int(0); spatial]),
        ),
        ("groups", Argument::SymInt(a.sym("groups")?)),
    ];
    convolution(em, a, x, args, spatial)
}

fn conv_transpose(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, w) = (a.t("input")?, a.t("weight")?);
    let spatial = em.rank(w)? - 2;
    let args = vec![
        ("weight", Argument::Tensor(w)),
        ("bias", a.arg("bias")),
        ("stride", sym_ints_arg(&a.syms("stride")?)),
        ("padding", sym_ints_arg(&a.syms("padding")?)),
        ("dilation", sym_ints_arg(&a.syms("dilation")?)),
        ("transposed", Argument::Bool(true)),
        ("output_padding", sym_ints_arg(&a.syms("output_padding")?)),
        ("groups", Argument::SymInt(a.sym("groups")?)),
    ];
    convolution(em, a, x, args, spatial)
}

fn underscore_convolution(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let mut args: Vec<(&str, Argument)> = Vec::new();
    for name in [
        "input",
        "weight",
        "bias",
        "stride",
        "padding",
        "dilation",
        "transposed",
        "output_padding",
        "groups",
    ] {
        args.push((name, a.arg(name)));
    }
    em.op_into("aten.convolution.default", args, a.out(0)?)?;
    Ok(vec![a.out(0)?])
}

fn pool_with_indices(
    em: &mut Emitter,
    a: &A,
    op: &str,
    x: ValueId,
    out: Option<ValueId>,
    meta: TensorMeta,
) -> Result<ValueId> {
    let mut idx = meta.clone();
    idx.dtype = Dtype::Int64;
    let args = vec![
        ("self", Argument::Tensor(x)),
        ("kernel_size", a.arg("kernel_size")),
        ("stride", a.arg("stride")),
        ("padding", a.arg("padding")),
        ("dilation", a.arg("dilation")),
        ("ceil_mode", a.arg("ceil_mode")),
    ];
    let first = match out {
        Some(o) => Out::Into(o),
        None => Out::New(meta),
    };
    Ok(em.call(op, args, vec![first, Out::New(idx)])?[0])
}

fn max_pool2d(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let meta = em.meta(out)?.clone();
    Ok(vec![pool_with_indices(
        em,
        a,
        "aten.max_pool2d_with_indices.default",
        a.t("self")?,
        Some(out),
        meta,
    )?])
}

fn max_pool3d(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let meta = em.meta(out)?.clone();
    Ok(vec![pool_with_indices(
        em,
        a,
        "aten.max_pool3d_with_indices.default",
        a.t("self")?,
        Some(out),
        meta,
    )?])
}

fn max_pool1d(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let out = a.out(0)?;
    let r = em.rank(x)?;
    let x2 = unsqueeze(em, x, r - 1)?;
    let one = |v: Vec<i64>, fill: i64| -> Vec<i64> { [vec![fill], v].concat() };
    let m = em.meta(out)?.clone();
    let mut sizes = m.sizes.clone();
    sizes.insert(r - 1, Sym::Int(1));
    let meta = em.meta_like(out, m.dtype, sizes)?;
    let stride = a.ints("stride")?;
    let k = a.ints("kernel_size")?;
    let args = vec![
        ("self", Argument::Tensor(x2)),
        ("kernel_size", ints_arg(&one(k.clone(), 1))),
        (
            "stride",
            ints_arg(&one(if stride.is_empty() { k } else { stride }, 1)),
        ),
        ("padding", ints_arg(&one(a.ints("padding")?, 0))),
        ("dilation", ints_arg(&one(a.ints("dilation")?, 1))),
        ("ceil_mode", a.arg("ceil_mode")),
    ];
    let mut idx = meta.clone();
    idx.dtype = Dtype::Int64;
    let r2 = em.call(
        "aten.max_pool2d_with_indices.default",
        args,
        vec![Out::New(meta), Out::New(idx)],
    )?;
    let values = squeeze_dims(em, r2[0], &[r - 1], Some(out))?;
    if a.0.target.name == "max_pool1d_with_indices" {
        let indices = squeeze_dims(em, r2[1], &[r - 1], Some(a.out(1)?))?;
        return Ok(vec![values, indices]);
    }
    Ok(vec![values])
}

fn adaptive_avg_pool2d(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let out = a.out(0)?;
    if a.ints("output_size").ok().as_deref() == Some(&[1, 1]) {
        em.op_into(
            "aten.mean.dim",
            vec![
                ("self", Argument::Tensor(x)),
                ("dim", ints_arg(&[-1, -2])),
                ("keepdim", Argument::Bool(true)),
            ],
            out,
        )?;
    } else {
        em.op_into(
            "aten._adaptive_avg_pool2d.default",
            vec![
                ("self", Argument::Tensor(x)),
                ("output_size", a.arg("output_size")),
            ],
            out,
        )?;
    }
    Ok(vec![out])
}

fn softmax_like(em: &mut Emitter, a: &A, op: &str) -> Result<Vec<ValueId>> {
    let mut x = a.t("self")?;
    if let Some(d) = a.dtype("dtype") {
        if d != em.dtype(x)? {
            x = to_copy(em, x, d, None)?;
        }
    }
    em.op_into(
        op,
        vec![
            ("self", Argument::Tensor(x)),
            ("dim", Argument::Int(a.int("dim")?)),
            ("half_to_float", Argument::Bool(false)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn softmax(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    softmax_like(em, a, "aten._softmax.default")
}

fn log_softmax(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    softmax_like(em, a, "aten._log_softmax.default")
}

fn to(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let out = a.out(0)?;
    let want = em.dtype(out)?;
    let same_device = em.meta(x)?.device == em.meta(out)?.device;
    if want == em.dtype(x)? && same_device && !a.bool("copy")? {
        return Ok(vec![x]);
    }
    let mut args = vec![
        ("self", Argument::Tensor(x)),
        ("dtype", Argument::ScalarType(want)),
    ];
    if !same_device {
        args.push(("device", Argument::Device(em.meta(out)?.device.clone())));
    }
    em.op_into("aten._to_copy.default", args, out)?;
    Ok(vec![out])
}

fn renamed(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let name = a.0.target.name.trim_matches('_');
    let op = format!("aten.bitwise_{name}.{}", a.0.target.overload);
    let args =
        a.0.inputs
            .iter()
            .map(|n| (n.name.as_str(), n.arg.clone()))
            .collect();
    em.op_into(&op, args, a.out(0)?)?;
    Ok(vec![a.out(0)?])
}

fn arange(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let start = if a.0.target.overload == "start" {
        a.arg("start")
    } else {
        Argument::Int(0)
    };
    let dtype = em.dtype(out)?;
    em.op_into(
        "aten.arange.start_step",
        vec![
            ("start", start),
            ("end", a.arg("end")),
            ("step", Argument::Int(1)),
            ("dtype", Argument::ScalarType(dtype)),
            ("layout", a.arg("layout")),
            ("device", a.arg("device")),
            ("pin_memory", a.arg("pin_memory")),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn full_of(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let value = match a.0.target.name.as_str() {
        "zeros" | "new_zeros" => scalar(0.0, dtype),
        "ones" | "new_ones" => scalar(1.0, dtype),
        _ => a.arg("fill_value"),
    };
    let sizes = a.syms("size")?;
    em.op_into(
        "aten.full.default",
        vec![
            ("size", sym_ints_arg(&sizes)),
            ("fill_value", value),
            ("dtype", Argument::ScalarType(dtype)),
            ("layout", a.arg("layout")),
            (
                "device",
                if a.has("device") {
                    a.arg("device")
                } else {
                    Argument::Device(em.meta(out)?.device.clone())
                },
            ),
            ("pin_memory", Argument::Bool(false)),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn full_like_of(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let value = scalar(
        if a.0.target.name == "ones_like" {
            1.0
        } else {
            0.0
        },
        dtype,
    );
    Ok(vec![full_like(em, a.t("self")?, value, dtype, Some(out))?])
}

fn fill(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let value = if a.0.target.name == "zero" {
        scalar(0.0, dtype)
    } else {
        a.arg("value")
    };
    Ok(vec![full_like(em, a.t("self")?, value, dtype, Some(out))?])
}

fn where_scalar(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let c = a.t("condition")?;
    let side = |em: &mut Emitter, name: &str| -> Result<ValueId> {
        match a.0.arg(name) {
            Some(Argument::Tensor(v)) => Ok(*v),
            _ => scalar_tensor(em, out, a.arg(name), dtype),
        }
    };
    let x = side(em, "self")?;
    let y = side(em, "other")?;
    Ok(vec![where_(em, c, x, y, Some(out))?])
}

fn masked_fill(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let value = match a.0.arg("value") {
        Some(Argument::Tensor(v)) if em.dtype(*v)? == dtype => *v,
        Some(Argument::Tensor(v)) => to_copy(em, *v, dtype, None)?,
        _ => scalar_tensor(em, x, a.arg("value"), dtype)?,
    };
    Ok(vec![where_(em, a.t("mask")?, value, x, Some(out))?])
}

fn split_into(
    em: &mut Emitter,
    a: &A,
    x: ValueId,
    dim: i64,
    sizes: Vec<i64>,
) -> Result<Vec<ValueId>> {
    let outs = a.outs();
    if outs.len() != sizes.len() {
        return Err(Error::bad_input(format!(
            "node {}: {} outputs, but the split makes {}",
            a.0.name,
            outs.len(),
            sizes.len()
        )));
    }
    em.call(
        "aten.split_with_sizes.default",
        vec![
            ("self", Argument::Tensor(x)),
            ("split_sizes", ints_arg(&sizes)),
            ("dim", Argument::Int(dim)),
        ],
        outs.iter().map(|o| Out::Into(*o)).collect(),
    )
}

fn split(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let d = norm_dim(a.int("dim")?, em.rank(x)?)?;
    let n = em.static_sizes(x, "split")?[d];
    let step = a.int("split_size")?.max(1);
    let mut sizes = Vec::new();
    let mut at = 0;
    while at < n || (n == 0 && sizes.is_empty()) {
        sizes.push(step.min(n - at));
        at += step;
    }
    split_into(em, a, x, a.int("dim")?, sizes)
}

fn chunk(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let d = norm_dim(a.int("dim")?, em.rank(x)?)?;
    let n = em.static_sizes(x, "chunk")?[d];
    let chunks = a.int("chunks")?.max(1);
    let step = (n + chunks - 1) / chunks;
    let mut sizes = Vec::new();
    let mut at = 0;
    while at < n {
        sizes.push(step.min(n - at));
        at += step;
    }
    split_into(em, a, x, a.int("dim")?, sizes)
}

fn unbind(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dim = a.int("dim")?;
    let mut out = Vec::new();
    for (i, o) in a.outs().into_iter().enumerate() {
        em.op_into(
            "aten.select.int",
            vec![
                ("self", Argument::Tensor(x)),
                ("dim", Argument::Int(dim)),
                ("index", Argument::SymInt(SymRef::Int(i as i64))),
            ],
            o,
        )?;
        out.push(o);
    }
    Ok(out)
}

fn stack(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let xs = a.ts("tensors")?;
    let r = em.rank(
        *xs.first()
            .ok_or_else(|| Error::bad_input("stack of no tensors"))?,
    )?;
    let d = norm_dim(a.int("dim")?, r + 1)?;
    let parts: Vec<ValueId> = xs
        .iter()
        .map(|x| unsqueeze(em, *x, d))
        .collect::<Result<_>>()?;
    em.op_into(
        "aten.cat.default",
        vec![
            ("tensors", Argument::Tensors(parts)),
            ("dim", Argument::Int(d as i64)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn slice(em: &mut Emitter, x: ValueId, dim: usize, start: i64, end: i64) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let mut sizes = m.sizes.clone();
    sizes[dim] = match &sizes[dim] {
        Sym::Int(n) => {
            let clamp = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(*n) };
            Sym::Int((clamp(end) - clamp(start)).max(0))
        }
        _ => return Err(Error::unsupported("diff along a symbolic dim")),
    };
    let meta = em.meta_like(x, m.dtype, sizes)?;
    em.op(
        "aten.slice.Tensor",
        vec![
            ("self", Argument::Tensor(x)),
            ("dim", Argument::Int(dim as i64)),
            ("start", Argument::SymInt(SymRef::Int(start))),
            ("end", Argument::SymInt(SymRef::Int(end))),
        ],
        meta,
    )
}

fn diff(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let mut x = a.t("self")?;
    let d = norm_dim(a.int("dim")?, em.rank(x)?)?;
    let parts: Vec<ValueId> = [a.ot("prepend")?, Some(x), a.ot("append")?]
        .into_iter()
        .flatten()
        .collect();
    if parts.len() > 1 {
        let mut sizes = em.sizes(x)?;
        let mut total = 0;
        for p in &parts {
            total += em.static_sizes(*p, "diff with prepend/append")?[d];
        }
        sizes[d] = Sym::Int(total);
        let meta = em.meta_like(x, em.dtype(x)?, sizes)?;
        x = em.op(
            "aten.cat.default",
            vec![
                ("tensors", Argument::Tensors(parts)),
                ("dim", Argument::Int(d as i64)),
            ],
            meta,
        )?;
    }
    let n = a.int("n")?;
    let out = a.out(0)?;
    for i in 0..n {
        let hi = slice(em, x, d, 1, i64::MAX)?;
        let lo = slice(em, x, d, 0, -1)?;
        let dtype = em.dtype(x)?;
        let op = if dtype == Dtype::Bool {
            "aten.logical_xor.default"
        } else {
            "aten.sub.Tensor"
        };
        let target = if i == n - 1 { Some(out) } else { None };
        x = binary(em, op, hi, lo, dtype, target)?;
    }
    Ok(vec![if n == 0 { x } else { out }])
}

/// torch's math attention: both sides scaled by sqrt(scale), masks added,
/// a softmax that gives 0 (not NaN) for fully masked rows.
fn sdpa(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (q, mut k, mut v) = (a.t("query")?, a.t("key")?, a.t("value")?);
    let out = a.out(0)?;
    let dtype = em.dtype(q)?;
    let qs = em.sizes(q)?;
    let r = qs.len();
    let e = qs[r - 1].as_int().ok_or_else(|| {
        Error::unsupported("scaled_dot_product_attention with a symbolic head size")
    })?;
    let scale = a.opt_float("scale")?.unwrap_or(1.0 / (e as f64).sqrt());
    let s = scale.sqrt();
    if a.bool("enable_gqa")? && r >= 3 {
        let (hq, hk) = (qs[r - 3].as_int(), em.sizes(k)?[r - 3].as_int());
        if let (Some(hq), Some(hk)) = (hq, hk) {
            if hq != hk {
                k = repeat_heads(em, k, hq / hk)?;
                v = repeat_heads(em, v, hq / hk)?;
            }
        }
    }
    let qm = with_scalar(em, "aten.mul.Scalar", q, Argument::Float(s))?;
    let kt = mt(em, k)?;
    let km = with_scalar(em, "aten.mul.Scalar", kt, Argument::Float(s))?;
    let mut attn = matmul(em, qm, km, None)?;
    let lsizes = em.sizes(attn)?;
    let (l, srcl) = (lsizes[r - 2].clone(), lsizes[r - 1].clone());
    if a.bool("is_causal")? {
        let (Sym::Int(l), Sym::Int(sl)) = (l, srcl) else {
            return Err(Error::unsupported("causal attention over symbolic lengths"));
        };
        let rows = arange_col(em, attn, l, true)?;
        let cols = arange_col(em, attn, sl, false)?;
        let keep = binary(em, "aten.ge.Tensor", rows, cols, Dtype::Bool, None)?;
        let ninf = scalar_tensor(em, attn, Argument::Float(f64::NEG_INFINITY), dtype)?;
        attn = where_(em, keep, attn, ninf, None)?;
    }
    if let Some(mask) = a.ot("attn_mask")? {
        let mask = if em.dtype(mask)? == Dtype::Bool {
            let zero = scalar_tensor(em, attn, Argument::Float(0.0), dtype)?;
            let ninf = scalar_tensor(em, attn, Argument::Float(f64::NEG_INFINITY), dtype)?;
            where_(em, mask, zero, ninf, None)?
        } else {
            mask
        };
        attn = binary(em, "aten.add.Tensor", attn, mask, dtype, None)?;
    }
    let last = Argument::Int(-1);
    let sm = {
        let sizes = em.sizes(attn)?;
        let meta = em.meta_like(attn, dtype, sizes)?;
        em.op(
            "aten._softmax.default",
            vec![
                ("self", Argument::Tensor(attn)),
                ("dim", last.clone()),
                ("half_to_float", Argument::Bool(false)),
            ],
            meta,
        )?
    };
    let eq = {
        let sizes = em.sizes(attn)?;
        let meta = em.meta_like(attn, Dtype::Bool, sizes)?;
        em.op(
            "aten.eq.Scalar",
            vec![
                ("self", Argument::Tensor(attn)),
                ("other", Argument::Float(f64::NEG_INFINITY)),
            ],
            meta,
        )?
    };
    let not_masked = unary(em, "aten.logical_not.default", eq)?;
    let any = {
        let mut sizes = em.sizes(attn)?;
        *sizes.last_mut().unwrap() = Sym::Int(1);
        let meta = em.meta_like(attn, Dtype::Bool, sizes)?;
        em.op(
            "aten.any.dim",
            vec![
                ("self", Argument::Tensor(not_masked)),
                ("dim", last),
                ("keepdim", Argument::Bool(true)),
            ],
            meta,
        )?
    };
    let all_masked = unary(em, "aten.logical_not.default", any)?;
    let zeros = full_like(em, sm, scalar(0.0, dtype), dtype, None)?;
    let mut p = where_(em, all_masked, zeros, sm, None)?;
    let dp = a.float("dropout_p")?;
    if dp > 0.0 {
        let sizes = em.sizes(p)?;
        let m0 = em.meta_like(p, dtype, sizes.clone())?;
        let m1 = em.meta_like(p, Dtype::Bool, sizes)?;
        p = em.call(
            "aten.native_dropout.default",
            vec![
                ("input", Argument::Tensor(p)),
                ("p", Argument::Float(dp)),
                ("train", Argument::Bool(true)),
            ],
            vec![Out::New(m0), Out::New(m1)],
        )?[0];
    }
    Ok(vec![matmul(em, p, v, Some(out))?])
}

/// `arange(n)` shaped as a column (`[n, 1]`) or a row (`[n]`).
fn arange_col(em: &mut Emitter, like: ValueId, n: i64, column: bool) -> Result<ValueId> {
    let meta = em.meta_like(like, Dtype::Int64, vec![Sym::Int(n)])?;
    let r = em.op(
        "aten.arange.start_step",
        vec![
            ("start", Argument::Int(0)),
            ("end", Argument::Int(n)),
            ("step", Argument::Int(1)),
            ("dtype", Argument::ScalarType(Dtype::Int64)),
        ],
        meta,
    )?;
    if column {
        unsqueeze(em, r, 1)
    } else {
        Ok(r)
    }
}

/// Repeats each head `n` times along dim -3 (grouped-query attention).
fn repeat_heads(em: &mut Emitter, x: ValueId, n: i64) -> Result<ValueId> {
    let r = em.rank(x)?;
    let u = unsqueeze(em, x, r - 2)?;
    let mut sizes = em.size_refs(u)?;
    sizes[r - 2] = SymRef::Int(n);
    let ex = expand(em, u, &sizes)?;
    let heads = em.mul(sizes[r - 3], SymRef::Int(n))?;
    let mut new: Vec<SymRef> = sizes[..r - 3].to_vec();
    new.extend([heads, sizes[r - 1], sizes[r]]);
    reshape(em, ex, &new, None)
}

fn silu(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let s = unary(em, "aten.sigmoid.default", x)?;
    let dtype = em.dtype(x)?;
    Ok(vec![binary(
        em,
        "aten.mul.Tensor",
        x,
        s,
        dtype,
        Some(a.out(0)?),
    )?])
}

/// `clamp(x + 3, 0, 6) / 6`
fn hard_sigmoid_part(em: &mut Emitter, x: ValueId, out: Option<ValueId>) -> Result<ValueId> {
    let dtype = em.dtype(x)?;
    let p = with_scalar(em, "aten.add.Tensor", x, scalar(3.0, dtype))?;
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, dtype, sizes)?;
    let c = em.op(
        "aten.clamp.default",
        vec![
            ("self", Argument::Tensor(p)),
            ("min", scalar(0.0, dtype)),
            ("max", scalar(6.0, dtype)),
        ],
        meta.clone(),
    )?;
    em.op_to(
        "aten.div.Tensor",
        vec![("self", Argument::Tensor(c)), ("other", scalar(6.0, dtype))],
        out,
        meta,
    )
}

fn hardswish(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let h = hard_sigmoid_part(em, x, None)?;
    Ok(vec![binary(
        em,
        "aten.mul.Tensor",
        x,
        h,
        dtype,
        Some(a.out(0)?),
    )?])
}

fn hardsigmoid(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    Ok(vec![hard_sigmoid_part(em, a.t("self")?, Some(a.out(0)?))?])
}

fn relu6(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    em.op_into(
        "aten.hardtanh.default",
        vec![
            ("self", Argument::Tensor(x)),
            ("min_val", scalar(0.0, dtype)),
            ("max_val", scalar(6.0, dtype)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn clamp_one(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let bound = if a.0.target.name == "clamp_min" {
        ("min", a.arg("min"))
    } else {
        ("max", a.arg("max"))
    };
    em.op_into(
        "aten.clamp.default",
        vec![("self", Argument::Tensor(a.t("self")?)), bound],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn square(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    em.op_into(
        "aten.pow.Tensor_Scalar",
        vec![
            ("self", Argument::Tensor(a.t("self")?)),
            ("exponent", Argument::Int(2)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn rsub(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    // other - alpha * self
    let x = a.t("self")?;
    let dtype = em.dtype(a.out(0)?)?;
    let o = scalar_tensor(em, x, a.arg("other"), dtype)?;
    em.op_into(
        "aten.sub.Tensor",
        vec![
            ("self", Argument::Tensor(o)),
            ("other", Argument::Tensor(x)),
            ("alpha", a.arg("alpha")),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn softplus(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    // where(x * beta > threshold, x, log1p(exp(x * beta)) / beta)
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let beta = a.float("beta")?;
    let xb = with_scalar(em, "aten.mul.Tensor", x, Argument::Float(beta))?;
    let ex = unary(em, "aten.exp.default", xb)?;
    let l = unary(em, "aten.log1p.default", ex)?;
    let soft = with_scalar(em, "aten.div.Tensor", l, Argument::Float(beta))?;
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, Dtype::Bool, sizes)?;
    let big = em.op(
        "aten.gt.Scalar",
        vec![
            ("self", Argument::Tensor(xb)),
            ("other", a.arg("threshold")),
        ],
        meta,
    )?;
    let _ = dtype;
    Ok(vec![where_(em, big, x, soft, Some(a.out(0)?))?])
}

fn mish(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, dtype, sizes)?;
    let sp = em.op(
        "aten.softplus.default",
        vec![("self", Argument::Tensor(x))],
        meta,
    )?;
    let t = unary(em, "aten.tanh.default", sp)?;
    Ok(vec![binary(
        em,
        "aten.mul.Tensor",
        x,
        t,
        dtype,
        Some(a.out(0)?),
    )?])
}

fn sum_all(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    em.op_into(
        "aten.sum.dim_IntList",
        vec![
            ("self", Argument::Tensor(a.t("self")?)),
            ("dim", Argument::Ints(vec![])),
            ("dtype", a.arg("dtype")),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn std(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let m = em.meta(out)?.clone();
    let meta = em.meta_like(out, m.dtype, m.sizes)?;
    let var = em.op(
        "aten.var.correction",
        vec![
            ("self", Argument::Tensor(a.t("self")?)),
            ("dim", a.arg("dim")),
            ("correction", a.arg("correction")),
            ("keepdim", a.arg("keepdim")),
        ],
        meta,
    )?;
    em.op_into(
        "aten.sqrt.default",
        vec![("self", Argument::Tensor(var))],
        out,
    )?;
    Ok(vec![out])
}

fn expand_as(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let sizes = em.size_refs(a.t("other")?)?;
    em.op_into(
        "aten.expand.default",
        vec![
            ("self", Argument::Tensor(a.t("self")?)),
            ("size", sym_ints_arg(&sizes)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn baddbmm(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let m = em.meta(out)?.clone();
    let meta = em.meta_like(out, dtype, m.sizes)?;
    let mut prod = em.op(
        "aten.bmm.default",
        vec![
            ("self", Argument::Tensor(a.t("batch1")?)),
            ("mat2", Argument::Tensor(a.t("batch2")?)),
        ],
        meta,
    )?;
    let (alpha, beta) = (a.float("alpha")?, a.float("beta")?);
    if alpha != 1.0 {
        prod = with_scalar(em, "aten.mul.Tensor", prod, scalar(alpha, dtype))?;
    }
    if beta == 0.0 {
        return Ok(vec![prod]);
    }
    let mut s = a.t("self")?;
    if beta != 1.0 {
        s = with_scalar(em, "aten.mul.Tensor", s, scalar(beta, dtype))?;
    }
    Ok(vec![binary(
        em,
        "aten.add.Tensor",
        s,
        prod,
        dtype,
        Some(out),
    )?])
}

fn pad(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let out = a.out(0)?;
    let p = a.syms("pad")?;
    let mode = a.string("mode")?;
    if mode == "constant" {
        let value = a.opt_float("value")?.unwrap_or(0.0);
        let dtype = em.dtype(x)?;
        em.op_into(
            "aten.constant_pad_nd.default",
            vec![
                ("self", Argument::Tensor(x)),
                ("pad", sym_ints_arg(&p)),
                ("value", scalar(value, dtype)),
            ],
            out,
        )?;
        return Ok(vec![out]);
    }
    let dims = p.len() / 2;
    let op = match (mode.as_str(), dims) {
        ("reflect", 1..=3) => format!("aten.reflection_pad{dims}d.default"),
        ("replicate", 1..=3) => format!("aten.replication_pad{dims}d.default"),
        _ => {
            return Err(Error::unsupported(format!(
                "node {}: pad mode {mode:?} over {dims} dims has no core ATen form",
                a.0.name
            )))
        }
    };
    em.op_into(
        &op,
        vec![("self", Argument::Tensor(x)), ("padding", sym_ints_arg(&p))],
        out,
    )?;
    Ok(vec![out])
}

/// `replication_pad1d` (no core form) through `replication_pad2d` on a
/// unit height.
fn replication_pad1d(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let out = a.out(0)?;
    let r = em.rank(x)?;
    let x2 = unsqueeze(em, x, r - 1)?;
    let m = em.meta(out)?.clone();
    let mut sizes = m.sizes.clone();
    sizes.insert(r - 1, Sym::Int(1));
    let meta = em.meta_like(out, m.dtype, sizes)?;
    let p = a.syms("padding")?;
    let mut p2 = p.clone();
    p2.extend([SymRef::Int(0), SymRef::Int(0)]);
    let y = em.op(
        "aten.replication_pad2d.default",
        vec![
            ("self", Argument::Tensor(x2)),
            ("padding", sym_ints_arg(&p2)),
        ],
        meta,
    )?;
    Ok(vec![squeeze_dims(em, y, &[r - 1], Some(out))?])
}

/// Ops that are another op under a public name, with the same arguments
/// and outputs (`cdist` is `_cdist_forward`, ...).
fn same_args(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let op = match a.0.target.to_string().as_str() {
        "aten.cdist.default" => "aten._cdist_forward.default",
        "aten.pdist.default" => "aten._pdist_forward.default",
        "aten.embedding_bag.padding_idx" => "aten._embedding_bag.default",
        other => {
            return Err(Error::internal(format!(
                "same_args has no target for {other}"
            )))
        }
    };
    let args =
        a.0.inputs
            .iter()
            .map(|n| {
                let arg = match (n.name.as_str(), &n.arg) {
                    // `int? padding_idx` (None: no padding row) is `int padding_idx=-1` there.
                    ("padding_idx", Argument::None) => Argument::Int(-1),
                    _ => n.arg.clone(),
                };
                (n.name.as_str(), arg)
            })
            .collect();
    let outs = a.outs();
    em.call(op, args, outs.iter().map(|&o| Out::Into(o)).collect())?;
    Ok(outs)
}

/// `source -> result, ...` (for `--list`).
pub fn describe(rule: &Rule) -> String {
    format!("{} -> {}", rule.source, rule.results.join(", "))
}

/// Grad mode means nothing to inference: the wrapped subgraph is inlined
/// (as torch's `run_decompositions()` does).
fn inline_subgraph(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let at =
        a.0.inputs
            .iter()
            .position(|i| matches!(i.arg, Argument::Graph(_)))
            .ok_or_else(|| Error::bad_input(format!("node {}: no subgraph", a.0.name)))?;
    let Argument::Graph(sub) = &a.0.inputs[at].arg else {
        unreachable!()
    };
    if a.0.target.name == "wrap_with_autocast" {
        return Err(Error::unsupported(format!(
            "node {}: autocast regions change dtypes and are not inlined",
            a.0.name
        )));
    }
    let args: Vec<Argument> = a.0.inputs[at + 1..].iter().map(|i| i.arg.clone()).collect();
    let outs = em.inline(&sub.graph, &args)?;
    let mut ids = Vec::new();
    for o in outs {
        let mut refs = Vec::new();
        o.value_refs(&mut refs);
        ids.extend(refs);
    }
    Ok(ids)
}

#[derive(Clone, Copy, PartialEq)]
enum Cell {
    Lstm,
    Gru,
    Tanh,
    Relu,
}

/// `aten.lstm.input`, `gru.input`, `rnn_tanh.input`, `rnn_relu.input`,
/// unrolled over the (static) sequence as torch's decompositions do: per
/// layer and direction, the input projection for every step at once, then
/// per step `linear(h) + x_t` and the cell's gates; layers chained,
/// directions concatenated, final states stacked.
fn lstm(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let cell = match a.0.target.name.as_str() {
        "lstm" => Cell::Lstm,
        "gru" => Cell::Gru,
        "rnn_tanh" => Cell::Tanh,
        _ => Cell::Relu,
    };
    let x = a.t("input")?;
    let hx = if cell == Cell::Lstm {
        a.ts("hx")?
    } else {
        vec![a.t("hx")?]
    };
    let params = a.ts("params")?;
    let (has_biases, layers) = (a.bool("has_biases")?, a.int("num_layers")? as usize);
    let (dropout, train) = (a.float("dropout")?, a.bool("train")?);
    let (bidir, batch_first) = (a.bool("bidirectional")?, a.bool("batch_first")?);
    if em.rank(x)? != 3 || (cell == Cell::Lstm && hx.len() != 2) {
        return Err(Error::unsupported(format!(
            "node {}: {} on unbatched input",
            a.0.name, a.0.target
        )));
    }
    let dirs = if bidir { 2 } else { 1 };
    let proj = cell == Cell::Lstm && em.sizes(hx[0])?[2] != em.sizes(hx[1])?[2];
    let per = 2 + 2 * has_biases as usize + proj as usize;
    if params.len() != per * layers * dirs {
        return Err(Error::bad_input(format!(
            "node {}: {} recurrent parameters, expected {}",
            a.0.name,
            params.len(),
            per * layers * dirs
        )));
    }
    let dtype = em.dtype(x)?;
    let mut input = if batch_first {
        swap_dims(em, x, 0, 1)?
    } else {
        x
    };
    let seq = em.static_sizes(input, "a recurrent layer (unrolled over the sequence)")?[0];
    let (mut final_h, mut final_c) = (Vec::new(), Vec::new());
    for layer in 0..layers {
        let mut dir_out = Vec::new();
        for d in 0..dirs {
            let idx = layer * dirs + d;
            let p = &params[idx * per..(idx + 1) * per];
            let (w_ih, w_hh) = (p[0], p[1]);
            let (b_ih, b_hh) = if has_biases {
                (Some(p[2]), Some(p[3]))
            } else {
                (None, None)
            };
            let w_hr = proj.then(|| p[per - 1]);
            let mut h = select(em, hx[0], 0, idx as i64)?;
            let mut c = if cell == Cell::Lstm {
                Some(select(em, hx[1], 0, idx as i64)?)
            } else {
                None
            };
            let pre = linear_op(em, input, w_ih, b_ih)?;
            let mut steps = Vec::new();
            let order: Vec<i64> = if d == 0 {
                (0..seq).collect()
            } else {
                (0..seq).rev().collect()
            };
            for t in order {
                let xt = select(em, pre, 0, t)?;
                let hh = linear_op(em, h, w_hh, b_hh)?;
                let (nh, nc) = cell_step(em, cell, xt, hh, h, c, w_hr, dtype)?;
                h = nh;
                c = nc;
                steps.push(h);
            }
            if d == 1 {
                steps.reverse();
            }
            final_h.push(h);
            final_c.extend(c);
            dir_out.push(stack_op(em, &steps, 0)?);
        }
        input = if dirs == 2 {
            cat_op(em, &dir_out, 2)?
        } else {
            dir_out[0]
        };
        if dropout != 0.0 && train && layer + 1 < layers {
            let sizes = em.sizes(input)?;
            let meta = em.meta_like(input, dtype, sizes)?;
            input = em.op(
                "aten.dropout.default",
                vec![
                    ("input", Argument::Tensor(input)),
                    ("p", Argument::Float(dropout)),
                    ("train", Argument::Bool(true)),
                ],
                meta,
            )?;
        }
    }
    let outs = a.outs();
    let out = if batch_first {
        swap_dims(em, input, 0, 1)?
    } else {
        input
    };
    let mut result = vec![out, stack_op(em, &final_h, 0)?];
    if cell == Cell::Lstm {
        result.push(stack_op(em, &final_c, 0)?);
    }
    Ok(result.into_iter().take(outs.len()).collect())
}

/// One step of a recurrent cell: `xt` is the input projection
/// (`linear(x, w_ih, b_ih)`), `hh` the hidden one (`linear(h, w_hh, b_hh)`).
#[allow(clippy::too_many_arguments)] // the cell's state and weights
fn cell_step(
    em: &mut Emitter,
    cell: Cell,
    xt: ValueId,
    hh: ValueId,
    h: ValueId,
    c: Option<ValueId>,
    w_hr: Option<ValueId>,
    dtype: Dtype,
) -> Result<(ValueId, Option<ValueId>)> {
    let mut h = h;
    let mut c = c;
    match cell {
        Cell::Lstm => {
            let gates = binary(em, "aten.add.Tensor", hh, xt, dtype, None)?;
            let g = chunk_op(em, gates, 4, 1)?;
            let i = unary(em, "aten.sigmoid.default", g[0])?;
            let f = unary(em, "aten.sigmoid.default", g[1])?;
            let cc = unary(em, "aten.tanh.default", g[2])?;
            let o = unary(em, "aten.sigmoid.default", g[3])?;
            let fc = binary(em, "aten.mul.Tensor", f, c.unwrap(), dtype, None)?;
            let ic = binary(em, "aten.mul.Tensor", i, cc, dtype, None)?;
            let cn = binary(em, "aten.add.Tensor", fc, ic, dtype, None)?;
            let tc = unary(em, "aten.tanh.default", cn)?;
            h = binary(em, "aten.mul.Tensor", o, tc, dtype, None)?;
            if let Some(w) = w_hr {
                h = linear_op(em, h, w, None)?;
            }
            c = Some(cn);
        }
        Cell::Gru => {
            let gi = chunk_op(em, xt, 3, 1)?;
            let gh = chunk_op(em, hh, 3, 1)?;
            let rs = binary(em, "aten.add.Tensor", gi[0], gh[0], dtype, None)?;
            let r = unary(em, "aten.sigmoid.default", rs)?;
            let zs = binary(em, "aten.add.Tensor", gi[1], gh[1], dtype, None)?;
            let z = unary(em, "aten.sigmoid.default", zs)?;
            let rh = binary(em, "aten.mul.Tensor", r, gh[2], dtype, None)?;
            let ns = binary(em, "aten.add.Tensor", gi[2], rh, dtype, None)?;
            let n = unary(em, "aten.tanh.default", ns)?;
            // h' = n + z * (h - n)
            let hn = binary(em, "aten.sub.Tensor", h, n, dtype, None)?;
            let zh = binary(em, "aten.mul.Tensor", z, hn, dtype, None)?;
            h = binary(em, "aten.add.Tensor", n, zh, dtype, None)?;
        }
        Cell::Tanh | Cell::Relu => {
            let s = binary(em, "aten.add.Tensor", hh, xt, dtype, None)?;
            let act = if cell == Cell::Tanh {
                "aten.tanh.default"
            } else {
                "aten.relu.default"
            };
            h = unary(em, act, s)?;
        }
    }
    Ok((h, c))
}

/// `lstm_cell`, `gru_cell`, `rnn_tanh_cell`, `rnn_relu_cell`: one step.
fn rnn_cell(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let cell = match a.0.target.name.as_str() {
        "lstm_cell" => Cell::Lstm,
        "gru_cell" => Cell::Gru,
        "rnn_tanh_cell" => Cell::Tanh,
        _ => Cell::Relu,
    };
    let x = a.t("input")?;
    if em.rank(x)? != 2 {
        return Err(Error::unsupported(format!(
            "node {}: {} on unbatched input",
            a.0.name, a.0.target
        )));
    }
    let (h, c) = if cell == Cell::Lstm {
        let hx = a.ts("hx")?;
        (hx[0], Some(hx[1]))
    } else {
        (a.t("hx")?, None)
    };
    let dtype = em.dtype(x)?;
    let xt = linear_op(em, x, a.t("w_ih")?, a.ot("b_ih")?)?;
    let hh = linear_op(em, h, a.t("w_hh")?, a.ot("b_hh")?)?;
    let (h, c) = cell_step(em, cell, xt, hh, h, c, None, dtype)?;
    Ok([Some(h), c].into_iter().flatten().collect())
}

/// `x.chunk(n, dim)` for a dim that divides evenly.
fn chunk_op(em: &mut Emitter, x: ValueId, n: i64, dim: usize) -> Result<Vec<ValueId>> {
    let dtype = em.dtype(x)?;
    let mut gs = em.sizes(x)?;
    let total = gs[dim]
        .as_int()
        .ok_or_else(|| Error::unsupported("a recurrent layer with a symbolic hidden size"))?;
    gs[dim] = Sym::Int(total / n);
    let metas: Vec<Out> = (0..n)
        .map(|_| em.meta_like(x, dtype, gs.clone()).map(Out::New))
        .collect::<Result<_>>()?;
    em.call(
        "aten.chunk.default",
        vec![
            ("self", Argument::Tensor(x)),
            ("chunks", Argument::Int(n)),
            ("dim", Argument::Int(dim as i64)),
        ],
        metas,
    )
}

fn select(em: &mut Emitter, x: ValueId, dim: usize, index: i64) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let mut sizes = m.sizes.clone();
    sizes.remove(dim);
    let meta = em.meta_like(x, m.dtype, sizes)?;
    em.op(
        "aten.select.int",
        vec![
            ("self", Argument::Tensor(x)),
            ("dim", Argument::Int(dim as i64)),
            ("index", Argument::SymInt(SymRef::Int(index))),
        ],
        meta,
    )
}

fn swap_dims(em: &mut Emitter, x: ValueId, d0: usize, d1: usize) -> Result<ValueId> {
    let mut perm: Vec<usize> = (0..em.rank(x)?).collect();
    perm.swap(d0, d1);
    permute(em, x, &perm, None)
}

/// `aten.linear` (lowered again by its own rule).
fn linear_op(em: &mut Emitter, x: ValueId, w: ValueId, b: Option<ValueId>) -> Result<ValueId> {
    let mut sizes = em.sizes(x)?;
    let n = em.sizes(w)?[0].clone();
    *sizes.last_mut().unwrap() = n;
    let meta = em.meta_like(x, em.dtype(x)?, sizes)?;
    em.op(
        "aten.linear.default",
        vec![
            ("input", Argument::Tensor(x)),
            ("weight", Argument::Tensor(w)),
            ("bias", Argument::OptionalTensor(b)),
        ],
        meta,
    )
}

fn stack_op(em: &mut Emitter, xs: &[ValueId], dim: usize) -> Result<ValueId> {
    let mut sizes = em.sizes(xs[0])?;
    sizes.insert(dim, Sym::Int(xs.len() as i64));
    let meta = em.meta_like(xs[0], em.dtype(xs[0])?, sizes)?;
    em.op(
        "aten.stack.default",
        vec![
            ("tensors", Argument::Tensors(xs.to_vec())),
            ("dim", Argument::Int(dim as i64)),
        ],
        meta,
    )
}

fn cat_op(em: &mut Emitter, xs: &[ValueId], dim: usize) -> Result<ValueId> {
    let mut sizes = em.sizes(xs[0])?;
    let mut total = 0;
    for x in xs {
        total += em.static_sizes(*x, "cat")?[dim];
    }
    sizes[dim] = Sym::Int(total);
    let meta = em.meta_like(xs[0], em.dtype(xs[0])?, sizes)?;
    em.op(
        "aten.cat.default",
        vec![
            ("tensors", Argument::Tensors(xs.to_vec())),
            ("dim", Argument::Int(dim as i64)),
        ],
        meta,
    )
}

// ---- composite ops: activations, shapes, norms ----

/// A reduction over `dims` (normalised; empty = every dim) with its meta.
#[allow(clippy::too_many_arguments)] // one emitted op: its operands, options and result
fn reduce(
    em: &mut Emitter,
    op: &str,
    x: ValueId,
    dims: &[i64],
    keepdim: bool,
    extra: Vec<(&str, Argument)>,
    dtype: Dtype,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let sizes = em.sizes(x)?;
    let r = sizes.len();
    let all: Vec<usize> = if dims.is_empty() {
        (0..r).collect()
    } else {
        dims.iter()
            .map(|&d| norm_dim(d, r))
            .collect::<Result<_>>()?
    };
    let new: Vec<Sym> = sizes
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match (all.contains(&i), keepdim) {
            (true, true) => Some(Sym::Int(1)),
            (true, false) => None,
            (false, _) => Some(s.clone()),
        })
        .collect();
    let meta = em.meta_like(x, dtype, new)?;
    let dim_arg = Argument::Ints(all.iter().map(|&d| d as i64).collect());
    let mut args = vec![
        ("self", Argument::Tensor(x)),
        ("dim", dim_arg),
        ("keepdim", Argument::Bool(keepdim)),
    ];
    args.extend(extra);
    em.op_to(op, args, out, meta)
}

fn cmp(em: &mut Emitter, op: &str, x: ValueId, other: Argument) -> Result<ValueId> {
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, Dtype::Bool, sizes)?;
    em.op(
        op,
        vec![("self", Argument::Tensor(x)), ("other", other)],
        meta,
    )
}

fn same(
    em: &mut Emitter,
    op: &str,
    args: Vec<(&str, Argument)>,
    like: ValueId,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let m = em.meta(like)?.clone();
    let meta = em.meta_like(like, m.dtype, m.sizes)?;
    em.op_to(op, args, out, meta)
}

fn elu(em: &mut Emitter, a: &A, alpha: f64, scale: f64, input_scale: f64) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    em.op_into(
        "aten.elu.default",
        vec![
            ("self", Argument::Tensor(a.t("self")?)),
            ("alpha", Argument::Float(alpha)),
            ("scale", Argument::Float(scale)),
            ("input_scale", Argument::Float(input_scale)),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn selu(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    elu(em, a, 1.673_263_242_354_377_3, 1.050_700_987_355_480_5, 1.0)
}

fn celu(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let alpha = a.float("alpha")?;
    elu(em, a, alpha, 1.0, 1.0 / alpha)
}

fn erfc(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let e = unary(em, "aten.erf.default", x)?;
    let n = unary(em, "aten.neg.default", e)?;
    Ok(vec![same(
        em,
        "aten.add.Tensor",
        vec![
            ("self", Argument::Tensor(n)),
            ("other", Argument::Float(1.0)),
        ],
        x,
        Some(a.out(0)?),
    )?])
}

fn glu(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let d = norm_dim(a.int("dim")?, em.rank(x)?)?;
    let n = em.static_sizes(x, "glu")?[d];
    let mut half = em.sizes(x)?;
    half[d] = Sym::Int(n / 2);
    let dtype = em.dtype(x)?;
    let m1 = em.meta_like(x, dtype, half.clone())?;
    let m2 = em.meta_like(x, dtype, half)?;
    let parts = em.call(
        "aten.split_with_sizes.default",
        vec![
            ("self", Argument::Tensor(x)),
            ("split_sizes", ints_arg(&[n / 2, n / 2])),
            ("dim", Argument::Int(d as i64)),
        ],
        vec![Out::New(m1), Out::New(m2)],
    )?;
    let g = unary(em, "aten.sigmoid.default", parts[1])?;
    Ok(vec![binary(
        em,
        "aten.mul.Tensor",
        parts[0],
        g,
        dtype,
        Some(a.out(0)?),
    )?])
}

fn hardshrink(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let ab = unary(em, "aten.abs.default", x)?;
    let small = cmp(em, "aten.le.Scalar", ab, a.arg("lambd"))?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    Ok(vec![where_(em, small, zero, x, Some(a.out(0)?))?])
}

fn softshrink(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let l = a.float("lambd")?;
    let hi = cmp(em, "aten.gt.Scalar", x, Argument::Float(l))?;
    let lo = cmp(em, "aten.lt.Scalar", x, Argument::Float(-l))?;
    let minus = with_scalar(em, "aten.sub.Tensor", x, Argument::Float(l))?;
    let plus = with_scalar(em, "aten.add.Tensor", x, Argument::Float(l))?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    let inner = where_(em, lo, plus, zero, None)?;
    Ok(vec![where_(em, hi, minus, inner, Some(a.out(0)?))?])
}

fn threshold(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let below = cmp(em, "aten.le.Scalar", x, a.arg("threshold"))?;
    let value = scalar_tensor(em, x, a.arg("value"), dtype)?;
    Ok(vec![where_(em, below, value, x, Some(a.out(0)?))?])
}

fn lerp(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    // torch: weight < 0.5 ? start + w * (end - start) : end - (end - start) * (1 - w)
    let (x, end) = (a.t("self")?, a.t("end")?);
    let w = a.float("weight")?;
    let dtype = em.dtype(a.out(0)?)?;
    let diff = binary(em, "aten.sub.Tensor", end, x, dtype, None)?;
    if w < 0.5 {
        let step = with_scalar(em, "aten.mul.Tensor", diff, Argument::Float(w))?;
        Ok(vec![binary(
            em,
            "aten.add.Tensor",
            x,
            step,
            dtype,
            Some(a.out(0)?),
        )?])
    } else {
        let step = with_scalar(em, "aten.mul.Tensor", diff, Argument::Float(1.0 - w))?;
        Ok(vec![binary(
            em,
            "aten.sub.Tensor",
            end,
            step,
            dtype,
            Some(a.out(0)?),
        )?])
    }
}

fn log_sigmoid(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    // min(x, 0) - log1p(exp(-|x|))
    let x = a.t("self")?;
    let ab = unary(em, "aten.abs.default", x)?;
    let n = unary(em, "aten.neg.default", ab)?;
    let e = unary(em, "aten.exp.default", n)?;
    let l = unary(em, "aten.log1p.default", e)?;
    let dtype = em.dtype(x)?;
    let m = same(
        em,
        "aten.clamp.default",
        vec![("self", Argument::Tensor(x)), ("max", scalar(0.0, dtype))],
        x,
        None,
    )?;
    Ok(vec![binary(
        em,
        "aten.sub.Tensor",
        m,
        l,
        dtype,
        Some(a.out(0)?),
    )?])
}

fn logit(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let mut x = a.t("self")?;
    let dtype = em.dtype(x)?;
    if let Some(eps) = a.opt_float("eps")? {
        x = same(
            em,
            "aten.clamp.default",
            vec![
                ("self", Argument::Tensor(x)),
                ("min", Argument::Float(eps)),
                ("max", Argument::Float(1.0 - eps)),
            ],
            x,
            None,
        )?;
    }
    let n = unary(em, "aten.neg.default", x)?;
    let one_minus = with_scalar(em, "aten.add.Tensor", n, Argument::Float(1.0))?;
    let q = binary(em, "aten.div.Tensor", x, one_minus, dtype, None)?;
    Ok(vec![same(
        em,
        "aten.log.default",
        vec![("self", Argument::Tensor(q))],
        x,
        Some(a.out(0)?),
    )?])
}

fn prelu(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, w) = (a.t("self")?, a.t("weight")?);
    let dtype = em.dtype(x)?;
    let r = em.rank(x)?;
    let nw = em.static_sizes(w, "prelu")?.iter().product::<i64>();
    let w = if nw > 1 && r >= 2 {
        let mut shape = vec![SymRef::Int(nw)];
        shape.extend(std::iter::repeat_n(SymRef::Int(1), r - 2));
        view(em, w, &shape, None)?
    } else {
        w
    };
    let scaled = binary(em, "aten.mul.Tensor", w, x, dtype, None)?;
    let pos = cmp(em, "aten.gt.Scalar", x, scalar(0.0, dtype))?;
    Ok(vec![where_(em, pos, x, scaled, Some(a.out(0)?))?])
}

fn addc(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, t1, t2) = (a.t("self")?, a.t("tensor1")?, a.t("tensor2")?);
    let dtype = em.dtype(a.out(0)?)?;
    let op = if a.0.target.name == "addcmul" {
        "aten.mul.Tensor"
    } else {
        "aten.div.Tensor"
    };
    let mut p = binary(em, op, t1, t2, dtype, None)?;
    let v = a.float("value")?;
    if v != 1.0 {
        p = with_scalar(em, "aten.mul.Tensor", p, scalar(v, dtype))?;
    }
    Ok(vec![binary(
        em,
        "aten.add.Tensor",
        x,
        p,
        dtype,
        Some(a.out(0)?),
    )?])
}

fn diag(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let sizes = em.static_sizes(x, "diag")?;
    if sizes.len() != 2 {
        return Err(Error::unsupported(format!(
            "node {}: diag of a vector (building a matrix) has no decomposition here",
            a.0.name
        )));
    }
    let k = a.int("diagonal")?;
    let (r0, c0) = if k >= 0 { (0, k) } else { (-k, 0) };
    let len = (sizes[0] - r0).min(sizes[1] - c0).max(0);
    let idx = |em: &mut Emitter, start: i64| -> Result<ValueId> {
        let meta = em.meta_like(x, Dtype::Int64, vec![Sym::Int(len)])?;
        em.op(
            "aten.arange.start_step",
            vec![
                ("start", Argument::Int(start)),
                ("end", Argument::Int(start + len)),
                ("step", Argument::Int(1)),
                ("dtype", Argument::ScalarType(Dtype::Int64)),
            ],
            meta,
        )
    };
    let rows = idx(em, r0)?;
    let cols = idx(em, c0)?;
    em.op_into(
        "aten.index.Tensor",
        vec![
            ("self", Argument::Tensor(x)),
            (
                "indices",
                Argument::OptionalTensors(vec![Some(rows), Some(cols)]),
            ),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn mt_rule(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let r = em.rank(x)?;
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    Ok(vec![permute(em, x, &perm, Some(a.out(0)?))?])
}

fn movedim(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let r = em.rank(x)?;
    let (src, dst) = (
        norm_dim(a.int("source")?, r)?,
        norm_dim(a.int("destination")?, r)?,
    );
    let mut rest: Vec<usize> = (0..r).filter(|&d| d != src).collect();
    rest.insert(dst, src);
    Ok(vec![permute(em, x, &rest, Some(a.out(0)?))?])
}

fn swapaxes(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let r = em.rank(x)?;
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(norm_dim(a.int("axis0")?, r)?, norm_dim(a.int("axis1")?, r)?);
    Ok(vec![permute(em, x, &perm, Some(a.out(0)?))?])
}

fn narrow(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let d = norm_dim(a.int("dim")?, em.rank(x)?)?;
    let (start, len) = (a.int("start")?, a.int("length")?);
    let n = em.static_sizes(x, "narrow")?[d];
    let start = if start < 0 { start + n } else { start };
    em.op_into(
        "aten.slice.Tensor",
        vec![
            ("self", Argument::Tensor(x)),
            ("dim", Argument::Int(d as i64)),
            ("start", Argument::SymInt(SymRef::Int(start))),
            ("end", Argument::SymInt(SymRef::Int(start + len))),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn pixel_shuffle(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let s = em.static_sizes(x, "pixel_shuffle")?;
    let r = s.len();
    let (lead, c, h, w) = (&s[..r - 3], s[r - 3], s[r - 2], s[r - 1]);
    let nl = lead.len();
    let (shape, perm): (Vec<i64>, Vec<usize>) = if a.0.target.name == "pixel_shuffle" {
        let f = a.int("upscale_factor")?;
        let shape = [lead, &[c / (f * f), f, f, h, w]].concat();
        (
            shape,
            (0..nl)
                .chain([nl, nl + 3, nl + 1, nl + 4, nl + 2])
                .collect(),
        )
    } else {
        let f = a.int("downscale_factor")?;
        let shape = [lead, &[c, h / f, f, w / f, f]].concat();
        (
            shape,
            (0..nl)
                .chain([nl, nl + 2, nl + 4, nl + 1, nl + 3])
                .collect(),
        )
    };
    let refs: Vec<SymRef> = shape.iter().map(|&v| SymRef::Int(v)).collect();
    let v = view(em, x, &refs, None)?;
    let p = permute(em, v, &perm, None)?;
    let out = a.out(0)?;
    let final_shape: Vec<SymRef> = em
        .static_sizes(out, "pixel_shuffle")?
        .into_iter()
        .map(SymRef::Int)
        .collect();
    Ok(vec![reshape(em, p, &final_shape, Some(out))?])
}

fn repeat_interleave(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let mut x = a.t("self")?;
    let n = a.int("repeats")?;
    let d = match a.opt_int("dim")? {
        Some(d) => norm_dim(d, em.rank(x)?)?,
        None => {
            let total = em
                .static_sizes(x, "repeat_interleave")?
                .iter()
                .product::<i64>();
            x = reshape(em, x, &[SymRef::Int(total)], None)?;
            0
        }
    };
    let u = unsqueeze(em, x, d + 1)?;
    let mut sizes = em.size_refs(u)?;
    sizes[d + 1] = SymRef::Int(n);
    let e = expand(em, u, &sizes)?;
    let merged = em.mul(sizes[d], SymRef::Int(n))?;
    let mut shape: Vec<SymRef> = sizes[..d].to_vec();
    shape.push(merged);
    shape.extend_from_slice(&sizes[d + 2..]);
    Ok(vec![reshape(em, e, &shape, Some(a.out(0)?))?])
}

fn roll(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x0 = a.t("self")?;
    let shifts = a.ints("shifts")?;
    let dims = a.ints("dims")?;
    let out = a.out(0)?;
    let (mut x, dims) = if dims.is_empty() {
        let total = em.static_sizes(x0, "roll")?.iter().product::<i64>();
        (reshape(em, x0, &[SymRef::Int(total)], None)?, vec![0])
    } else {
        (x0, dims)
    };
    for (&shift, &dim) in shifts.iter().zip(&dims) {
        let d = norm_dim(dim, em.rank(x)?)?;
        let n = em.static_sizes(x, "roll")?[d];
        let s = shift.rem_euclid(n.max(1));
        if s == 0 {
            continue;
        }
        let tail = slice(em, x, d, n - s, n)?;
        let head = slice(em, x, d, 0, n - s)?;
        x = cat_op(em, &[tail, head], d)?;
    }
    if a.ints("dims")?.is_empty() {
        let shape = em.size_refs(x0)?;
        return Ok(vec![view(em, x, &shape, Some(out))?]);
    }
    Ok(vec![x])
}

fn tri(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let s = em.static_sizes(x, "tril/triu")?;
    let r = s.len();
    let k = a.int("diagonal")?;
    let rows = arange_col(em, x, s[r - 2], true)?;
    let cols = arange_col(em, x, s[r - 1], false)?;
    let diff = binary(em, "aten.sub.Tensor", cols, rows, Dtype::Int64, None)?;
    let op = if a.0.target.name == "tril" {
        "aten.le.Scalar"
    } else {
        "aten.ge.Scalar"
    };
    let keep = cmp(em, op, diff, Argument::Int(k))?;
    let dtype = em.dtype(x)?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    Ok(vec![where_(em, keep, x, zero, Some(a.out(0)?))?])
}

/// sqrt(sum(x * x, dim, keepdim)) for the 2-norm.
fn norm2(
    em: &mut Emitter,
    x: ValueId,
    dims: &[i64],
    keepdim: bool,
    out: Option<ValueId>,
) -> Result<ValueId> {
    let dtype = em.dtype(x)?;
    let sq = binary(em, "aten.mul.Tensor", x, x, dtype, None)?;
    let s = reduce(
        em,
        "aten.sum.dim_IntList",
        sq,
        dims,
        keepdim,
        vec![],
        dtype,
        None,
    )?;
    same(
        em,
        "aten.sqrt.default",
        vec![("self", Argument::Tensor(s))],
        s,
        out,
    )
}

fn cosine_similarity(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x1, x2) = (a.t("x1")?, a.t("x2")?);
    let d = a.int("dim")?;
    let eps = a.float("eps")?;
    let dtype = em.dtype(x1)?;
    let mut unit = Vec::new();
    for x in [x1, x2] {
        let n = norm2(em, x, &[d], true, None)?;
        let n = same(
            em,
            "aten.clamp.default",
            vec![("self", Argument::Tensor(n)), ("min", Argument::Float(eps))],
            n,
            None,
        )?;
        unit.push(binary(em, "aten.div.Tensor", x, n, dtype, None)?);
    }
    let p = binary(em, "aten.mul.Tensor", unit[0], unit[1], dtype, None)?;
    Ok(vec![reduce(
        em,
        "aten.sum.dim_IntList",
        p,
        &[d],
        false,
        vec![],
        dtype,
        Some(a.out(0)?),
    )?])
}

fn instance_norm(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("input")?;
    let r = em.rank(x)?;
    let dtype = em.dtype(x)?;
    let spatial: Vec<i64> = (2..r as i64).collect();
    let c = em.size(x, 1)?;
    let per_channel = |em: &mut Emitter, t: ValueId| -> Result<ValueId> {
        let mut shape = vec![c];
        shape.extend(std::iter::repeat_n(SymRef::Int(1), r - 2));
        view(em, t, &shape, None)
    };
    let (mean, var) = if a.bool("use_input_stats")? || !a.has("running_mean") {
        let mean = reduce(em, "aten.mean.dim", x, &spatial, true, vec![], dtype, None)?;
        let var = reduce(
            em,
            "aten.var.correction",
            x,
            &spatial,
            true,
            vec![("correction", Argument::Int(0))],
            dtype,
            None,
        )?;
        (mean, var)
    } else {
        let m = per_channel(em, a.t("running_mean")?)?;
        let v = per_channel(em, a.t("running_var")?)?;
        (m, v)
    };
    let centered = binary(em, "aten.sub.Tensor", x, mean, dtype, None)?;
    let ve = with_scalar(em, "aten.add.Tensor", var, Argument::Float(a.float("eps")?))?;
    let rs = unary(em, "aten.rsqrt.default", ve)?;
    let mut y = binary(em, "aten.mul.Tensor", centered, rs, dtype, None)?;
    let (w, b) = (a.ot("weight")?, a.ot("bias")?);
    let out = a.out(0)?;
    if let Some(w) = w {
        let w = per_channel(em, w)?;
        y = binary(
            em,
            "aten.mul.Tensor",
            y,
            w,
            dtype,
            if b.is_none() { Some(out) } else { None },
        )?;
    }
    if let Some(b) = b {
        let b = per_channel(em, b)?;
        y = binary(em, "aten.add.Tensor", y, b, dtype, Some(out))?;
    }
    Ok(vec![y])
}

fn vector_norm(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let mut x = a.t("self")?;
    let out = a.out(0)?;
    if let Some(d) = a.dtype("dtype") {
        x = to_copy(em, x, d, None)?;
    }
    let dtype = em.dtype(out)?;
    let dims = a.opt_ints("dim")?.unwrap_or_default();
    let keepdim = a.bool("keepdim")?;
    let ord = a.float("ord")?;
    let ab = unary(em, "aten.abs.default", x)?;
    let r = if ord == 2.0 {
        norm2(em, x, &dims, keepdim, Some(out))?
    } else if ord == 1.0 {
        reduce(
            em,
            "aten.sum.dim_IntList",
            ab,
            &dims,
            keepdim,
            vec![],
            dtype,
            Some(out),
        )?
    } else if ord == f64::INFINITY {
        reduce(
            em,
            "aten.amax.default",
            ab,
            &dims,
            keepdim,
            vec![],
            dtype,
            Some(out),
        )?
    } else if ord == f64::NEG_INFINITY {
        reduce(
            em,
            "aten.amin.default",
            ab,
            &dims,
            keepdim,
            vec![],
            dtype,
            Some(out),
        )?
    } else if ord == 0.0 {
        let nz = cmp(em, "aten.ne.Scalar", x, Argument::Int(0))?;
        let nz = to_copy(em, nz, dtype, None)?;
        reduce(
            em,
            "aten.sum.dim_IntList",
            nz,
            &dims,
            keepdim,
            vec![],
            dtype,
            Some(out),
        )?
    } else {
        let p = same(
            em,
            "aten.pow.Tensor_Scalar",
            vec![
                ("self", Argument::Tensor(ab)),
                ("exponent", Argument::Float(ord)),
            ],
            ab,
            None,
        )?;
        let s = reduce(
            em,
            "aten.sum.dim_IntList",
            p,
            &dims,
            keepdim,
            vec![],
            dtype,
            None,
        )?;
        same(
            em,
            "aten.pow.Tensor_Scalar",
            vec![
                ("self", Argument::Tensor(s)),
                ("exponent", Argument::Float(1.0 / ord)),
            ],
            s,
            Some(out),
        )?
    };
    Ok(vec![r])
}

fn logsumexp(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let dims = a.ints("dim")?;
    let keepdim = a.bool("keepdim")?;
    let m = reduce(em, "aten.amax.default", x, &dims, true, vec![], dtype, None)?;
    let ab = unary(em, "aten.abs.default", m)?;
    let inf = cmp(em, "aten.eq.Scalar", ab, Argument::Float(f64::INFINITY))?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    let safe = where_(em, inf, zero, m, None)?;
    let c = binary(em, "aten.sub.Tensor", x, safe, dtype, None)?;
    let e = unary(em, "aten.exp.default", c)?;
    let s = reduce(
        em,
        "aten.sum.dim_IntList",
        e,
        &dims,
        keepdim,
        vec![],
        dtype,
        None,
    )?;
    let l = unary(em, "aten.log.default", s)?;
    let shift = if keepdim {
        safe
    } else {
        let r = em.rank(x)?;
        let all: Vec<usize> = if dims.is_empty() {
            (0..r).collect()
        } else {
            dims.iter()
                .map(|&d| norm_dim(d, r))
                .collect::<Result<_>>()?
        };
        squeeze_dims(em, safe, &all, None)?
    };
    Ok(vec![binary(
        em,
        "aten.add.Tensor",
        l,
        shift,
        dtype,
        Some(a.out(0)?),
    )?])
}

fn correction_of(a: &A) -> Result<Argument> {
    Ok(if a.0.arg("unbiased").is_some() {
        Argument::Int(if a.bool("unbiased")? { 1 } else { 0 })
    } else {
        a.arg("correction")
    })
}

fn var_args(a: &A) -> Result<Vec<(&'static str, Argument)>> {
    Ok(vec![
        ("self", Argument::Tensor(a.t("self")?)),
        ("dim", a.arg("dim")),
        ("correction", correction_of(a)?),
        ("keepdim", a.arg("keepdim")),
    ])
}

/// `var.correction` over the node's dims into `out`, or its square root
/// when `sqrt` (the standard deviation).
fn var_into(em: &mut Emitter, a: &A, out: ValueId, sqrt: bool) -> Result<ValueId> {
    if !sqrt {
        return em.op_into("aten.var.correction", var_args(a)?, out);
    }
    let m = em.meta(out)?.clone();
    let meta = em.meta_like(out, m.dtype, m.sizes)?;
    let v = em.op("aten.var.correction", var_args(a)?, meta)?;
    em.op_into(
        "aten.sqrt.default",
        vec![("self", Argument::Tensor(v))],
        out,
    )
}

/// The mean over the node's dims into `out`.
fn mean_into(em: &mut Emitter, a: &A, out: ValueId) -> Result<ValueId> {
    em.op_into(
        "aten.mean.dim",
        vec![
            ("self", Argument::Tensor(a.t("self")?)),
            ("dim", a.arg("dim")),
            ("keepdim", a.arg("keepdim")),
        ],
        out,
    )
}

fn std_dim(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    Ok(vec![var_into(em, a, a.out(0)?, true)?])
}

fn var_dim(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    Ok(vec![var_into(em, a, a.out(0)?, false)?])
}

/// var_mean and std_mean: (var or std, mean).
fn var_mean(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let sqrt = a.0.target.name == "std_mean";
    Ok(vec![
        var_into(em, a, a.out(0)?, sqrt)?,
        mean_into(em, a, a.out(1)?)?,
    ])
}

/// Contracts einsum operands pairwise (left to right) with bmm, after
/// summing out letters only one operand has; letters that a later operand
/// or the output needs are kept.
fn einsum(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let eq = a.string("equation")?.replace(' ', "");
    let xs = a.ts("tensors")?;
    let (lhs, out_spec) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), r.to_string()),
        None => {
            // Implicit output: letters seen once, in alphabetical order.
            let l = eq.clone();
            let mut once: Vec<char> = l
                .chars()
                .filter(|c| c.is_alphabetic() && l.matches(*c).count() == 1)
                .collect();
            once.sort();
            (l, once.into_iter().collect())
        }
    };
    let specs: Vec<Vec<char>> = lhs.split(',').map(|s| s.chars().collect()).collect();
    let bad = |why: &str| Error::unsupported(format!("node {}: einsum {eq:?}: {why}", a.0.name));
    if eq.contains('.') {
        return Err(bad("ellipses are not supported"));
    }
    if specs.len() != xs.len()
        || specs
            .iter()
            .any(|s| s.iter().any(|c| s.iter().filter(|d| *d == c).count() > 1))
    {
        return Err(bad(
            "repeated letters in one operand (diagonals) are not supported",
        ));
    }
    let out: Vec<char> = out_spec.chars().collect();
    let dtype = em.dtype(a.out(0)?)?;
    // Each operand with its letters; sum out letters nobody else needs.
    let mut ops: Vec<(ValueId, Vec<char>)> = Vec::new();
    for (i, (x, spec)) in xs.iter().zip(&specs).enumerate() {
        let needed = |c: &char| {
            out.contains(c)
                || specs
                    .iter()
                    .enumerate()
                    .any(|(j, s)| j != i && s.contains(c))
        };
        let drop: Vec<i64> = spec
            .iter()
            .enumerate()
            .filter(|(_, c)| !needed(c))
            .map(|(d, _)| d as i64)
            .collect();
        let kept: Vec<char> = spec.iter().copied().filter(|c| needed(c)).collect();
        let v = if drop.is_empty() {
            *x
        } else {
            reduce(
                em,
                "aten.sum.dim_IntList",
                *x,
                &drop,
                false,
                vec![],
                dtype,
                None,
            )?
        };
        ops.push((v, kept));
    }
    let mut acc = ops.remove(0);
    for (k, (b, bspec)) in ops.iter().enumerate() {
        let later: Vec<char> = ops[k + 1..]
            .iter()
            .flat_map(|(_, s)| s.clone())
            .chain(out.iter().copied())
            .collect();
        let (x, xspec) = (acc.0, acc.1.clone());
        let batch: Vec<char> = xspec
            .iter()
            .copied()
            .filter(|c| bspec.contains(c) && later.contains(c))
            .collect();
        let contract: Vec<char> = xspec
            .iter()
            .copied()
            .filter(|c| bspec.contains(c) && !later.contains(c))
            .collect();
        let xfree: Vec<char> = xspec
            .iter()
            .copied()
            .filter(|c| !bspec.contains(c))
            .collect();
        let bfree: Vec<char> = bspec
            .iter()
            .copied()
            .filter(|c| !xspec.contains(c))
            .collect();
        let pos = |spec: &[char], c: char| spec.iter().position(|d| *d == c).unwrap();
        let size = |em: &mut Emitter, v: ValueId, spec: &[char], c: char| em.size(v, pos(spec, c));
        let group = |em: &mut Emitter, v: ValueId, spec: &[char], cs: &[char]| -> Result<SymRef> {
            let refs: Vec<SymRef> = cs
                .iter()
                .map(|c| size(em, v, spec, *c))
                .collect::<Result<_>>()?;
            em.product(&refs)
        };
        let (nb, nc, nx, ny) = (
            group(em, x, &xspec, &batch)?,
            group(em, x, &xspec, &contract)?,
            group(em, x, &xspec, &xfree)?,
            group(em, *b, bspec, &bfree)?,
        );
        let xperm: Vec<usize> = batch
            .iter()
            .chain(&xfree)
            .chain(&contract)
            .map(|c| pos(&xspec, *c))
            .collect();
        let bperm: Vec<usize> = batch
            .iter()
            .chain(&contract)
            .chain(&bfree)
            .map(|c| pos(bspec, *c))
            .collect();
        let xp = permute(em, x, &xperm, None)?;
        let xp = reshape(em, xp, &[nb, nx, nc], None)?;
        let bp = permute(em, *b, &bperm, None)?;
        let bp = reshape(em, bp, &[nb, nc, ny], None)?;
        let meta = em.meta_like(x, dtype, syms(em, &[nb, nx, ny]))?;
        let r = em.op(
            "aten.bmm.default",
            vec![
                ("self", Argument::Tensor(xp)),
                ("mat2", Argument::Tensor(bp)),
            ],
            meta,
        )?;
        let mut shape = Vec::new();
        for c in batch.iter().chain(&xfree) {
            shape.push(size(em, x, &xspec, *c)?);
        }
        for c in &bfree {
            shape.push(size(em, *b, bspec, *c)?);
        }
        let r = view(em, r, &shape, None)?;
        acc = (
            r,
            batch.iter().chain(&xfree).chain(&bfree).copied().collect(),
        );
    }
    let (v, spec) = acc;
    let perm: Vec<usize> = out
        .iter()
        .map(|c| {
            spec.iter()
                .position(|d| d == c)
                .ok_or_else(|| bad("an output letter is in no operand"))
        })
        .collect::<Result<_>>()?;
    if perm.iter().enumerate().all(|(i, p)| i == *p) && perm.len() == spec.len() {
        return Ok(vec![v]);
    }
    Ok(vec![permute(em, v, &perm, Some(a.out(0)?))?])
}

// ---- more composite ops ----

fn addr(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let (v1, v2) = (a.t("vec1")?, a.t("vec2")?);
    let m = em.meta(out)?.clone();
    let meta = em.meta_like(out, dtype, m.sizes)?;
    let mut o = em.op(
        "aten.outer.default",
        vec![
            ("self", Argument::Tensor(v1)),
            ("vec2", Argument::Tensor(v2)),
        ],
        meta,
    )?;
    let (beta, alpha) = (a.float("beta")?, a.float("alpha")?);
    if alpha != 1.0 {
        o = with_scalar(em, "aten.mul.Tensor", o, scalar(alpha, dtype))?;
    }
    if beta == 0.0 {
        return Ok(vec![o]);
    }
    let mut x = a.t("self")?;
    if beta != 1.0 {
        x = with_scalar(em, "aten.mul.Tensor", x, scalar(beta, dtype))?;
    }
    Ok(vec![binary(em, "aten.add.Tensor", x, o, dtype, Some(out))?])
}

fn all(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    // all(x) = not(any(not(x)))
    let x = a.t("self")?;
    let nx = unary(em, "aten.logical_not.default", x)?;
    let nx = if em.dtype(nx)? != Dtype::Bool {
        to_copy(em, nx, Dtype::Bool, None)?
    } else {
        nx
    };
    let out = a.out(0)?;
    let m = em.meta(out)?.clone();
    let meta = em.meta_like(out, Dtype::Bool, m.sizes)?;
    let any_op = format!("aten.any.{}", a.0.target.overload);
    let mut args = vec![("self", Argument::Tensor(nx))];
    for name in ["dim", "keepdim"] {
        if a.0.arg(name).is_some() {
            args.push((name, a.arg(name)));
        }
    }
    let any = em.op(&any_op, args, meta)?;
    Ok(vec![same(
        em,
        "aten.logical_not.default",
        vec![("self", Argument::Tensor(any))],
        any,
        Some(out),
    )?])
}

fn broadcast_tensors(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let xs = a.ts("tensors")?;
    let mut out = Vec::new();
    for (x, o) in xs.iter().zip(a.outs()) {
        let sizes = em.size_refs(o)?;
        em.op_into(
            "aten.expand.default",
            vec![
                ("self", Argument::Tensor(*x)),
                ("size", sym_ints_arg(&sizes)),
            ],
            o,
        )?;
        out.push(o);
    }
    Ok(out)
}

fn channel_shuffle(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let g = a.int("groups")?;
    let s = em.static_sizes(x, "channel_shuffle")?;
    let (n, c) = (s[0], s[1]);
    let mut shape = vec![n, g, c / g];
    shape.extend_from_slice(&s[2..]);
    let refs: Vec<SymRef> = shape.iter().map(|&v| SymRef::Int(v)).collect();
    let v = view(em, x, &refs, None)?;
    let mut perm: Vec<usize> = vec![0, 2, 1];
    perm.extend(3..shape.len());
    let p = permute(em, v, &perm, None)?;
    let back: Vec<SymRef> = s.iter().map(|&v| SymRef::Int(v)).collect();
    Ok(vec![reshape(em, p, &back, Some(a.out(0)?))?])
}

fn count_nonzero(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let nz = cmp(em, "aten.ne.Scalar", x, Argument::Int(0))?;
    let dims = match a.0.arg("dim") {
        Some(Argument::Int(d)) => vec![*d],
        Some(Argument::Ints(v)) => v.clone(),
        _ => vec![],
    };
    Ok(vec![reduce(
        em,
        "aten.sum.dim_IntList",
        nz,
        &dims,
        false,
        vec![("dtype", Argument::ScalarType(Dtype::Int64))],
        Dtype::Int64,
        Some(a.out(0)?),
    )?])
}

fn deg_rad(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let f = if a.0.target.name == "deg2rad" {
        std::f64::consts::PI / 180.0
    } else {
        180.0 / std::f64::consts::PI
    };
    Ok(vec![same(
        em,
        "aten.mul.Tensor",
        vec![
            ("self", Argument::Tensor(a.t("self")?)),
            ("other", Argument::Float(f)),
        ],
        a.out(0)?,
        Some(a.out(0)?),
    )?])
}

fn dot(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, y) = (a.t("self")?, a.t("tensor")?);
    let dtype = em.dtype(a.out(0)?)?;
    let p = binary(em, "aten.mul.Tensor", x, y, dtype, None)?;
    Ok(vec![reduce(
        em,
        "aten.sum.dim_IntList",
        p,
        &[0],
        false,
        vec![],
        dtype,
        Some(a.out(0)?),
    )?])
}

fn mv(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    Ok(vec![matmul(
        em,
        a.t("self")?,
        a.t("vec")?,
        Some(a.out(0)?),
    )?])
}

fn outer(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, y) = (a.t("self")?, a.t("vec2")?);
    let col = unsqueeze(em, x, 1)?;
    let dtype = em.dtype(a.out(0)?)?;
    Ok(vec![binary(
        em,
        "aten.mul.Tensor",
        col,
        y,
        dtype,
        Some(a.out(0)?),
    )?])
}

fn eye(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let s = em.static_sizes(out, "eye")?;
    let rows = arange_col(em, out, s[0], true)?;
    let cols = arange_col(em, out, s[1], false)?;
    let eq = binary(em, "aten.eq.Tensor", rows, cols, Dtype::Bool, None)?;
    let dtype = em.dtype(out)?;
    Ok(vec![to_copy(em, eq, dtype, Some(out))?])
}

fn flip_lr_ud(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let d = if a.0.target.name == "fliplr" { 1 } else { 0 };
    em.op_into(
        "aten.flip.default",
        vec![
            ("self", Argument::Tensor(a.t("self")?)),
            ("dims", ints_arg(&[d])),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn floor_divide(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let op = if a.0.target.overload == "Scalar" {
        "aten.div.Scalar_mode"
    } else {
        "aten.div.Tensor_mode"
    };
    em.op_into(
        op,
        vec![
            ("self", a.arg("self")),
            ("other", a.arg("other")),
            ("rounding_mode", Argument::String("floor".into())),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn frac(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let t = unary(em, "aten.trunc.default", x)?;
    let dtype = em.dtype(x)?;
    Ok(vec![binary(
        em,
        "aten.sub.Tensor",
        x,
        t,
        dtype,
        Some(a.out(0)?),
    )?])
}

fn hvstack(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let mut xs = a.ts("tensors")?;
    let out = a.out(0)?;
    let dim = if a.0.target.name == "hstack" {
        if em.rank(xs[0])? == 1 {
            0
        } else {
            1
        }
    } else {
        for x in xs.iter_mut() {
            if em.rank(*x)? == 1 {
                *x = unsqueeze(em, *x, 0)?;
            }
        }
        0
    };
    em.op_into(
        "aten.cat.default",
        vec![
            ("tensors", Argument::Tensors(xs)),
            ("dim", Argument::Int(dim)),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn isfinite(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, Dtype::Bool, sizes)?;
    let inf = em.op(
        "aten.isinf.default",
        vec![("self", Argument::Tensor(x))],
        meta.clone(),
    )?;
    let nan = em.op(
        "aten.isnan.default",
        vec![("self", Argument::Tensor(x))],
        meta.clone(),
    )?;
    let bad = binary(em, "aten.logical_or.default", inf, nan, Dtype::Bool, None)?;
    Ok(vec![same(
        em,
        "aten.logical_not.default",
        vec![("self", Argument::Tensor(bad))],
        bad,
        Some(a.out(0)?),
    )?])
}

fn isinf_signed(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let v = if a.0.target.name == "isposinf" {
        f64::INFINITY
    } else {
        f64::NEG_INFINITY
    };
    em.op_into(
        "aten.eq.Scalar",
        vec![
            ("self", Argument::Tensor(a.t("self")?)),
            ("other", Argument::Float(v)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn lerp_tensor(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    // where(w < 0.5, start + w * (end - start), end - (end - start) * (1 - w))
    let (x, end, w) = (a.t("self")?, a.t("end")?, a.t("weight")?);
    let dtype = em.dtype(a.out(0)?)?;
    let diff = binary(em, "aten.sub.Tensor", end, x, dtype, None)?;
    let lo = binary(em, "aten.mul.Tensor", w, diff, dtype, None)?;
    let lo = binary(em, "aten.add.Tensor", x, lo, dtype, None)?;
    let nw = unary(em, "aten.neg.default", w)?;
    let one_minus = with_scalar(em, "aten.add.Tensor", nw, Argument::Float(1.0))?;
    let hi = binary(em, "aten.mul.Tensor", diff, one_minus, dtype, None)?;
    let hi = binary(em, "aten.sub.Tensor", end, hi, dtype, None)?;
    let small = cmp(em, "aten.lt.Scalar", w, Argument::Float(0.5))?;
    Ok(vec![where_(em, small, lo, hi, Some(a.out(0)?))?])
}

fn logaddexp(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    // max(a, b) + log1p(exp(-|a - b|)); where both are the same infinity, that infinity
    let (x, y) = (a.t("self")?, a.t("other")?);
    let dtype = em.dtype(a.out(0)?)?;
    let m = binary(em, "aten.maximum.default", x, y, dtype, None)?;
    let d = binary(em, "aten.sub.Tensor", x, y, dtype, None)?;
    let ad = unary(em, "aten.abs.default", d)?;
    let n = unary(em, "aten.neg.default", ad)?;
    // logaddexp2: max + log2(1 + 2^-|a-b|) = max + log1p(2^-|a-b|) / ln 2
    let base2 = a.0.target.name == "logaddexp2";
    let e = if base2 {
        same(
            em,
            "aten.pow.Scalar",
            vec![
                ("self", Argument::Float(2.0)),
                ("exponent", Argument::Tensor(n)),
            ],
            n,
            None,
        )?
    } else {
        unary(em, "aten.exp.default", n)?
    };
    let mut l = unary(em, "aten.log1p.default", e)?;
    if base2 {
        l = with_scalar(
            em,
            "aten.mul.Tensor",
            l,
            Argument::Float(std::f64::consts::LOG2_E),
        )?;
    }
    let r = binary(em, "aten.add.Tensor", m, l, dtype, None)?;
    let inf = {
        let sizes = em.sizes(x)?;
        let meta = em.meta_like(x, Dtype::Bool, sizes)?;
        em.op(
            "aten.isinf.default",
            vec![("self", Argument::Tensor(x))],
            meta,
        )?
    };
    let eq = binary(em, "aten.eq.Tensor", x, y, Dtype::Bool, None)?;
    let both = binary(em, "aten.logical_and.default", inf, eq, Dtype::Bool, None)?;
    Ok(vec![where_(em, both, x, r, Some(a.out(0)?))?])
}

/// mse, l1, huber and smooth-l1 losses with their reductions.
fn loss(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, t) = (a.t("self")?, a.t("target")?);
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let d = binary(em, "aten.sub.Tensor", x, t, dtype, None)?;
    let elem = match a.0.target.name.as_str() {
        "mse_loss" => binary(em, "aten.mul.Tensor", d, d, dtype, None)?,
        "l1_loss" => unary(em, "aten.abs.default", d)?,
        name => {
            let ad = unary(em, "aten.abs.default", d)?;
            let (k, huber) = if name == "huber_loss" {
                (a.float("delta")?, true)
            } else {
                (a.float("beta")?, false)
            };
            let small = cmp(em, "aten.lt.Scalar", ad, Argument::Float(k))?;
            // huber: 0.5 d^2 | k (|d| - k/2); smooth l1: 0.5 d^2 / k | |d| - k/2
            let sq = binary(em, "aten.mul.Tensor", d, d, dtype, None)?;
            let half_sq = with_scalar(
                em,
                "aten.mul.Tensor",
                sq,
                Argument::Float(if huber { 0.5 } else { 0.5 / k }),
            )?;
            let lin = with_scalar(em, "aten.sub.Tensor", ad, Argument::Float(k / 2.0))?;
            let lin = if huber {
                with_scalar(em, "aten.mul.Tensor", lin, Argument::Float(k))?
            } else {
                lin
            };
            where_(em, small, half_sq, lin, None)?
        }
    };
    let reduction = a.int("reduction")?;
    let meta = em.meta(out)?.clone();
    match reduction {
        0 => Ok(vec![elem]),
        1 => {
            let m = em.meta_like(out, dtype, meta.sizes)?;
            let _ = m;
            em.op_into(
                "aten.mean.default",
                vec![("self", Argument::Tensor(elem))],
                out,
            )?;
            Ok(vec![out])
        }
        _ => Ok(vec![reduce(
            em,
            "aten.sum.dim_IntList",
            elem,
            &[],
            false,
            vec![],
            dtype,
            Some(out),
        )?]),
    }
}

fn nan_to_num(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let (big, small) = match dtype {
        Dtype::Float64 => (f64::MAX, f64::MIN),
        Dtype::Float16 => (65504.0, -65504.0),
        Dtype::BFloat16 => (3.3895313892515355e38, -3.3895313892515355e38),
        _ => (f32::MAX as f64, f32::MIN as f64),
    };
    let nan = a.opt_float("nan")?.unwrap_or(0.0);
    let pos = a.opt_float("posinf")?.unwrap_or(big);
    let neg = a.opt_float("neginf")?.unwrap_or(small);
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, Dtype::Bool, sizes)?;
    let is_nan = em.op(
        "aten.isnan.default",
        vec![("self", Argument::Tensor(x))],
        meta,
    )?;
    let is_pos = cmp(em, "aten.eq.Scalar", x, Argument::Float(f64::INFINITY))?;
    let is_neg = cmp(em, "aten.eq.Scalar", x, Argument::Float(f64::NEG_INFINITY))?;
    let vn = scalar_tensor(em, x, Argument::Float(nan), dtype)?;
    let vp = scalar_tensor(em, x, Argument::Float(pos), dtype)?;
    let vg = scalar_tensor(em, x, Argument::Float(neg), dtype)?;
    let y = where_(em, is_nan, vn, x, None)?;
    let y = where_(em, is_pos, vp, y, None)?;
    Ok(vec![where_(em, is_neg, vg, y, Some(a.out(0)?))?])
}

fn nan_reduce(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(a.out(0)?)?;
    let dims = a.opt_ints("dim")?.unwrap_or_default();
    let keepdim = a.bool("keepdim")?;
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, Dtype::Bool, sizes)?;
    let is_nan = em.op(
        "aten.isnan.default",
        vec![("self", Argument::Tensor(x))],
        meta,
    )?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    let clean = where_(em, is_nan, zero, x, None)?;
    if a.0.target.name == "nansum" {
        return Ok(vec![reduce(
            em,
            "aten.sum.dim_IntList",
            clean,
            &dims,
            keepdim,
            vec![],
            dtype,
            Some(a.out(0)?),
        )?]);
    }
    let s = reduce(
        em,
        "aten.sum.dim_IntList",
        clean,
        &dims,
        keepdim,
        vec![],
        dtype,
        None,
    )?;
    let ok = unary(em, "aten.logical_not.default", is_nan)?;
    let n = reduce(
        em,
        "aten.sum.dim_IntList",
        ok,
        &dims,
        keepdim,
        vec![("dtype", Argument::ScalarType(dtype))],
        dtype,
        None,
    )?;
    Ok(vec![binary(
        em,
        "aten.div.Tensor",
        s,
        n,
        dtype,
        Some(a.out(0)?),
    )?])
}

fn empty_of(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    // The values are unspecified, so a permuted physical layout is a
    // plain empty tensor of the same logical sizes.
    let sizes = if matches!(a.0.target.name.as_str(), "new_empty" | "empty_permuted") {
        a.syms("size")?
    } else {
        em.size_refs(a.t("self")?)?
    };
    let dtype = em.dtype(out)?;
    em.op_into(
        "aten.empty.memory_format",
        vec![
            ("size", sym_ints_arg(&sizes)),
            ("dtype", Argument::ScalarType(dtype)),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn numpy_t(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let perm: Vec<usize> = (0..em.rank(x)?).rev().collect();
    Ok(vec![permute(em, x, &perm, Some(a.out(0)?))?])
}

fn one_hot(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let n = a.int("num_classes")?;
    if n < 0 {
        return Err(Error::unsupported(format!(
            "node {}: one_hot without num_classes depends on the data (pass num_classes)",
            a.0.name
        )));
    }
    let r = em.rank(x)?;
    let col = unsqueeze(em, x, r)?;
    let classes = arange_col(em, x, n, false)?;
    let eq = binary(em, "aten.eq.Tensor", col, classes, Dtype::Bool, None)?;
    Ok(vec![to_copy(em, eq, Dtype::Int64, Some(a.out(0)?))?])
}

fn rms_norm(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("input")?;
    let dtype = em.dtype(x)?;
    let n = a.syms("normalized_shape")?.len();
    let r = em.rank(x)?;
    let dims: Vec<i64> = (r - n..r).map(|d| d as i64).collect();
    let eps = match a.opt_float("eps")? {
        Some(e) => e,
        // torch.finfo(dtype).eps
        None => match dtype {
            Dtype::Float64 => f64::EPSILON,
            Dtype::Float16 => 0.0009765625,
            Dtype::BFloat16 => 0.0078125,
            _ => f32::EPSILON as f64,
        },
    };
    let sq = binary(em, "aten.mul.Tensor", x, x, dtype, None)?;
    let ms = reduce(em, "aten.mean.dim", sq, &dims, true, vec![], dtype, None)?;
    let me = with_scalar(em, "aten.add.Tensor", ms, Argument::Float(eps))?;
    let rs = unary(em, "aten.rsqrt.default", me)?;
    let out = a.out(0)?;
    match a.ot("weight")? {
        Some(w) => {
            let y = binary(em, "aten.mul.Tensor", x, rs, dtype, None)?;
            Ok(vec![binary(em, "aten.mul.Tensor", y, w, dtype, Some(out))?])
        }
        None => Ok(vec![binary(
            em,
            "aten.mul.Tensor",
            x,
            rs,
            dtype,
            Some(out),
        )?]),
    }
}

fn rot90(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let r = em.rank(x)?;
    let dims = a.ints("dims")?;
    let (d0, d1) = (norm_dim(dims[0], r)?, norm_dim(dims[1], r)?);
    let k = a.int("k")?.rem_euclid(4);
    let out = a.out(0)?;
    let flip = |em: &mut Emitter, x: ValueId, ds: &[usize]| -> Result<ValueId> {
        let ds: Vec<i64> = ds.iter().map(|&d| d as i64).collect();
        same(
            em,
            "aten.flip.default",
            vec![("self", Argument::Tensor(x)), ("dims", ints_arg(&ds))],
            x,
            None,
        )
    };
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(d0, d1);
    let y = match k {
        0 => return Ok(vec![clone(em, x, Some(out))?]),
        1 => {
            let f = flip(em, x, &[d1])?;
            permute(em, f, &perm, None)?
        }
        2 => flip(em, x, &[d0, d1])?,
        _ => {
            let f = flip(em, x, &[d0])?;
            permute(em, f, &perm, None)?
        }
    };
    Ok(vec![clone(em, y, Some(out))?])
}

fn rrelu(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    if a.bool("training")? {
        return Err(Error::unsupported(format!(
            "node {}: rrelu in training mode is random",
            a.0.name
        )));
    }
    let slope = (a.float("lower")? + a.float("upper")?) / 2.0;
    em.op_into(
        "aten.leaky_relu.default",
        vec![
            ("self", Argument::Tensor(a.t("self")?)),
            ("negative_slope", Argument::Float(slope)),
        ],
        a.out(0)?,
    )?;
    // rrelu_with_noise_functional also returns the noise, untouched in eval.
    let mut outs = vec![a.out(0)?];
    if a.0.target.name == "rrelu_with_noise_functional" {
        outs.push(a.t("noise")?);
    }
    Ok(outs)
}

fn rsub_tensor(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    em.op_into(
        "aten.sub.Tensor",
        vec![
            ("self", Argument::Tensor(a.t("other")?)),
            ("other", Argument::Tensor(a.t("self")?)),
            ("alpha", a.arg("alpha")),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn sinc(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(a.out(0)?)?;
    let px = with_scalar(
        em,
        "aten.mul.Tensor",
        x,
        Argument::Float(std::f64::consts::PI),
    )?;
    let s = unary(em, "aten.sin.default", px)?;
    let q = binary(em, "aten.div.Tensor", s, px, dtype, None)?;
    let zero = cmp(em, "aten.eq.Scalar", x, Argument::Float(0.0))?;
    let one = scalar_tensor(em, x, scalar(1.0, dtype), dtype)?;
    Ok(vec![where_(em, zero, one, q, Some(a.out(0)?))?])
}

fn tile(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let mut reps = a.syms("dims")?;
    let r = em.rank(x)?;
    while reps.len() < r {
        reps.insert(0, SymRef::Int(1));
    }
    em.op_into(
        "aten.repeat.default",
        vec![
            ("self", Argument::Tensor(x)),
            ("repeats", sym_ints_arg(&reps)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn trace(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let s = em.static_sizes(x, "trace")?;
    let n = s[0].min(s[1]);
    let dtype = em.dtype(a.out(0)?)?;
    let meta = em.meta_like(x, em.dtype(x)?, vec![Sym::Int(n)])?;
    let d = em.op(
        "aten.diag.default",
        vec![("self", Argument::Tensor(x))],
        meta,
    )?;
    Ok(vec![reduce(
        em,
        "aten.sum.dim_IntList",
        d,
        &[0],
        false,
        vec![],
        dtype,
        Some(a.out(0)?),
    )?])
}

/// Nearest 1-D upsampling as a gather: source index floor(i * in / out).
fn upsample_nearest1d(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("input")?;
    let out = a.out(0)?;
    let last = |v: Vec<i64>| {
        v.last()
            .copied()
            .ok_or_else(|| Error::bad_input("upsample_nearest1d of a 0-d tensor"))
    };
    let n_in = last(em.static_sizes(x, "upsample_nearest1d")?)?;
    let n_out = last(em.static_sizes(out, "upsample_nearest1d")?)?;
    let scale = match a.0.arg("scale_factors") {
        Some(Argument::Floats(f)) if !f.is_empty() => 1.0 / f[0],
        _ => n_in as f64 / n_out as f64,
    };
    let i = arange_col(em, x, n_out, false)?;
    let f = to_copy(em, i, Dtype::Float32, None)?;
    let f = with_scalar(em, "aten.mul.Tensor", f, Argument::Float(scale))?;
    let idx = to_copy(em, f, Dtype::Int64, None)?;
    let idx = same(
        em,
        "aten.clamp.default",
        vec![
            ("self", Argument::Tensor(idx)),
            ("max", Argument::Int(n_in - 1)),
        ],
        idx,
        None,
    )?;
    let r = em.rank(x)?;
    let mut indices: Vec<Option<ValueId>> = vec![None; r - 1];
    indices.push(Some(idx));
    em.op_into(
        "aten.index.Tensor",
        vec![
            ("self", Argument::Tensor(x)),
            ("indices", Argument::OptionalTensors(indices)),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn xlogy(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    // where(isnan(y), nan, where(x == 0, 0, x * log(y)))
    let dtype = em.dtype(a.out(0)?)?;
    let out = a.out(0)?;
    let side = |em: &mut Emitter, name: &str| -> Result<ValueId> {
        match a.0.arg(name) {
            Some(Argument::Tensor(v)) => Ok(*v),
            _ => scalar_tensor(em, out, a.arg(name), dtype),
        }
    };
    let (x, y) = (side(em, "self")?, side(em, "other")?);
    let ly = unary(em, "aten.log.default", y)?;
    let p = binary(em, "aten.mul.Tensor", x, ly, dtype, None)?;
    let z = cmp(em, "aten.eq.Scalar", x, Argument::Float(0.0))?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    let r = where_(em, z, zero, p, None)?;
    let sizes = em.sizes(y)?;
    let meta = em.meta_like(y, Dtype::Bool, sizes)?;
    let nan = em.op(
        "aten.isnan.default",
        vec![("self", Argument::Tensor(y))],
        meta,
    )?;
    let nanv = scalar_tensor(em, x, Argument::Float(f64::NAN), dtype)?;
    Ok(vec![where_(em, nan, nanv, r, Some(a.out(0)?))?])
}

/// `op_copy(...)`: the view `op(...)`, then a copy of each result.
fn copy_variant(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let t = &a.0.target;
    let base = crate::ir::Target::op(&t.namespace, t.name.trim_end_matches("_copy"), &t.overload);
    let args = super::edit::args_for(a.0, &base)?;
    let outs = a.outs();
    let metas: Vec<Out> = outs
        .iter()
        .map(|o| em.meta(*o).cloned().map(Out::New))
        .collect::<Result<_>>()?;
    let views = em.call(&base.to_string(), super::edit::borrow_args(&args), metas)?;
    views
        .iter()
        .zip(&outs)
        .map(|(v, o)| clone(em, *v, Some(*o)))
        .collect()
}

/// `x.unfold(dim, size, step)`: windows gathered with an index of
/// `step * i + j`, the window dim moved last.
fn unfold(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let r = em.rank(x)?.max(1);
    let d = norm_dim(a.int("dimension")?, r)?;
    let (size, step) = (a.int("size")?, a.int("step")?);
    let n_in = em.static_sizes(x, "unfold")?.get(d).copied().unwrap_or(1);
    let n = (n_in - size) / step + 1;
    let starts = arange_col(em, x, n, true)?;
    let starts = with_scalar(em, "aten.mul.Tensor", starts, Argument::Int(step))?;
    let offs = arange_col(em, x, size, false)?;
    let idx = binary(em, "aten.add.Tensor", starts, offs, Dtype::Int64, None)?;
    let mut indices: Vec<Option<ValueId>> = vec![None; d];
    indices.push(Some(idx));
    let mut sizes = em.sizes(x)?;
    sizes.splice(d..d + 1, [Sym::Int(n), Sym::Int(size)]);
    let meta = em.meta_like(x, em.dtype(x)?, sizes)?;
    let g = em.op(
        "aten.index.Tensor",
        vec![
            ("self", Argument::Tensor(x)),
            ("indices", Argument::OptionalTensors(indices)),
        ],
        meta,
    )?;
    let mut perm: Vec<usize> = (0..=r).filter(|&i| i != d + 1).collect();
    perm.push(d + 1);
    Ok(vec![permute(em, g, &perm, Some(a.out(0)?))?])
}

fn take(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let total = em.static_sizes(x, "take")?.iter().product::<i64>();
    let flat = reshape(em, x, &[SymRef::Int(total)], None)?;
    em.op_into(
        "aten.index.Tensor",
        vec![
            ("self", Argument::Tensor(flat)),
            (
                "indices",
                Argument::OptionalTensors(vec![Some(a.t("index")?)]),
            ),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn take_along_dim(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, idx) = (a.t("self")?, a.t("indices")?);
    let out = a.out(0)?;
    let Some(dim) = a.opt_int("dim")? else {
        let total = em
            .static_sizes(x, "take_along_dim")?
            .iter()
            .product::<i64>();
        let flat = reshape(em, x, &[SymRef::Int(total)], None)?;
        let n = em
            .static_sizes(idx, "take_along_dim")?
            .iter()
            .product::<i64>();
        let fi = reshape(em, idx, &[SymRef::Int(n)], None)?;
        em.op_into(
            "aten.gather.default",
            vec![
                ("self", Argument::Tensor(flat)),
                ("dim", Argument::Int(0)),
                ("index", Argument::Tensor(fi)),
            ],
            out,
        )?;
        return Ok(vec![out]);
    };
    let r = em.rank(x)?;
    let d = norm_dim(dim, r)?;
    let (xs, is) = (
        em.static_sizes(x, "take_along_dim")?,
        em.static_sizes(idx, "take_along_dim")?,
    );
    let b: Vec<i64> = xs.iter().zip(&is).map(|(p, q)| *p.max(q)).collect();
    let mut want_x = b.clone();
    want_x[d] = xs[d];
    let mut want_i = b;
    want_i[d] = is[d];
    let x = if want_x != xs {
        expand(
            em,
            x,
            &want_x.iter().map(|v| SymRef::Int(*v)).collect::<Vec<_>>(),
        )?
    } else {
        x
    };
    let idx = if want_i != is {
        expand(
            em,
            idx,
            &want_i.iter().map(|v| SymRef::Int(*v)).collect::<Vec<_>>(),
        )?
    } else {
        idx
    };
    em.op_into(
        "aten.gather.default",
        vec![
            ("self", Argument::Tensor(x)),
            ("dim", Argument::Int(d as i64)),
            ("index", Argument::Tensor(idx)),
        ],
        out,
    )?;
    Ok(vec![out])
}

/// argsort (the indices of a sort) and msort (values along dim 0).
fn sort_like(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let out = a.out(0)?;
    let sizes = em.sizes(x)?;
    let vmeta = em.meta_like(x, em.dtype(x)?, sizes.clone())?;
    let imeta = em.meta_like(x, Dtype::Int64, sizes)?;
    let (dim, desc) = if a.0.target.name == "msort" {
        (0, false)
    } else {
        (a.int("dim")?, a.bool("descending")?)
    };
    let args = vec![
        ("self", Argument::Tensor(x)),
        ("dim", Argument::Int(dim)),
        ("descending", Argument::Bool(desc)),
    ];
    if a.0.target.name == "msort" {
        em.call(
            "aten.sort.default",
            args,
            vec![Out::Into(out), Out::New(imeta)],
        )?;
    } else {
        em.call(
            "aten.sort.default",
            args,
            vec![Out::New(vmeta), Out::Into(out)],
        )?;
    }
    Ok(vec![out])
}

fn aminmax(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dims = a.opt_int("dim")?.map(|d| vec![d]).unwrap_or_default();
    let keep = a.bool("keepdim")?;
    let dtype = em.dtype(x)?;
    let lo = reduce(
        em,
        "aten.amin.default",
        x,
        &dims,
        keep,
        vec![],
        dtype,
        Some(a.out(0)?),
    )?;
    let hi = reduce(
        em,
        "aten.amax.default",
        x,
        &dims,
        keep,
        vec![],
        dtype,
        Some(a.out(1)?),
    )?;
    Ok(vec![lo, hi])
}

fn block_diag(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let xs = a.ts("tensors")?;
    let mut shapes = Vec::new();
    for x in &xs {
        let s = em.static_sizes(*x, "block_diag")?;
        shapes.push(match s.len() {
            0 => (1, 1),
            1 => (1, s[0]),
            _ => (s[0], s[1]),
        });
    }
    let total: i64 = shapes.iter().map(|s| s.1).sum();
    let mut rows = Vec::new();
    let mut left = 0;
    for (x, (r, c)) in xs.iter().zip(&shapes) {
        let x2 = reshape(em, *x, &[SymRef::Int(*r), SymRef::Int(*c)], None)?;
        let meta = em.meta_like(
            x2,
            em.dtype(a.out(0)?)?,
            vec![Sym::Int(*r), Sym::Int(total)],
        )?;
        rows.push(em.op(
            "aten.constant_pad_nd.default",
            vec![
                ("self", Argument::Tensor(x2)),
                ("pad", ints_arg(&[left, total - left - c])),
            ],
            meta,
        )?);
        left += c;
    }
    em.op_into(
        "aten.cat.default",
        vec![
            ("tensors", Argument::Tensors(rows)),
            ("dim", Argument::Int(0)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn chain_matmul(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let ms = a.ts("matrices")?;
    let out = a.out(0)?;
    let mut acc = ms[0];
    for (i, m) in ms.iter().enumerate().skip(1) {
        acc = mm(
            em,
            acc,
            *m,
            None,
            if i + 1 == ms.len() { Some(out) } else { None },
        )?;
    }
    Ok(vec![acc])
}

/// column_stack (1-D and 0-D become columns, then cat on dim 1) and dstack
/// (each made at least 3-D, then cat on dim 2).
fn column_stack(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let col = a.0.target.name == "column_stack";
    let mut parts = Vec::new();
    for x in a.ts("tensors")? {
        let s = em.static_sizes(x, "column_stack/dstack")?;
        let shape: Option<Vec<i64>> = match (col, s.len()) {
            (true, 0) => Some(vec![1, 1]),
            (true, 1) => Some(vec![s[0], 1]),
            (false, 0) => Some(vec![1, 1, 1]),
            (false, 1) => Some(vec![1, s[0], 1]),
            (false, 2) => Some(vec![s[0], s[1], 1]),
            _ => None,
        };
        parts.push(match shape {
            Some(sh) => reshape(
                em,
                x,
                &sh.into_iter().map(SymRef::Int).collect::<Vec<_>>(),
                None,
            )?,
            None => x,
        });
    }
    let dim = if col { 1 } else { 2 };
    em.op_into(
        "aten.cat.default",
        vec![
            ("tensors", Argument::Tensors(parts)),
            ("dim", Argument::Int(dim)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn diag_embed(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let (d1, d2) = (a.int("dim1")?, a.int("dim2")?);
    if (d1, d2) != (-2, -1) {
        return Err(Error::unsupported(format!(
            "node {}: diag_embed into dims other than the last two",
            a.0.name
        )));
    }
    let k = a.int("offset")?;
    let n = em
        .static_sizes(x, "diag_embed")?
        .last()
        .copied()
        .ok_or_else(|| Error::bad_input("diag_embed of a 0-d tensor"))?;
    let m = n + k.abs();
    let dtype = em.dtype(x)?;
    let rows = arange_col(em, x, m, true)?;
    let cols = arange_col(em, x, m, false)?;
    let diff = binary(em, "aten.sub.Tensor", cols, rows, Dtype::Int64, None)?;
    let on = cmp(em, "aten.eq.Scalar", diff, Argument::Int(k))?;
    // Values padded to m, laid along rows (k >= 0: row i holds x[i]) or
    // columns (k < 0: column j holds x[j]).
    let r = em.rank(x)?;
    let mut sizes = em.sizes(x)?;
    sizes[r - 1] = Sym::Int(m);
    let meta = em.meta_like(x, dtype, sizes)?;
    let padded = em.op(
        "aten.constant_pad_nd.default",
        vec![
            ("self", Argument::Tensor(x)),
            ("pad", ints_arg(&[0, k.abs()])),
        ],
        meta,
    )?;
    let vals = if k >= 0 {
        unsqueeze(em, padded, r)?
    } else {
        unsqueeze(em, padded, r - 1)?
    };
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    Ok(vec![where_(em, on, vals, zero, Some(a.out(0)?))?])
}

fn fill_tensor(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, v) = (a.t("self")?, a.t("value")?);
    let dtype = em.dtype(x)?;
    let v = if em.dtype(v)? != dtype {
        to_copy(em, v, dtype, None)?
    } else {
        v
    };
    let sizes = em.size_refs(x)?;
    let e = expand(em, v, &sizes)?;
    Ok(vec![clone(em, e, Some(a.out(0)?))?])
}

fn float_power(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let as64 = |em: &mut Emitter, name: &str| -> Result<Argument> {
        Ok(match a.0.arg(name) {
            Some(Argument::Tensor(v)) if em.dtype(*v)? != Dtype::Float64 => {
                Argument::Tensor(to_copy(em, *v, Dtype::Float64, None)?)
            }
            Some(Argument::Tensor(v)) => Argument::Tensor(*v),
            _ => Argument::Float(a.float(name)?),
        })
    };
    let (base, exp) = (as64(em, "self")?, as64(em, "exponent")?);
    let op = format!("aten.pow.{}", a.0.target.overload);
    em.op_into(&op, vec![("self", base), ("exponent", exp)], out)?;
    Ok(vec![out])
}

fn heaviside(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, v) = (a.t("self")?, a.t("values")?);
    let dtype = em.dtype(a.out(0)?)?;
    let zero = cmp(em, "aten.eq.Scalar", x, Argument::Int(0))?;
    let pos = cmp(em, "aten.gt.Scalar", x, Argument::Int(0))?;
    let step = to_copy(em, pos, dtype, None)?;
    Ok(vec![where_(em, zero, v, step, Some(a.out(0)?))?])
}

fn inner(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, y) = (a.t("self")?, a.t("other")?);
    let out = a.out(0)?;
    let (rx, ry) = (em.rank(x)?, em.rank(y)?);
    if rx == 0 || ry == 0 {
        let dtype = em.dtype(out)?;
        return Ok(vec![binary(em, "aten.mul.Tensor", x, y, dtype, Some(out))?]);
    }
    // inner(x, y) = x @ y^T with y flattened to [-1, K]
    let ys = em.static_sizes(y, "inner")?;
    let k = ys[ry - 1];
    let rows: i64 = ys[..ry - 1].iter().product();
    let y2 = reshape(em, y, &[SymRef::Int(rows), SymRef::Int(k)], None)?;
    let yt = permute(em, y2, &[1, 0], None)?;
    let p = matmul(em, x, yt, None)?;
    let shape = em.size_refs(out)?;
    Ok(vec![view(em, p, &shape, Some(out))?])
}

fn tensordot(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, y) = (a.t("self")?, a.t("other")?);
    let (dx, dy) = (a.ints("dims_self")?, a.ints("dims_other")?);
    let (xs, ys) = (
        em.static_sizes(x, "tensordot")?,
        em.static_sizes(y, "tensordot")?,
    );
    let cx: Vec<usize> = dx
        .iter()
        .map(|d| norm_dim(*d, xs.len()))
        .collect::<Result<_>>()?;
    let cy: Vec<usize> = dy
        .iter()
        .map(|d| norm_dim(*d, ys.len()))
        .collect::<Result<_>>()?;
    let fx: Vec<usize> = (0..xs.len()).filter(|d| !cx.contains(d)).collect();
    let fy: Vec<usize> = (0..ys.len()).filter(|d| !cy.contains(d)).collect();
    let k: i64 = cx.iter().map(|&d| xs[d]).product();
    let m: i64 = fx.iter().map(|&d| xs[d]).product();
    let n: i64 = fy.iter().map(|&d| ys[d]).product();
    let xp = permute(
        em,
        x,
        &fx.iter().chain(&cx).copied().collect::<Vec<_>>(),
        None,
    )?;
    let x2 = reshape(em, xp, &[SymRef::Int(m), SymRef::Int(k)], None)?;
    let yp = permute(
        em,
        y,
        &cy.iter().chain(&fy).copied().collect::<Vec<_>>(),
        None,
    )?;
    let y2 = reshape(em, yp, &[SymRef::Int(k), SymRef::Int(n)], None)?;
    let p = mm(em, x2, y2, None, None)?;
    let shape: Vec<SymRef> = fx
        .iter()
        .map(|&d| xs[d])
        .chain(fy.iter().map(|&d| ys[d]))
        .map(SymRef::Int)
        .collect();
    Ok(vec![view(em, p, &shape, Some(a.out(0)?))?])
}

fn isclose(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, y) = (a.t("self")?, a.t("other")?);
    let dtype = em.dtype(x)?;
    let d = binary(em, "aten.sub.Tensor", x, y, dtype, None)?;
    let ad = unary(em, "aten.abs.default", d)?;
    let ay = unary(em, "aten.abs.default", y)?;
    let tol = with_scalar(em, "aten.mul.Tensor", ay, Argument::Float(a.float("rtol")?))?;
    let tol = with_scalar(
        em,
        "aten.add.Tensor",
        tol,
        Argument::Float(a.float("atol")?),
    )?;
    let close = binary(em, "aten.le.Tensor", ad, tol, Dtype::Bool, None)?;
    let eq = binary(em, "aten.eq.Tensor", x, y, Dtype::Bool, None)?;
    let out = a.out(0)?;
    if !a.bool("equal_nan")? {
        return Ok(vec![binary(
            em,
            "aten.logical_or.default",
            eq,
            close,
            Dtype::Bool,
            Some(out),
        )?]);
    }
    let r = binary(em, "aten.logical_or.default", eq, close, Dtype::Bool, None)?;
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, Dtype::Bool, sizes)?;
    let nx = em.op(
        "aten.isnan.default",
        vec![("self", Argument::Tensor(x))],
        meta.clone(),
    )?;
    let ny = em.op(
        "aten.isnan.default",
        vec![("self", Argument::Tensor(y))],
        meta,
    )?;
    let both = binary(em, "aten.logical_and.default", nx, ny, Dtype::Bool, None)?;
    Ok(vec![binary(
        em,
        "aten.logical_or.default",
        r,
        both,
        Dtype::Bool,
        Some(out),
    )?])
}

fn kron(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, y) = (a.t("self")?, a.t("other")?);
    let (xs, ys) = (em.static_sizes(x, "kron")?, em.static_sizes(y, "kron")?);
    if xs.len() != ys.len() {
        return Err(Error::unsupported(format!(
            "node {}: kron of tensors of different ranks",
            a.0.name
        )));
    }
    let r = xs.len();
    // x[i0, 1, i1, 1, ...] * y[1, j0, 1, j1, ...], then merge each pair.
    let mut xv = Vec::new();
    let mut yv = Vec::new();
    for d in 0..r {
        xv.extend([xs[d], 1]);
        yv.extend([1, ys[d]]);
    }
    let x2 = reshape(
        em,
        x,
        &xv.iter().map(|v| SymRef::Int(*v)).collect::<Vec<_>>(),
        None,
    )?;
    let y2 = reshape(
        em,
        y,
        &yv.iter().map(|v| SymRef::Int(*v)).collect::<Vec<_>>(),
        None,
    )?;
    let dtype = em.dtype(a.out(0)?)?;
    let p = binary(em, "aten.mul.Tensor", x2, y2, dtype, None)?;
    let shape: Vec<SymRef> = (0..r).map(|d| SymRef::Int(xs[d] * ys[d])).collect();
    Ok(vec![reshape(em, p, &shape, Some(a.out(0)?))?])
}

fn cross(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, y) = (a.t("self")?, a.t("other")?);
    let out = a.out(0)?;
    let r = em.rank(out)?;
    let d = norm_dim(a.int("dim")?, r)?;
    let dtype = em.dtype(out)?;
    let part = |em: &mut Emitter, t: ValueId, i: i64| -> Result<ValueId> {
        let dt = d - (r - em.rank(t)?).min(d);
        slice(em, t, dt, i, i + 1)
    };
    let mut comps = Vec::new();
    for (i, j) in [(1, 2), (2, 0), (0, 1)] {
        let (xi, yj, xj, yi) = (
            part(em, x, i)?,
            part(em, y, j)?,
            part(em, x, j)?,
            part(em, y, i)?,
        );
        let p = binary(em, "aten.mul.Tensor", xi, yj, dtype, None)?;
        let q = binary(em, "aten.mul.Tensor", xj, yi, dtype, None)?;
        comps.push(binary(em, "aten.sub.Tensor", p, q, dtype, None)?);
    }
    em.op_into(
        "aten.cat.default",
        vec![
            ("tensors", Argument::Tensors(comps)),
            ("dim", Argument::Int(d as i64)),
        ],
        out,
    )?;
    Ok(vec![out])
}

/// torch's linspace: the first half counted up from start, the second
/// down from end, so both ends are exact.
fn linspace(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let (start, end, steps) = (a.float("start")?, a.float("end")?, a.int("steps")?);
    let dtype = em.dtype(out)?;
    let step = if steps > 1 {
        (end - start) / (steps - 1) as f64
    } else {
        0.0
    };
    let i = arange_col(em, out, steps, false)?;
    let fi = to_copy(em, i, Dtype::Float64, None)?;
    let up = with_scalar(em, "aten.mul.Tensor", fi, Argument::Float(step))?;
    let up = with_scalar(em, "aten.add.Tensor", up, Argument::Float(start))?;
    let back = with_scalar(
        em,
        "aten.sub.Tensor",
        fi,
        Argument::Float((steps - 1) as f64),
    )?;
    let down = with_scalar(em, "aten.mul.Tensor", back, Argument::Float(step))?;
    let down = with_scalar(em, "aten.add.Tensor", down, Argument::Float(end))?;
    let first = cmp(em, "aten.lt.Scalar", i, Argument::Int(steps / 2))?;
    let v = where_(em, first, up, down, None)?;
    Ok(vec![to_copy(em, v, dtype, Some(out))?])
}

fn meshgrid(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let xs = a.ts("tensors")?;
    let xy = a.0.target.overload == "indexing" && a.string("indexing")? == "xy";
    let outs = a.outs();
    let n = xs.len();
    let mut result = Vec::new();
    for (i, (x, o)) in xs.iter().zip(&outs).enumerate() {
        // With 'xy', the first two dims swap roles.
        let pos = if xy && n >= 2 && i < 2 { 1 - i } else { i };
        let mut shape = vec![SymRef::Int(1); n];
        shape[pos] = em.size(*x, 0)?;
        let v = view(em, *x, &shape, None)?;
        let full = em.size_refs(*o)?;
        em.op_into(
            "aten.expand.default",
            vec![("self", Argument::Tensor(v)), ("size", sym_ints_arg(&full))],
            *o,
        )?;
        result.push(*o);
    }
    Ok(result)
}

fn pairwise_distance(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    let (x, y) = (a.t("x1")?, a.t("x2")?);
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let d = binary(em, "aten.sub.Tensor", x, y, dtype, None)?;
    let d = with_scalar(em, "aten.add.Tensor", d, Argument::Float(a.float("eps")?))?;
    em.op_into(
        "aten.linalg_vector_norm.default",
        vec![
            ("self", Argument::Tensor(d)),
            ("ord", Argument::Float(a.float("p")?)),
            ("dim", Argument::Ints(vec![-1])),
            ("keepdim", Argument::Bool(a.bool("keepdim")?)),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn exp2(em: &mut Emitter, a: &A) -> Result<Vec<ValueId>> {
    em.op_into(
        "aten.pow.Scalar",
        vec![
            ("self", Argument::Float(2.0)),
            ("exponent", Argument::Tensor(a.t("self")?)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}
