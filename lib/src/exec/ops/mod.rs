//! Op implementations, registered once by op identity in the rows of
//! their family's file (`pointwise.rs`, `conv/`, ...; the families of
//! `lib/data/op_families.txt`), joined in [`FAMILIES`].
//! Each reads its arguments by schema name through [`Ctx`] and returns one
//! value per node output. Where candle is narrower than ATen (per-dim
//! padding, pooling padding and ceil_mode, attention, bool and int8), the
//! gap is closed here with PyTorch's semantics.

use super::{storage_dtype, Ctx, EpilogueArgs, Executor, Tensor, Value};
use crate::error::{Error, Result};
use crate::ir::op::aten;
use crate::ir::{normalize_dim, Argument, Dtype, Subgraph, Sym, ValueKind};
use crate::kernels::lowp;
use crate::kernels::{sgemm, vmath};
use crate::promote::{result_type, Rank};
use candle_core::{DType, Tensor as CandleTensor};
use std::collections::HashMap;
use std::sync::OnceLock;

mod dft;
mod exact;
mod int8;
use crate::kernels::window::*;
use exact::*;
pub(crate) use exact::{elems, from_elems, Elems, Num};

macro_rules! unary_ops {
    ($($name:ident => $f:expr;)*) => { $( pub(super) fn $name(ctx: &mut Ctx) -> OpResult { unary_float(ctx, $f) } )* };
}

/// Unary float ops with a vectorised float32 form ([`vmath`]) for CPU
/// tensors, candle's kernel otherwise.
macro_rules! vm_unary_ops {
    ($($name:ident => $v:expr, $f:expr;)*) => { $( pub(super) fn $name(ctx: &mut Ctx) -> OpResult { unary_vm(ctx, $v, $f) } )* };
}

pub type OpFn = fn(&mut Ctx) -> Result<Vec<Value>>;

op_families!(&[(&str, OpFn)]);
pub(crate) use conv::{depthwise_by_blocks, prepack_conv_weight, takes_blocked, winograd_weights};

type OpResult = Result<Vec<Value>>;

/// A `size` argument as dims: torch refuses a negative one.
fn sizes_of(size: &[i64]) -> Result<Vec<usize>> {
    size.iter()
        .enumerate()
        .map(|(i, &s)| {
            usize::try_from(s).map_err(|_| {
                Error::bad_input(format!(
                    "size[{i}] is {s}: a tensor cannot have a negative dimension"
                ))
            })
        })
        .collect()
}

fn one(t: Tensor) -> OpResult {
    Ok(vec![Value::Tensor(t)])
}

fn unsupported(what: impl Into<String>) -> Error {
    Error::unsupported(what.into())
}

/// A 0-d tensor of `dtype` holding `v` (an int exactly, wrapped to the
/// dtype's width).
fn scalar_tensor(v: Num, dtype: Dtype, dev: &candle_core::Device) -> Result<Tensor> {
    from_elems(Elems::filled(1, v, dtype), &[], dtype, dev)
}

fn unary_float(
    ctx: &mut Ctx,
    f: fn(&CandleTensor) -> candle_core::Result<CandleTensor>,
) -> OpResult {
    let x = ctx.tensor("self")?;
    let x = if x.dtype.is_floating() {
        x
    } else {
        x.cast(Dtype::Float32)?
    };
    one(Tensor::new(f(&x.t)?, x.dtype))
}

/// `v` over a float32 CPU tensor by [`vmath`]'s vectorised loops, else
/// candle's `f` (as [`unary_float`]).
fn unary_vm(
    ctx: &mut Ctx,
    v: impl Fn(f32) -> f32 + Copy + Send + Sync,
    f: fn(&CandleTensor) -> candle_core::Result<CandleTensor>,
) -> OpResult {
    let x = ctx.tensor("self")?;
    match vmap(&x, v)? {
        Some(y) => one(y),
        None => unary_float(ctx, f),
    }
}

/// `v` over the elements of a float32 CPU tensor (any layout), by
/// [`vmath::map`]; `None` for other dtypes and devices.
fn vmap(x: &Tensor, v: impl Fn(f32) -> f32 + Copy + Send + Sync) -> Result<Option<Tensor>> {
    if x.dtype != Dtype::Float32 {
        return Ok(None);
    }
    if let Some(y) = map_in_storage_order(x, v)? {
        return Ok(Some(y));
    }
    match with_host::<f32, _>(&x.t, |xs| vmath::map(xs, v)) {
        Some(out) => Ok(Some(Tensor::new(host_f32_tensor(out, x.dims())?, x.dtype))),
        None => Ok(None),
    }
}

/// Where a layout is a permutation of a dense block (a transposed or
/// permuted view, as attention's heads are): the dims in storage order
/// (outermost first) and the block's start. `None` for a contiguous
/// layout (nothing to gain), a broadcast or a gapped one.
fn dense_order(layout: &candle_core::Layout) -> Option<(Vec<usize>, usize)> {
    if layout.is_contiguous() {
        return None;
    }
    let (dims, strides) = (layout.dims(), layout.stride());
    // dims of one element have any stride: last, in their own order
    let mut order: Vec<usize> = (0..dims.len()).collect();
    order.sort_by_key(|&i| (dims[i] == 1, std::cmp::Reverse(strides[i])));
    let mut want = 1;
    for &i in order.iter().rev() {
        if dims[i] != 1 {
            if strides[i] != want {
                return None;
            }
            want *= dims[i];
        }
    }
    Some((order, layout.start_offset()))
}

/// `v` over a float32 CPU tensor that is a permuted view of a dense block
/// ([`dense_order`]): the block mapped as it lies (one contiguous pass, no
/// gather), the result given the same permuted layout. A strided copy
/// first (candle's, element by element on a transposed view) cost more
/// than the op: ViT-B/16's scaling of q and k.
fn map_in_storage_order(
    x: &Tensor,
    v: impl Fn(f32) -> f32 + Copy + Send + Sync,
) -> Result<Option<Tensor>> {
    if !x.t.device().is_cpu() || x.t.dtype() != DType::F32 || x.t.elem_count() == 0 {
        return Ok(None);
    }
    let (storage, layout) = x.t.storage_and_layout();
    let Some((order, start)) = dense_order(layout) else {
        return Ok(None);
    };
    let candle_core::Storage::Cpu(cpu) = &*storage else {
        return Ok(None);
    };
    let Some(block) = cpu
        .as_slice::<f32>()
        .ok()
        .and_then(|all| all.get(start..start + x.t.elem_count()))
    else {
        return Ok(None);
    };
    let out = vmath::map(block, v);
    drop(storage);
    let dims = x.dims();
    let stored: Vec<usize> = order.iter().map(|&i| dims[i]).collect();
    // dim j of the result is dim `pos[j]` of the stored block
    let mut pos = vec![0; order.len()];
    for (p, &i) in order.iter().enumerate() {
        pos[i] = p;
    }
    let t = host_f32_tensor(out, &stored)?.permute(pos)?;
    Ok(Some(Tensor::new(t, Dtype::Float32)))
}

/// A unary op that keeps its dtype: candle's kernel `f` for floating
/// tensors, `int` on the host for integer ones (candle has no integer
/// kernels for most unary ops, and would abort).
fn same_dtype_unary(
    ctx: &mut Ctx,
    f: fn(&CandleTensor) -> candle_core::Result<CandleTensor>,
    int: fn(i64) -> i64,
) -> OpResult {
    let x = ctx.tensor("self")?;
    if x.dtype.is_floating() {
        return one(Tensor::new(f(&x.t)?, x.dtype));
    }
    let storage = x.t.dtype();
    let vals: Vec<i64> =
        x.t.to_dtype(DType::I64)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1())?;
    let out: Vec<i64> = vals.into_iter().map(int).collect();
    let t =
        CandleTensor::from_vec(out, x.dims(), x.t.device()).and_then(|t| t.to_dtype(storage))?;
    one(Tensor::new(t, x.dtype))
}

fn broadcast_shape(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(Error::bad_input(format!(
                    "shapes {shapes:?} do not broadcast"
                )));
            }
        }
    }
    Ok(out)
}

fn squeeze_dims(t: CandleTensor, dims: &[usize]) -> Result<CandleTensor> {
    let mut sorted = dims.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut t = t;
    for d in sorted.iter().rev() {
        t = t.squeeze(*d)?;
    }
    Ok(t)
}

fn softmax_impl(x: &Tensor, d: usize, log: bool) -> Result<Tensor> {
    let x = if x.dtype.is_floating() {
        x.clone()
    } else {
        x.cast(Dtype::Float32)?
    };
    if x.t.elem_count() == 0 {
        // nothing to normalise (candle's max refuses an empty tensor)
        return Ok(x);
    }
    let compute = if x.dtype == Dtype::Float64 {
        DType::F64
    } else {
        DType::F32
    };
    if compute == DType::F32 && d + 1 == x.rank() {
        // along the last dim on the CPU: rows by vmath
        let n = x.dims()[d];
        if let Some(out) = with_host::<f32, _>(&x.t, |xs| vmath::softmax_rows(xs, n, log)) {
            return Ok(Tensor::new(host_f32_tensor(out, x.dims())?, x.dtype));
        }
    }
    let t = x.t.to_dtype(compute)?;
    let max = t.max_keepdim(d)?;
    let shifted = t.broadcast_sub(&max)?;
    let e = shifted.exp()?;
    let s = e.sum_keepdim(d)?;
    let r = if log {
        shifted.broadcast_sub(&s.log()?)
    } else {
        e.broadcast_div(&s)
    }?;
    Ok(Tensor::new(r.to_dtype(storage_dtype(x.dtype)?)?, x.dtype))
}

fn full_of(ctx: &Ctx, shape: Vec<usize>, value: Num, dtype: Dtype) -> OpResult {
    // float32 and bools on the host: one fill of the final dtype
    if ctx.device().is_cpu() {
        let n: usize = shape.iter().product();
        let t = match dtype {
            Dtype::Float32 => Some(CandleTensor::from_vec(
                vec![value.as_f64() as f32; n],
                shape.clone(),
                ctx.device(),
            )),
            Dtype::Bool => Some(CandleTensor::from_vec(
                vec![(value.as_f64() != 0.0) as u8; n],
                shape.clone(),
                ctx.device(),
            )),
            _ => None,
        };
        if let Some(t) = t {
            return one(Tensor::new(t?, dtype));
        }
    }
    // one element made exactly (an int64 keeps its bits), then expanded
    let t = scalar_tensor(value, dtype, ctx.device())?
        .t
        .broadcast_as(shape)
        .and_then(|t| t.contiguous())?;
    one(Tensor::new(t, dtype))
}

fn matmul_t(ctx: &Ctx, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    matmul_onto(ctx, a, b, None, Num::Int(1))
}

/// `init + alpha * (a @ b)` (`init` addmm's scaled bias, where given):
/// integers and float64 on the host, exactly as torch
/// ([`exact::matmul_host`]; candle multiplies floats only, and through
/// float64 an int64 product loses bits), other floats by the product
/// kernels (scaled and the bias added after).
fn matmul_onto(
    ctx: &Ctx,
    a: &Tensor,
    b: &Tensor,
    init: Option<&Tensor>,
    alpha: Num,
) -> Result<Tensor> {
    let dt = result_type(&[(a.dtype, Rank::Dim), (b.dtype, Rank::Dim)]);
    if !dt.is_floating() || dt == Dtype::Float64 {
        // 1-D operands as torch's matmul takes them: a row, a column
        let (ad, bd) = (a.dims().to_vec(), b.dims().to_vec());
        let am = if ad.len() == 1 {
            vec![1, ad[0]]
        } else {
            ad.clone()
        };
        let bm = if bd.len() == 1 {
            vec![bd[0], 1]
        } else {
            bd.clone()
        };
        let (ea, eb) = (elems(&a.cast(dt)?)?, elems(&b.cast(dt)?)?);
        let init = init
            .map(|t| -> Result<(Elems, Vec<usize>)> {
                Ok((elems(&t.cast(dt)?)?, t.dims().to_vec()))
            })
            .transpose()?;
        let (out, mut shape) = matmul_host(
            &ea,
            &am,
            &eb,
            &bm,
            init.as_ref().map(|(e, d)| (e, d.as_slice())),
            alpha,
        )?;
        if bd.len() == 1 {
            shape.pop();
        }
        if ad.len() == 1 {
            shape.remove(shape.len() - if bd.len() == 1 { 1 } else { 2 });
        }
        return from_elems(out, &shape, dt, ctx.device());
    }
    let compute = dt;
    let (x, y) = (a.cast(compute)?.t, b.cast(compute)?.t);
    let t = match (x.rank(), y.rank()) {
        (1, 1) => x
            .unsqueeze(0)
            .map_err(Error::from)
            .and_then(|x| batched_matmul(ctx, &x, &y.unsqueeze(1)?))
            .and_then(|t| t.reshape(()).map_err(Error::from)),
        (1, _) => x
            .unsqueeze(0)
            .map_err(Error::from)
            .and_then(|x| batched_matmul(ctx, &x, &y))
            .and_then(|t| t.squeeze(t.rank() - 2).map_err(Error::from)),
        (_, 1) => y
            .unsqueeze(1)
            .map_err(Error::from)
            .and_then(|y| batched_matmul(ctx, &x, &y))
            .and_then(|t| t.squeeze(t.rank() - 1).map_err(Error::from)),
        _ => batched_matmul(ctx, &x, &y),
    }?;
    let t = if alpha.as_f64() != 1.0 {
        t.affine(alpha.as_f64(), 0.0)?
    } else {
        t
    };
    let t = match init {
        Some(i) => t.broadcast_add(&i.cast(compute)?.t)?,
        None => t,
    };
    Tensor::new(t, compute).cast(dt)
}

/// Runs `f` on a rank-2 float32 CPU tensor as the matrix kernel sees it:
/// its whole storage, with the offset and strides of its layout (no copy,
/// whatever the strides). `None` for other ranks, dtypes and devices.
fn with_matrix<R>(t: &CandleTensor, f: impl FnOnce(&sgemm::View) -> R) -> Option<R> {
    if t.rank() != 2 {
        return None;
    }
    with_first_matrix(t, f)
}

/// [`with_matrix`] of a float32 CPU tensor of rank 2 or more that is one
/// matrix at every batch index (batch dims of size 1 or stride 0; `None`
/// otherwise), read where it lies: a weight expanded over a batch is the
/// weight itself (candle's `get(0)` would copy a layout it cannot squeeze,
/// and the copy is never packed once).
fn with_first_matrix<R>(t: &CandleTensor, f: impl FnOnce(&sgemm::View) -> R) -> Option<R> {
    let r = t.rank();
    if r < 2 || t.dtype() != DType::F32 {
        return None;
    }
    let one_matrix = t.dims()[..r - 2]
        .iter()
        .zip(t.stride())
        .all(|(&d, &s)| d == 1 || s == 0);
    if !one_matrix {
        return None;
    }
    let (storage, layout) = t.storage_and_layout();
    let candle_core::Storage::Cpu(cpu) = &*storage else {
        return None;
    };
    let data = cpu.as_slice::<f32>().ok()?;
    let (dims, stride) = (layout.dims(), layout.stride());
    Some(f(&sgemm::View {
        data,
        off: layout.start_offset(),
        rows: dims[r - 2],
        cols: dims[r - 1],
        rs: stride[r - 2],
        cs: stride[r - 1],
    }))
}

/// `x [m, k] @ y [k, n]` (`+ bias`, a row of n broadcast down) in float32
/// by the packed kernel ([`sgemm`]), operands read where they lie, a weight
/// packed once. `None` where it does not apply (other dtypes or devices,
/// no AVX-512): the caller takes candle's path.
fn packed_matmul(
    ctx: &Ctx,
    x: &CandleTensor,
    y: &CandleTensor,
    bias: Option<&CandleTensor>,
    epilogue: Option<&EpilogueArgs>,
) -> Result<Option<CandleTensor>> {
    if !crate::kernels::cpu().vector {
        return Ok(None);
    }
    if x.rank() != 2 || x.dtype() != DType::F32 {
        return Ok(None);
    }
    // --precision bf16: a weight's product in bfloat16 (rounded once, kept)
    if ctx.exec.bf16_kernel().is_some() {
        if let Some(pb) = with_first_matrix(y, |v| ctx.exec.packed_b16(v)).flatten() {
            return linalg::bf16_matmul(ctx, x, &pb, bias, epilogue);
        }
    }
    // y: a matrix, or one expanded over batch dims (see batched_matmul)
    let Some(pb) = with_first_matrix(y, |v| ctx.exec.packed_b(v)) else {
        return Ok(None);
    };
    let (m, k, n) = (x.dims()[0], x.dims()[1], pb.n);
    if k != pb.k {
        return Err(Error::bad_input(format!(
            "matrix product of [{m}, {k}] and [{}, {n}]",
            pb.k
        )));
    }
    let row = match bias {
        Some(b) if b.dtype() == DType::F32 && b.elem_count() == n => {
            Some(b.flatten_all().and_then(|b| b.to_vec1::<f32>())?)
        }
        Some(_) => return Ok(None),
        None => None,
    };
    // written whole by the product (never accumulated on)
    let mut out = sgemm::uninit(m * n);
    let init = row.as_deref().map_or(sgemm::Init::Zero, sgemm::Init::Bias);
    let threads = rayon::current_num_threads();
    let len = out.len();
    let ran = with_product_epilogue(epilogue, len, |then| {
        with_lhs(x, |a| {
            sgemm::gemm_lhs(a, &pb, &mut out, n, init, then, threads)
        })
        .map(|()| then.is_some())
    });
    let Some(ran) = ran else {
        return Ok(None);
    };
    mark_applied(epilogue, ran);
    // SAFETY: the product wrote every element
    let out = unsafe { sgemm::assume_init(out) };
    CandleTensor::from_vec(out, (m, n), x.device())
        .map(Some)
        .map_err(Error::from)
}

/// An epilogue's kernel steps (made once, by the plan) and operands.
pub(super) type Registered<'a> = (std::borrow::Cow<'a, [sgemm::EpiStep]>, &'a [&'a [f32]]);

/// The fused epilogue ([`EpilogueArgs`]) as the kernels run it on each
/// block of the output they finish ([`sgemm::Epilogue`]): its steps and
/// operands, where it fits an output of `len` elements and each step is
/// one the kernels have.
pub(super) fn register_epilogue<'a>(
    e: Option<&'a EpilogueArgs<'a>>,
    len: usize,
) -> Option<Registered<'a>> {
    let e = e.filter(|e| e.fits(len))?;
    Some((e.group.register_steps(e.own)?, e.inputs))
}

/// [`register_epilogue`] for a matrix product's kernel, which also runs a
/// group that is no chain of steps: `f` with the kernel's epilogue (the
/// group evaluated on each finished block, [`fuse::Group::eval_span`],
/// where it has no steps), or `None`. The caller tells the executor
/// whether it ran ([`mark_applied`]).
pub(super) fn with_product_epilogue<R>(
    e: Option<&EpilogueArgs>,
    len: usize,
    f: impl FnOnce(Option<&sgemm::Epilogue>) -> R,
) -> R {
    let Some(e) = e.filter(|e| e.fits(len)) else {
        return f(None);
    };
    let (group, own, inputs) = (e.group, e.own, e.inputs);
    let general = move |at: usize, span: &mut [f32]| group.eval_span(own, inputs, at, span);
    let steps = e.group.register_steps(e.own);
    let then = sgemm::Epilogue {
        steps: steps.as_deref().unwrap_or(&[]),
        inputs: e.inputs,
        map: steps.is_none().then_some(&general as &sgemm::EpiMap),
    };
    f(Some(&then))
}

/// Tells the executor the epilogue ran (`ran`): the output is the group's.
pub(super) fn mark_applied(e: Option<&EpilogueArgs>, ran: bool) {
    if let (Some(e), true) = (e, ran) {
        e.applied.set(true);
    }
}

/// The epilogue ran with the output written over its dead residual
/// ([`EpilogueArgs::over`]): `r`, now the group's output.
pub(super) fn applied_over(e: &EpilogueArgs, r: &CandleTensor) -> CandleTensor {
    e.applied.set(true);
    e.overwrote.set(true);
    r.clone()
}

/// `f` on the elements of `t`, a contiguous float32 host tensor, to write
/// over them (a dead residual, [`EpilogueArgs::into`]): through candle's
/// in-place op, which holds the storage's write lock meanwhile.
pub(super) fn write_over(t: &CandleTensor, f: impl FnOnce(&mut [f32]) -> Result<()>) -> Result<()> {
    use std::cell::RefCell;
    struct Over<F>(RefCell<Option<F>>, RefCell<Option<Result<()>>>);
    impl<F: FnOnce(&mut [f32]) -> Result<()>> candle_core::InplaceOp1 for Over<F> {
        fn name(&self) -> &'static str {
            "write_over"
        }
        fn cpu_fwd(
            &self,
            storage: &mut candle_core::CpuStorage,
            layout: &candle_core::Layout,
        ) -> candle_core::Result<()> {
            let (candle_core::CpuStorage::F32(v), Some((a, z))) =
                (storage, layout.contiguous_offsets())
            else {
                candle_core::bail!("write_over: not a contiguous float32 tensor")
            };
            if let Some(f) = self.0.borrow_mut().take() {
                *self.1.borrow_mut() = Some(f(&mut v[a..z]));
            }
            Ok(())
        }
    }
    let op = Over(RefCell::new(Some(f)), RefCell::new(None));
    t.inplace_op1(&op)?;
    op.1.into_inner().unwrap_or_else(|| {
        Err(Error::internal(
            "write_over: the storage is not on the host",
        ))
    })
}

/// `f` of a float32 host matrix as the packed kernel's left operand: read
/// where it lies when one of its strides is 1, else packed for this call.
fn with_lhs<R>(x: &CandleTensor, f: impl FnOnce(sgemm::Lhs) -> R) -> Option<R> {
    with_matrix(x, |v| match sgemm::Lhs::view(v) {
        Some(a) => f(a),
        None => f(sgemm::Lhs::packed(&sgemm::pack_a(v))),
    })
}

/// `x [m, k] @ y [k, n]`: the packed kernel where it applies, else candle.
fn matmul_2d(ctx: &Ctx, x: &CandleTensor, y: &CandleTensor) -> Result<CandleTensor> {
    match packed_matmul(ctx, x, y, None, None)? {
        Some(t) => Ok(t),
        None => x.matmul(y).map_err(Error::from),
    }
}

/// `x [.., m, k] @ y [.., k, n]` with the batch dims broadcast: both are
/// broadcast by hand and their batch dims flattened into one, since
/// candle's matmul refuses some layouts of broadcast batch dims (a size-1
/// dim among them).
fn batched_matmul(ctx: &Ctx, x: &CandleTensor, y: &CandleTensor) -> Result<CandleTensor> {
    let (xr, yr) = (x.rank(), y.rank());
    if xr == 2 && yr == 2 {
        return matmul_2d(ctx, x, y);
    }
    let batch = broadcast_shape(&[&x.dims()[..xr - 2], &y.dims()[..yr - 2]])?;
    let (m, k, n) = (x.dims()[xr - 2], x.dims()[xr - 1], y.dims()[yr - 1]);
    let b: usize = batch.iter().product();
    // y the same matrix at every batch index (no batch dims, batch dims of
    // size 1, or an expand: stride 0, as torch's matmul decomposition makes
    // of a weight): the batch folds into x's rows, one [b*m, k] x [k, n]
    // product, and y is read where it lies instead of copied b times.
    let y_batch_constant = y.dims()[..yr - 2]
        .iter()
        .zip(y.stride())
        .all(|(&d, &s)| d == 1 || s == 0);
    if y_batch_constant && b > 1 {
        let rows = x
            .broadcast_as([batch.as_slice(), &[m, k]].concat())
            .and_then(|t| t.contiguous())
            .and_then(|t| t.reshape((b * m, k)))?;
        // y read where it lies (packed once where it is a weight)
        let product = match packed_matmul(ctx, &rows, y, None, None)? {
            Some(t) => t,
            None => {
                let mut y0 = y.clone();
                for _ in 0..yr - 2 {
                    y0 = y0.get(0)?;
                }
                rows.matmul(&y0)?
            }
        };
        return product
            .reshape([batch.as_slice(), &[m, n]].concat())
            .map_err(Error::from);
    }
    if xr == 3 && yr == 3 && x.dims()[0] == y.dims()[0] {
        // --precision bf16: two activations' products in bfloat16
        if let Some(t) = linalg::bf16_bmm(ctx, x, y)? {
            return Ok(t);
        }
        // one batch dim, no broadcast: candle's product reads each matrix
        // with its own strides (attention's permuted heads, a transposed
        // key), where making the operands contiguous would copy them
        if let Ok(t) = x.matmul(y) {
            return Ok(t);
        }
    }
    let flat = |t: &CandleTensor, r: usize, c: usize| {
        t.broadcast_as([batch.as_slice(), &[r, c]].concat())
            .and_then(|t| t.contiguous())
            .and_then(|t| t.reshape((b, r, c)))
    };
    let (xs, ys) = (flat(x, m, k)?, flat(y, k, n)?);
    let product = match linalg::bf16_bmm(ctx, &xs, &ys)? {
        Some(t) => t,
        None => xs.matmul(&ys)?,
    };
    product
        .reshape([batch.as_slice(), &[m, n]].concat())
        .map_err(Error::from)
}

fn pair(v: &[i64], default: usize) -> (usize, usize) {
    match v {
        [] => (default, default),
        [a] => (*a as usize, *a as usize),
        [a, b, ..] => (*a as usize, *b as usize),
    }
}

fn pad_hw(
    t: &CandleTensor,
    top: usize,
    bottom: usize,
    left: usize,
    right: usize,
    value: f64,
) -> Result<CandleTensor> {
    let rank = t.rank();
    let mut t = t.clone();
    if value == 0.0 {
        if top + bottom > 0 {
            t = t.pad_with_zeros(rank - 2, top, bottom)?;
        }
        if left + right > 0 {
            t = t.pad_with_zeros(rank - 1, left, right)?;
        }
        return Ok(t);
    }
    let pad = |t: CandleTensor, d: usize, a: usize, b: usize| -> Result<CandleTensor> {
        if a + b == 0 {
            return Ok(t);
        }
        let mut shape = t.dims().to_vec();
        let mut parts = Vec::new();
        if a > 0 {
            shape[d] = a;
            parts.push(
                CandleTensor::full(value, shape.clone(), t.device())
                    .and_then(|p| p.to_dtype(t.dtype()))?,
            );
        }
        parts.push(t.clone());
        if b > 0 {
            shape[d] = b;
            parts.push(
                CandleTensor::full(value, shape.clone(), t.device())
                    .and_then(|p| p.to_dtype(t.dtype()))?,
            );
        }
        CandleTensor::cat(&parts, d).map_err(Error::from)
    };
    let t = pad(t, rank - 2, top, bottom)?;
    pad(t, rank - 1, left, right)
}

//
// Ops candle lacks are computed elementwise on the host in f64: exact
// enough for every dtype here and simple; they are rare in real graphs.

/// Runs `f` on a CPU tensor's elements of type `T` (its candle dtype) in
/// row-major order, borrowed from candle's storage when the layout is
/// contiguous (no copy), else copied out once. `None` for other devices
/// and dtypes: the caller takes candle's path.
pub(crate) fn with_host<T: candle_core::WithDType, R>(
    t: &CandleTensor,
    f: impl FnOnce(&[T]) -> R,
) -> Option<R> {
    if !t.device().is_cpu() || t.dtype() != T::DTYPE {
        return None;
    }
    if t.elem_count() == 0 {
        // an empty view may sit at an offset past its empty storage's end
        return Some(f(&[]));
    }
    let (storage, layout) = t.storage_and_layout();
    let borrowed = match (&*storage, layout.contiguous_offsets()) {
        (candle_core::Storage::Cpu(cpu), Some((a, z))) => {
            cpu.as_slice::<T>().ok().and_then(|v| v.get(a..z))
        }
        _ => None,
    };
    if let Some(v) = borrowed {
        return Some(f(v));
    }
    drop(storage);
    if T::DTYPE == DType::F32 {
        if let Some(copy) = channels_last_in_order(t) {
            // SAFETY: T is f32 (its DType is F32), so the floats are Ts
            return Some(f(unsafe {
                std::slice::from_raw_parts(copy.as_ptr().cast::<T>(), copy.len())
            }));
        }
    }
    if let Some(copy) = rows_in_order::<T>(t) {
        return Some(f(&copy));
    }
    let copy: Vec<T> = t.flatten_all().and_then(|t| t.to_vec1()).ok()?;
    Some(f(&copy))
}

/// A CPU tensor's elements of type `T` in row-major order, where its last
/// dim is contiguous (stride 1; other dims any strides, broadcasts
/// included): a row of the last dim at a time, the rows split over the
/// threads. candle's copy of a strided view goes element by element on
/// one thread: GPT-2's attention output, `[8, 128, 12, 64]` permuted,
/// took 0.46 ms a layer at batch 8 to copy that way. `None` for other
/// layouts, devices and dtypes.
pub(crate) fn rows_in_order<T: candle_core::WithDType>(t: &CandleTensor) -> Option<Vec<T>> {
    if !t.device().is_cpu() || t.dtype() != T::DTYPE {
        return None;
    }
    let rows = RowLayout::of(t)?;
    let (storage, _) = t.storage_and_layout();
    let candle_core::Storage::Cpu(cpu) = &*storage else {
        return None;
    };
    let all = cpu.as_slice::<T>().ok()?;
    if !rows.fits(all.len()) {
        return None;
    }
    let (n, inner) = (rows.count(), rows.inner());
    let mut out: Vec<T> = Vec::with_capacity(n * inner);
    let row = |(i, dst): (usize, &mut [std::mem::MaybeUninit<T>])| {
        let at = rows.start(i);
        for (d, v) in dst.iter_mut().zip(&all[at..at + inner]) {
            d.write(*v);
        }
    };
    let spare = &mut out.spare_capacity_mut()[..n * inner];
    // (small tensors on this thread: the split costs more)
    if n * inner < 1 << 15 {
        spare.chunks_mut(inner).enumerate().for_each(row);
    } else {
        crate::kernels::threads::par_chunks(spare, inner, |i, d| row((i, d)));
    }
    // SAFETY: every row of the capacity was written above
    unsafe { out.set_len(n * inner) };
    Some(out)
}

/// A tensor's layout as rows of its last dim (that dim contiguous, the
/// tensor not empty, of rank 2 or more): where each row starts in storage
/// ([`rows_in_order`], `pointwise::rows_binary`).
pub(crate) struct RowLayout {
    dims: Vec<usize>,
    strides: Vec<usize>,
    start: usize,
}

impl RowLayout {
    /// The rows of `t`'s layout; `None` where its last dim is not
    /// contiguous, it has fewer than two dims, or no element.
    pub(crate) fn of(t: &CandleTensor) -> Option<RowLayout> {
        let (dims, strides) = (t.dims().to_vec(), t.stride().to_vec());
        let r = dims.len();
        (r >= 2 && strides[r - 1] == 1 && t.elem_count() > 0).then(|| RowLayout {
            dims,
            strides,
            start: t.layout().start_offset(),
        })
    }

    /// Floats a row.
    pub(crate) fn inner(&self) -> usize {
        self.dims[self.dims.len() - 1]
    }

    /// Rows.
    pub(crate) fn count(&self) -> usize {
        self.dims.iter().product::<usize>() / self.inner()
    }

    /// Whether a storage of `len` elements holds every element.
    pub(crate) fn fits(&self, len: usize) -> bool {
        let last = self.start
            + self
                .dims
                .iter()
                .zip(&self.strides)
                .map(|(&d, &s)| (d - 1) * s)
                .sum::<usize>();
        last < len
    }

    /// Where row `i` (over the leading dims, row-major) starts.
    pub(crate) fn start(&self, mut i: usize) -> usize {
        let mut off = self.start;
        for d in (0..self.dims.len() - 1).rev() {
            off += (i % self.dims[d]) * self.strides[d];
            i /= self.dims[d];
        }
        off
    }
}

/// `t` made contiguous: as it is where it already is, a strided float32
/// view whose last dim is contiguous a row at a time in parallel
/// ([`rows_in_order`]), anything else by candle (element by element).
pub(crate) fn contiguous(t: &CandleTensor) -> Result<CandleTensor> {
    if !t.is_contiguous() && t.dims().contains(&1) {
        // in order but for the strides of dims of size 1, which candle
        // counts and torch does not (ViT-B/16's attention output permuted
        // to [l, b, h, e] at batch 1: a copy of 0.17 ms a layer): a view
        let mut x = t.clone();
        for (d, &n) in t.dims().iter().enumerate().rev() {
            if n == 1 {
                x = x.squeeze(d)?;
            }
        }
        if x.is_contiguous() {
            return x.reshape(t.dims()).map_err(Error::from);
        }
    }
    if let Some(v) = channels_last_in_order(t) {
        return host_f32_tensor(v, t.dims());
    }
    if !t.is_contiguous() && t.dtype() == DType::F32 {
        if let Some(v) = rows_in_order::<f32>(t) {
            return host_f32_tensor(v, t.dims());
        }
    }
    t.contiguous().map_err(Error::from)
}

/// The dims `[b, c, h, w]` of a float32 host tensor stored channels-last:
/// a dense `[b][h][w][c]` block seen as `[b, c, h, w]` (the layout
/// [`channels_last_tensor`] makes). `None` for any other tensor, a
/// contiguous one included.
pub(crate) fn channels_last_dims(t: &CandleTensor) -> Option<[usize; 4]> {
    if t.dtype() != DType::F32 {
        return None;
    }
    nhwc_dims(t)
}

/// [`channels_last_dims`] of a host tensor of any dtype (the int8
/// products' quantized activations, `exec/ops/int8.rs`).
pub(crate) fn nhwc_dims(t: &CandleTensor) -> Option<[usize; 4]> {
    if t.rank() != 4 || !t.device().is_cpu() || t.is_contiguous() || t.elem_count() == 0 {
        return None;
    }
    let (d, s) = (t.dims(), t.stride());
    let [b, c, h, w] = [d[0], d[1], d[2], d[3]];
    let want = [h * w * c, 1, w * c, c];
    (0..4)
        .all(|i| d[i] == 1 || s[i] == want[i])
        .then_some([b, c, h, w])
}

/// `f` on the `[b][h][w][c]` block of a tensor stored channels-last
/// ([`channels_last_dims`]); `None` for any other.
pub(crate) fn with_channels_last<R>(t: &CandleTensor, f: impl FnOnce(&[f32]) -> R) -> Option<R> {
    channels_last_dims(t)?;
    with_nhwc(t, f)
}

/// `f` on the `[b][h][w][c]` block of a host tensor of `T`s stored
/// channels-last ([`nhwc_dims`]); `None` for any other.
pub(crate) fn with_nhwc<T: candle_core::WithDType, R>(
    t: &CandleTensor,
    f: impl FnOnce(&[T]) -> R,
) -> Option<R> {
    let n: usize = nhwc_dims(t)?.iter().product();
    if t.dtype() != T::DTYPE {
        return None;
    }
    let (storage, layout) = t.storage_and_layout();
    let candle_core::Storage::Cpu(cpu) = &*storage else {
        return None;
    };
    let block = cpu
        .as_slice::<T>()
        .ok()?
        .get(layout.start_offset()..layout.start_offset() + n)?;
    Some(f(block))
}

/// A float32 host tensor `[b, c, h, w]` over `v`, which holds it
/// channels-last (`[b][h][w][c]`).
pub(crate) fn channels_last_tensor(v: Vec<f32>, [b, c, h, w]: [usize; 4]) -> Result<CandleTensor> {
    host_f32_tensor(v, &[b, h, w, c])?
        .permute((0, 3, 1, 2))
        .map_err(Error::from)
}

/// A tensor stored channels-last ([`channels_last_dims`]) in `[b, c, h,
/// w]` order: each image's `[h * w, c]` transposed (candle's copy goes
/// element by element). `None` for any other tensor.
fn channels_last_in_order(t: &CandleTensor) -> Option<Vec<f32>> {
    let [b, c, h, w] = channels_last_dims(t)?;
    with_channels_last(t, |xs| {
        let image = c * h * w;
        let mut out = sgemm::uninit(b * image);
        for (i, dst) in out.chunks_mut(image.max(1)).enumerate() {
            vmath::transpose_into(&xs[i * image..][..image], h * w, c, dst);
        }
        // SAFETY: each image was written whole by its transpose
        unsafe { sgemm::assume_init(out) }
    })
}

/// Refuses an index outside `[0, size)` (`[-size, size)` where negative
/// indices count from the end) with torch's meaning, as a bad input: the
/// run cannot go on, and candle would fail without saying which index.
fn check_indices(idx: &CandleTensor, size: usize, negative_wraps: bool, what: &str) -> Result<()> {
    let vals: Vec<i64> = idx
        .flatten_all()
        .and_then(|t| t.to_dtype(DType::I64))
        .and_then(|t| t.to_vec1())?;
    let n = size as i64;
    let low = if negative_wraps { -n } else { 0 };
    if let Some(v) = vals.iter().find(|v| **v < low || **v >= n) {
        return Err(Error::bad_input(format!(
            "{what}: index {v} is out of range for a dim of size {size}"
        )));
    }
    Ok(())
}

/// A float32 CPU tensor from its elements.
fn host_f32_tensor(v: Vec<f32>, shape: &[usize]) -> Result<CandleTensor> {
    CandleTensor::from_vec(v, shape, &candle_core::Device::Cpu).map_err(Error::from)
}

fn from_f64(
    vals: &[f64],
    shape: &[usize],
    dtype: Dtype,
    dev: &candle_core::Device,
) -> Result<Tensor> {
    let t = CandleTensor::from_slice(vals, shape, dev)?;
    Tensor::new(t, Dtype::Float64).cast(dtype)
}

/// A unary op on the host: `f` over floats (an integer input gives
/// float32 where `float_out`), `int` over integers exactly (`None` where
/// the op has no integer form and `!float_out`: refused).
fn host_unary_with(
    ctx: &mut Ctx,
    float_out: bool,
    f: impl Fn(f64) -> f64,
    int: Option<fn(i64) -> i64>,
) -> OpResult {
    let x = ctx.tensor("self")?;
    if !x.dtype.is_floating() && !float_out {
        let Some(g) = int else {
            return Err(unsupported(format!(
                "{} of {} values",
                ctx.node.target.name,
                x.dtype.torch_name()
            )));
        };
        let Elems::I(v) = elems(&x)? else {
            return Err(Error::internal("integer elements expected"));
        };
        let out = Elems::I(v.into_iter().map(g).collect());
        return one(from_elems(out, x.dims(), x.dtype, ctx.device())?);
    }
    let out = if float_out && !x.dtype.is_floating() {
        Dtype::Float32
    } else {
        x.dtype
    };
    // (an integer input converted to the float dtype first, as torch's)
    let vals: Vec<f64> = elems(&x.cast(out)?)?
        .into_f64()
        .into_iter()
        .map(f)
        .collect();
    one(from_elems(Elems::F(vals), x.dims(), out, ctx.device())?)
}

//
// Pooling with padding, ceil_mode, dilation, divisor_override, used
// indices, or three spatial dims, as torch's CPU kernels compute it. One
// routine serves 1-, 2- and 3-D: missing leading spatial dims are size 1
// with kernel 1. The common inference cases keep candle's kernels.

/// A tensor's values as f64, with its dims.
fn host_f64(x: &Tensor) -> Result<Vec<f64>> {
    Ok(x.to_host()?.to_f64())
}

/// A per-dim pooling argument: one value for every dim, or one each.
fn per_dim(v: &[i64], n: usize, default: &[usize]) -> Vec<usize> {
    match v.len() {
        0 => default.to_vec(),
        1 => vec![v[0].max(0) as usize; n],
        _ => v.iter().map(|&x| x.max(0) as usize).collect(),
    }
}

/// Strides (in elements) that read a row-major tensor of `shape` broadcast
/// to `to`: 0 on broadcast dims.
fn broadcast_strides(shape: &[usize], to: &[usize]) -> Vec<usize> {
    let own = crate::ir::contiguous_strides(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>());
    let lead = to.len() - shape.len();
    (0..to.len())
        .map(|i| {
            if i < lead || shape[i - lead] == 1 {
                0
            } else {
                own[i - lead] as usize
            }
        })
        .collect()
}

/// Values of `t` broadcast to `to`, row-major.
fn broadcast_host(t: &Tensor, to: &[usize]) -> Result<Vec<f64>> {
    let vals = host_f64(t)?;
    broadcast_shape(&[t.dims(), to]).and_then(|b| {
        if b != to {
            Err(Error::bad_input(format!(
                "shape {:?} does not broadcast to {to:?}",
                t.dims()
            )))
        } else {
            Ok(())
        }
    })?;
    let strides = broadcast_strides(t.dims(), to);
    let n: usize = to.iter().product();
    Ok((0..n)
        .map(|k| {
            let mut rem = k;
            let mut src = 0;
            for (axis, size) in to.iter().enumerate().rev() {
                src += (rem % size) * strides[axis];
                rem /= size;
            }
            vals[src]
        })
        .collect())
}

/// Arguments a row does not handle, as data: such a node is lowered
/// through the decomposition table instead (`decompose::fallback`).
pub(crate) const DECLINES: crate::decompose::fallback::Declines = &[
    // The native LSTM runs one direction without projections (`proj_size`:
    // a fifth or third weight per layer); the rule unrolls the others.
    (aten::LSTM_INPUT, |n, _| {
        let per_layer = match n.arg("has_biases") {
            Some(Argument::Bool(false)) => 2,
            _ => 4,
        };
        let layers = match n.arg("num_layers") {
            Some(Argument::Int(l)) => *l as usize,
            _ => 0,
        };
        let params = match n.arg("params") {
            Some(Argument::Tensors(p)) => p.len(),
            Some(Argument::OptionalTensors(p)) => p.len(),
            _ => 0,
        };
        matches!(n.arg("bidirectional"), Some(Argument::Bool(true))) || params != per_layer * layers
    }),
];

/// A view of a mapped weight: the same bytes under the view's layout
/// (`None`: not as a view, as a reshape of a layout that would need a copy;
/// the row runs on a copy instead).
pub type MappedViewFn = fn(&Ctx, &super::mapped::Mapped) -> Result<Option<super::mapped::Mapped>>;

/// The views a mapped weight goes through and stays mapped, from the
/// families that have them.
pub fn mapped_view(op: &str) -> Option<MappedViewFn> {
    shape::MAPPED_VIEWS
        .iter()
        .chain(alias::MAPPED_VIEWS)
        .find(|(o, _)| *o == op)
        .map(|(_, f)| *f)
}

/// One step of a fused element-wise chain (`exec::fuse`): what it computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FuseOp {
    Relu,
    Neg,
    Abs,
    Tanh,
    Sigmoid,
    Silu,
    GeluErf,
    GeluTanh,
    Hardswish,
    Hardsigmoid,
    Square,
    Cube,
    Clamp(f32, f32),
    /// `a + b * alpha`
    Add(f32),
    /// `a - b * alpha`
    Sub(f32),
    Mul,
    Div,
}

/// One step on one element: what the op's own row computes (torch's
/// formulas), the rows of ops that have no vector kernel of their own call
/// it too (hardswish, hardsigmoid).
#[inline(always)]
pub fn scalar(op: FuseOp, a: f32, b: f32) -> f32 {
    match op {
        FuseOp::Relu => {
            if a < 0.0 {
                0.0
            } else {
                a
            }
        }
        FuseOp::Neg => -a,
        FuseOp::Abs => a.abs(),
        FuseOp::Tanh => vmath::tanh(a),
        FuseOp::Sigmoid => vmath::sigmoid(a),
        FuseOp::Silu => vmath::silu(a),
        FuseOp::GeluErf => vmath::gelu_erf(a),
        FuseOp::GeluTanh => vmath::gelu_tanh(a),
        FuseOp::Hardswish => a * clamp(a + 3.0, 0.0, 6.0) / 6.0,
        FuseOp::Hardsigmoid => clamp(a + 3.0, 0.0, 6.0) / 6.0,
        FuseOp::Square => a * a,
        FuseOp::Cube => a * a * a,
        FuseOp::Clamp(lo, hi) => clamp(a, lo, hi),
        FuseOp::Add(k) => a + b * k,
        FuseOp::Sub(k) => a - b * k,
        FuseOp::Mul => a * b,
        FuseOp::Div => a / b,
    }
}

/// torch's clamp: NaN kept, `lo` above `hi` gives `hi`.
#[inline(always)]
fn clamp(v: f32, lo: f32, hi: f32) -> f32 {
    let v = if v < lo { lo } else { v };
    if v > hi {
        hi
    } else {
        v
    }
}

/// How an op's node becomes a step of a fused chain (`exec::fuse`): the
/// value of a row of the family files' `FUSES` tables, which name the ops;
/// `exec::fuse` only reads the arguments.
#[derive(Clone, Copy, Debug)]
pub enum Fusable {
    /// `self` through a fixed op.
    Unary(FuseOp),
    /// `self` and `other` (a tensor of the output's shape, or a number),
    /// the op made from `alpha` (1 when absent).
    Binary(fn(f32) -> FuseOp),
    /// GELU, by `approximate`.
    Gelu,
    /// Clamp to `min` and `max` (numbers, either absent).
    Clamp,
    /// Clamp to `min_val` and `max_val` (-1 and 1 when absent).
    Hardtanh,
    /// `self` to the power `exponent`: 2 or 3 only.
    Pow,
}

/// How an op's node joins an element-wise chain run as one pass
/// (`exec::fuse`), from the families' `FUSES` rows.
pub fn fusable(op: &str) -> Option<Fusable> {
    activation::FUSES
        .iter()
        .chain(pointwise::FUSES)
        .find(|(o, _)| *o == op)
        .map(|(_, f)| *f)
}

/// The arguments rows read a mapped weight through in place (op,
/// argument), from the families that have them.
pub fn reads_mapped() -> &'static [(&'static str, &'static str)] {
    static ALL: OnceLock<Vec<(&'static str, &'static str)>> = OnceLock::new();
    ALL.get_or_init(|| {
        linalg::READS_MAPPED
            .iter()
            .chain(index::READS_MAPPED)
            .copied()
            .collect()
    })
}

/// `x [.., k] @ m [k, n]` (`+ bias`) with the mapped weight read in place:
/// float32 through the packed kernel, `m` converted block by block as it
/// reads it ([`sgemm::gemm_rows`]); the leading dims of x are rows. The
/// result has torch's type (bfloat16 for bfloat16 operands, rounded once).
/// Without the kernel (no AVX-512) the weight is copied for candle's.
fn mapped_matmul(
    ctx: &Ctx,
    x: &Tensor,
    m: &super::mapped::Mapped,
    bias: Option<&Tensor>,
    epilogue: Option<&EpilogueArgs>,
) -> OpResult {
    if m.rank() != 2 {
        return Err(unsupported(format!(
            "a matrix product with a mapped weight of rank {}",
            m.rank()
        )));
    }
    let (k, n) = (m.dims()[0], m.dims()[1]);
    if x.rank() == 0 || x.dims()[x.rank() - 1] != k {
        return Err(Error::bad_input(format!(
            "matrix product of {:?} and [{k}, {n}]",
            x.dims()
        )));
    }
    let dt = result_type(&[(x.dtype, Rank::Dim), (m.dtype, Rank::Dim)]);
    let mut shape = x.dims().to_vec();
    *shape.last_mut().unwrap_or(&mut 0) = n;
    let rows = x.t.elem_count() / k.max(1);
    // --precision bf16: the weight rounded and packed once, kept
    if let (Some(_), Dtype::Float32, Dtype::Float32) = (ctx.exec.bf16_kernel(), x.dtype, m.dtype) {
        if let Some(pb) = ctx.exec.packed_mapped_b16(m) {
            let xs = x.t.reshape((rows, k))?;
            if let Some(y) = linalg::bf16_matmul(ctx, &xs, &pb, bias.map(|b| &b.t), epilogue)? {
                return one(Tensor::new(y.reshape(shape)?, Dtype::Float32));
            }
        }
    }
    let y = if crate::kernels::cpu().vector {
        let xs = x.cast(Dtype::Float32)?.t.reshape((rows, k))?;
        let row = match bias {
            Some(b) => Some(
                b.cast(Dtype::Float32)?
                    .t
                    .broadcast_as(n)
                    .and_then(|t| t.to_vec1::<f32>())?,
            ),
            None => None,
        };
        let init = row.as_deref().map_or(sgemm::Init::Zero, sgemm::Init::Bias);
        // written whole by the product (never accumulated on)
        let mut out = sgemm::uninit(rows * n);
        let threads = rayon::current_num_threads();
        let packed = ctx.exec.packed_mapped(m);
        // a fused group after it, on each block of the float32 output
        let mut ran = false;
        let len = out.len();
        let epi = epilogue.filter(|_| dt == Dtype::Float32);
        with_product_epilogue(epi, len, |then| match &packed {
            // packed once, kept
            Some(pb) => with_lhs(&xs, |a| {
                ran = then.is_some();
                sgemm::gemm_lhs(a, pb, &mut out, n, init, then, threads)
            }),
            // too many weights to keep packed: a few rows against the
            // weight's rows in place, else each block packed as it is
            // read; the pages released after where the mapped weights
            // outgrow memory
            None => {
                let done = with_matrix(&xs, |a| m.product_rows(a, row.as_deref(), &mut out))
                    .flatten()
                    .or_else(|| {
                        with_lhs(&xs, |a| {
                            let fill =
                                |r: usize, j0: usize, out: &mut [f32]| m.fill_row(r, j0, out);
                            sgemm::gemm_rows(
                                a,
                                k,
                                n,
                                &fill,
                                sgemm::as_uninit(sgemm::zeroed(&mut out)),
                                n,
                                init,
                                None,
                                threads,
                            )
                        })
                    });
                if ctx.exec.releases_mapped() {
                    m.release();
                }
                done
            }
        })
        .ok_or_else(|| Error::internal("mapped matmul of an input not on the host"))?;
        mark_applied(epilogue, ran);
        // SAFETY: the product wrote every element
        let out = unsafe { sgemm::assume_init(out) };
        Tensor::new(
            CandleTensor::from_vec(out, shape, x.t.device())?,
            Dtype::Float32,
        )
    } else {
        let w = m.materialize(ctx.device())?;
        let y = matmul_t(ctx, x, &w)?;
        match bias {
            Some(b) => Tensor::new(y.t.broadcast_add(&b.cast(y.dtype)?.t)?, y.dtype),
            None => y,
        }
    };
    one(y.cast(dt)?)
}

/// The implementation of an op, by identity (`aten.add.Tensor`).
pub fn lookup(op: &str) -> Option<OpFn> {
    static MAP: OnceLock<HashMap<&'static str, OpFn>> = OnceLock::new();
    let map = MAP.get_or_init(|| rows().map(|(_, op, f)| (op, f)).collect());
    // an in-place op runs its functional row (the executor writes the
    // result back: `Executor::run_node`)
    map.get(op)
        .or_else(|| map.get(crate::schema::functional_of(op)?))
        .copied()
}

/// Every op identity the executor implements: its rows, and the in-place
/// ops of its functional rows ([`crate::schema::functional_of`]).
pub fn supported() -> impl Iterator<Item = &'static str> {
    static IN_PLACE: OnceLock<Vec<String>> = OnceLock::new();
    let in_place = IN_PLACE.get_or_init(|| {
        let own: std::collections::HashSet<&str> = rows().map(|(_, op, _)| op).collect();
        crate::schema::in_place_of(rows().map(|(_, op, _)| op))
            .into_iter()
            .filter(|op| !own.contains(op.as_str()))
            .collect()
    });
    rows()
        .map(|(_, op, _)| op)
        .chain(in_place.iter().map(String::as_str))
}

/// Every row with its family: (family, op identity, implementation).
pub fn rows() -> impl Iterator<Item = (&'static str, &'static str, OpFn)> {
    FAMILIES
        .iter()
        .flat_map(|(family, rows)| rows.iter().map(move |(op, f)| (*family, *op, *f)))
}

/// torch's `pooling_output_shape`.
pub(super) fn pool_len(
    n: usize,
    k: usize,
    s: usize,
    p: usize,
    d: usize,
    ceil: bool,
) -> Result<usize> {
    if s == 0 || k == 0 {
        return Err(Error::bad_input(format!(
            "pooling: kernel {k} and stride {s} must be positive"
        )));
    }
    let span = (n + 2 * p) as i64 - (d * (k - 1)) as i64 - 1;
    let s = s as i64;
    let mut o = if ceil {
        (span + s - 1).div_euclid(s)
    } else {
        span.div_euclid(s)
    } + 1;
    if ceil && (o - 1) * s >= (n + p) as i64 {
        o -= 1;
    }
    if o < 1 {
        return Err(Error::bad_input(format!(
            "pooling: output size {o} for input size {n}, kernel {k}, stride {s}, padding {p}"
        )));
    }
    Ok(o as usize)
}
