//! Linear algebra (mm, bmm, addmm, linear, matmul, distances, ...): the executor rows.

use crate::kernels::lowp;
use crate::ir::op::aten;
use super::*;

fn matmul(ctx: &mut Ctx) -> OpResult {
    let a = ctx.tensor("self")?;
    let right = if ctx.node.arg("mat2").is_some() {
        "mat2"
    } else {
        "other"
    };
    if let (Some(m), false) = (ctx.mapped(right), ctx.node.target.name == "bmm") {
        return ctx.with_epilogue(|e| mapped_matmul(ctx, &a, &m, None, e));
    }
    let b = ctx.tensor(right)?;
    one(matmul_t(ctx, &a, &b)?)
}

fn addmm(ctx: &mut Ctx) -> OpResult {
    let bias = ctx.tensor("self")?;
    let a = ctx.tensor("mat1")?;
    let beta = if ctx.has("beta") {
        ctx.float("beta")?
    } else {
        1.0
    };
    let alpha = if ctx.has("alpha") {
        ctx.float("alpha")?
    } else {
        1.0
    };
    if let (Some(m), 1.0, 1.0) = (ctx.mapped("mat2"), alpha, beta) {
        return ctx.with_epilogue(|e| mapped_matmul(ctx, &a, &m, Some(&bias), e));
    }
    let b = ctx.tensor("mat2")?;
    // A bias row (`[n]` or `[1, n]`) starts the float32 product: fused.
    let row_bias = bias.rank() == 1 || (bias.rank() == 2 && bias.dims()[0] == 1);
    if alpha == 1.0 && beta == 1.0 && row_bias && a.rank() == 2 && b.rank() == 2 {
        if let [Dtype::Float32, Dtype::Float32, Dtype::Float32] = [bias.dtype, a.dtype, b.dtype] {
            let t = ctx.with_epilogue(|e| packed_matmul(ctx, &a.t, &b.t, Some(&bias.t), e))?;
            if let Some(t) = t {
                return one(Tensor::new(t, Dtype::Float32));
            }
        }
    }
    // torch's gemm: C = beta * self, then C += alpha * (a @ b) (exact for
    // integers, whose alpha and beta are ints)
    let (alpha, beta) = (ctx.opt_num("alpha")?.unwrap_or(Num::Int(1)), ctx.opt_num("beta")?.unwrap_or(Num::Int(1)));
    let init = if beta.as_f64() == 1.0 {
        bias
    } else {
        match super::pointwise::mul_by(ctx, Value::Tensor(bias), Value::from_num(beta))?.remove(0) {
            Value::Tensor(t) => t,
            _ => return Err(Error::internal("a product that is no tensor")),
        }
    };
    one(matmul_onto(ctx, &a, &b, Some(&init), alpha)?)
}

pub(super) fn linear(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    if let Some(m) = ctx.mapped("weight").filter(|m| m.rank() == 2) {
        let wt = m.with_layout(m.layout.transpose(0, 1)?)?;
        let bias = ctx.opt_tensor("bias")?;
        return ctx.with_epilogue(|e| mapped_matmul(ctx, &x, &wt, bias.as_ref(), e));
    }
    let w = ctx.tensor("weight")?;
    let wt = Tensor::new(w.t.t()?, w.dtype);
    let bias = ctx.opt_tensor("bias")?;
    // float32: the packed product, its bias and any epilogue fused, the
    // leading dims as rows
    if x.dtype == Dtype::Float32 && w.dtype == Dtype::Float32 && w.rank() == 2 && x.rank() >= 1 {
        let dims = x.dims().to_vec();
        let rows = x.t.reshape(((), dims[dims.len() - 1]))?;
        let y = ctx.with_epilogue(|e| {
            packed_matmul(ctx, &rows, &wt.t, bias.as_ref().map(|b| &b.t), e)
        })?;
        if let Some(y) = y {
            let mut shape = dims[..dims.len() - 1].to_vec();
            shape.push(y.dims()[1]);
            return one(Tensor::new(y.reshape(shape)?, Dtype::Float32));
        }
    }
    // Leading dims flattened into rows: one [rows, in] x [in, out] product
    // (candle would broadcast the weight to every leading index instead).
    // (the bias is the product's starting value: addmm's order)
    let y = if x.rank() > 2 && w.rank() == 2 {
        let dims = x.dims().to_vec();
        let k = dims[dims.len() - 1];
        let rows = Tensor::new(x.t.reshape(((), k))?, x.dtype);
        let y = matmul_onto(ctx, &rows, &wt, bias.as_ref(), Num::Int(1))?;
        let mut shape = dims[..dims.len() - 1].to_vec();
        shape.push(y.dims()[1]);
        Tensor::new(y.t.reshape(shape)?, y.dtype)
    } else {
        matmul_onto(ctx, &x, &wt, bias.as_ref(), Num::Int(1))?
    };
    one(y)
}

/// The p-norm of a difference vector, as torch's pdist/cdist kernels
/// special-case p: 0 counts nonzeros, infinity takes the maximum.
fn p_norm(diffs: impl Iterator<Item = f64>, p: f64) -> f64 {
    if p == 0.0 {
        diffs.filter(|d| *d != 0.0).count() as f64
    } else if p.is_infinite() {
        diffs.map(f64::abs).fold(0.0, f64::max)
    } else if p == 1.0 {
        diffs.map(f64::abs).sum()
    } else if p == 2.0 {
        diffs.map(|d| d * d).sum::<f64>().sqrt()
    } else {
        diffs.map(|d| d.abs().powf(p)).sum::<f64>().powf(1.0 / p)
    }
}

/// `_pdist_forward(self [n, m], p)`: distances of rows i < j, row-major.
fn pdist(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let p = ctx.opt_float("p")?.unwrap_or(2.0);
    if x.rank() != 2 || p < 0.0 {
        return Err(Error::bad_input(
            "_pdist_forward takes a 2-D input and p >= 0",
        ));
    }
    let (n, m) = (x.dims()[0], x.dims()[1]);
    let v = host_f64(&x)?;
    let mut out = Vec::with_capacity(n * n.saturating_sub(1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            let (a, b) = (&v[i * m..(i + 1) * m], &v[j * m..(j + 1) * m]);
            out.push(p_norm(a.iter().zip(b).map(|(x, y)| x - y), p));
        }
    }
    one(from_f64(&out, &[out.len()], x.dtype, ctx.device())?)
}

/// `_cdist_forward(x1 [.., p, m], x2 [.., r, m], p, compute_mode)`: the
/// batch dims broadcast. Distances are computed directly (torch's matmul
/// form for p = 2 differs only by rounding).
fn cdist(ctx: &mut Ctx) -> OpResult {
    let a = ctx.tensor("x1")?;
    let b = ctx.tensor("x2")?;
    let p = ctx.float("p")?;
    if a.rank() < 2 || b.rank() < 2 || a.dims()[a.rank() - 1] != b.dims()[b.rank() - 1] || p < 0.0 {
        return Err(Error::bad_input(format!(
            "_cdist_forward of {:?} and {:?} with p = {p}",
            a.dims(),
            b.dims()
        )));
    }
    let (pa, m) = (a.dims()[a.rank() - 2], a.dims()[a.rank() - 1]);
    let rb = b.dims()[b.rank() - 2];
    let batch = broadcast_shape(&[&a.dims()[..a.rank() - 2], &b.dims()[..b.rank() - 2]])?;
    let expand = |t: &Tensor, rows: usize| -> Result<Vec<f64>> {
        let mut to = batch.clone();
        to.extend([rows, m]);
        broadcast_host(t, &to)
    };
    let (va, vb) = (expand(&a, pa)?, expand(&b, rb)?);
    let nb: usize = batch.iter().product();
    let mut out = Vec::with_capacity(nb * pa * rb);
    for k in 0..nb {
        for i in 0..pa {
            let x = &va[(k * pa + i) * m..][..m];
            for j in 0..rb {
                let y = &vb[(k * rb + j) * m..][..m];
                out.push(p_norm(x.iter().zip(y).map(|(x, y)| x - y), p));
            }
        }
    }
    let mut shape = batch.clone();
    shape.extend([pa, rb]);
    let dt = result_type(&[(a.dtype, Rank::Dim), (b.dtype, Rank::Dim)]);
    one(from_f64(&out, &shape, dt, ctx.device())?)
}

/// `transformers.grouped_mm_fallback(input [S, K], weight [E, K, N], offs
/// [E])` and `aten._grouped_mm(self, mat2, offs)` (2-D x 3-D): the offsets
/// read on the host, one product per expert over its rows
/// `offs[i-1]..offs[i]`, rows past the last offset 0. Half inputs arrive
/// widened to float32 (the linalg family), as torch's CPU mm computes them.
fn grouped_mm(ctx: &mut Ctx) -> OpResult {
    let aten = ctx.node.target.namespace == "aten";
    let (xa, wa) = if aten { ("self", "mat2") } else { ("input", "weight") };
    if aten && ctx.has("bias") {
        return Err(unsupported("_grouped_mm with a bias"));
    }
    let x = ctx.tensor(xa)?;
    let w = ctx.tensor(wa)?;
    if aten && (x.rank() != 2 || w.rank() != 3) {
        return Err(unsupported(format!(
            "_grouped_mm of {:?} and {:?}: only the 2-D x 3-D grouped product",
            x.dims(),
            w.dims()
        )));
    }
    let Some(offs) = ctx.opt_tensor("offs")? else {
        return Err(unsupported("_grouped_mm without offs (only the grouped 2-D x 3-D product)"));
    };
    let (&[s, k], &[e, kw, n], &[ne]) = (x.dims(), w.dims(), offs.dims()) else {
        return Err(Error::bad_input(format!(
            "{xa} {:?}, {wa} {:?} and offs {:?}: must be [S, K], [E, K, N] and [E]",
            x.dims(),
            w.dims(),
            offs.dims()
        )));
    };
    if k != kw || ne != e || offs.dtype.is_floating() {
        return Err(Error::bad_input(format!(
            "{xa} {:?}, {wa} {:?} and offs {:?} ({}): must be [S, K], [E, K, N] and [E] of int32 or int64",
            x.dims(),
            w.dims(),
            offs.dims(),
            offs.dtype
        )));
    }
    let host = offs.to_host()?;
    let ends: Vec<i64> = (0..e).map(|i| host.int_at(i)).collect();
    let mut start = 0usize;
    let dt = result_type(&[(x.dtype, Rank::Dim), (w.dtype, Rank::Dim)]);
    let mut pieces = Vec::with_capacity(e + 1);
    for (i, &end) in ends.iter().enumerate() {
        if end < start as i64 || end > s as i64 {
            return Err(Error::bad_input(format!(
                "offs {ends:?}: offs[{i}] = {end} is {}; offsets must be nondecreasing within [0, {s}] (the rows of {xa})",
                if end < start as i64 { "below the offset before it" } else { "past the last row" }
            )));
        }
        let end = end as usize;
        if end > start {
            let rows = Tensor::new(x.t.narrow(0, start, end - start)?, x.dtype);
            let wi = Tensor::new(w.t.get(i)?, w.dtype);
            pieces.push(matmul_t(ctx, &rows, &wi)?);
        }
        start = end;
    }
    if start < s || pieces.is_empty() {
        pieces.push(from_elems(Elems::filled((s - start) * n, Num::Int(0), dt), &[s - start, n], dt, ctx.device())?);
    }
    let parts: Vec<&CandleTensor> = pieces.iter().map(|p| &p.t).collect();
    let y = Tensor::new(CandleTensor::cat(&parts, 0)?, pieces[0].dtype);
    match ctx.dtype("out_dtype") {
        Some(d) if aten => one(y.cast(d)?),
        _ => one(y),
    }
}

/// `x [m, k] @ w (+ bias, a row of n)` with `w` a weight rounded to
/// bfloat16 and packed once (`--precision bf16`, [`lowp`]): x rounded as
/// it is read, the products summed in float32, a fused epilogue run on
/// each finished block as the float32 kernel runs it. `None` where it
/// does not apply (x not a float32 host matrix, a bias of another type).
pub(super) fn bf16_matmul(
    ctx: &Ctx,
    x: &CandleTensor,
    w: &lowp::PackedB16,
    bias: Option<&CandleTensor>,
    epilogue: Option<&EpilogueArgs>,
) -> Result<Option<CandleTensor>> {
    let Some(kernel) = ctx.exec.bf16_kernel() else {
        return Ok(None);
    };
    let (m, k, n) = (x.dims()[0], x.dims()[1], w.n);
    if k != w.k {
        return Err(Error::bad_input(format!(
            "matrix product of [{m}, {k}] and [{}, {n}]",
            w.k
        )));
    }
    let row = match bias {
        Some(b) if b.dtype() == DType::F32 && b.elem_count() == n => Some(
            b.flatten_all()
                .and_then(|b| b.to_vec1::<f32>())?,
        ),
        Some(_) => return Ok(None),
        None => None,
    };
    let Some(a) = with_matrix(x, |v| lowp::round_a(v.data, v.off, v.rows, v.cols, v.rs, v.cs))
    else {
        return Ok(None);
    };
    // written whole by the product
    let mut out = sgemm::uninit(m * n);
    let threads = rayon::current_num_threads();
    let len = out.len();
    let ran = with_product_epilogue(epilogue, len, |then| {
        let each = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>, c: *mut f32| {
            if let Some(e) = then {
                for i in rows {
                    let at = i * n + cols.start;
                    // SAFETY: the block is final and this thread's alone
                    // (lowp::Done); it lies inside C's m x n.
                    let span = unsafe { std::slice::from_raw_parts_mut(c.add(at), cols.len()) };
                    sgemm::run_epilogue(e, at, span);
                }
            }
        };
        let done: Option<lowp::Done> = then.is_some().then_some(&each);
        let bias = row.as_deref().map_or(lowp::Bias::None, lowp::Bias::Columns);
        lowp::gemm(&a, w, &mut out, n, bias, threads, kernel, done);
        then.is_some()
    });
    mark_applied(epilogue, ran);
    // SAFETY: the product wrote every element
    let out = unsafe { sgemm::assume_init(out) };
    CandleTensor::from_vec(out, (m, n), x.device())
        .map(Some)
        .map_err(Error::from)
}

/// `x [b, m, k] @ y [b, k, n]`, two float32 host activations (attention's
/// products), in bfloat16 under `--precision bf16` ([`lowp`]): each
/// matrix pair rounded where it lies (any strides: a permuted head, a
/// transposed key), the pairs split between the threads. `None` where it
/// does not apply.
pub(super) fn bf16_bmm(
    ctx: &Ctx,
    x: &CandleTensor,
    y: &CandleTensor,
) -> Result<Option<CandleTensor>> {
    let Some(kernel) = ctx.exec.bf16_kernel() else {
        return Ok(None);
    };
    if x.rank() != 3 || y.rank() != 3 || x.dtype() != DType::F32 || y.dtype() != DType::F32 {
        return Ok(None);
    }
    let ([b, m, k], [yb, yk, n]) = (
        [x.dims()[0], x.dims()[1], x.dims()[2]],
        [y.dims()[0], y.dims()[1], y.dims()[2]],
    );
    if (yb, yk) != (b, k) || b * m * n == 0 {
        return Ok(None);
    }
    let ((xs, xl), (ys, yl)) = (x.storage_and_layout(), y.storage_and_layout());
    let (candle_core::Storage::Cpu(xc), candle_core::Storage::Cpu(yc)) = (&*xs, &*ys) else {
        return Ok(None);
    };
    let (xd, yd) = (xc.as_slice::<f32>()?, yc.as_slice::<f32>()?);
    let (xst, yst) = (xl.stride(), yl.stride());
    let (xo, yo) = (xl.start_offset(), yl.start_offset());
    // written whole by the products
    let mut out = sgemm::uninit(b * m * n);
    let product = |i: usize, c: &mut [std::mem::MaybeUninit<f32>]| {
        let a = lowp::round_a(xd, xo + i * xst[0], m, k, xst[1], xst[2]);
        let w = lowp::pack_b(yd, yo + i * yst[0], k, n, yst[1], yst[2]);
        lowp::gemm(&a, &w, c, n, lowp::Bias::None, 1, kernel, None);
    };
    if b > 1 {
        crate::kernels::threads::par_chunks(&mut out, m * n, product);
    } else {
        let a = lowp::round_a(xd, xo, m, k, xst[1], xst[2]);
        let w = lowp::pack_b(yd, yo, k, n, yst[1], yst[2]);
        let threads = rayon::current_num_threads();
        lowp::gemm(&a, &w, &mut out, n, lowp::Bias::None, threads, kernel, None);
    }
    // SAFETY: the products wrote every element
    let out = unsafe { sgemm::assume_init(out) };
    CandleTensor::from_vec(out, (b, m, n), x.device())
        .map(Some)
        .map_err(Error::from)
}

/// This family's rows: op identity -> implementation.
/// Where these rows read a mapped weight in place (op, argument).
pub(super) const READS_MAPPED: &[(&str, &str)] = &[
    (aten::MM, "mat2"),
    (aten::MATMUL, "other"),
    (aten::ADDMM, "mat2"),
    (aten::LINEAR, "weight"),
];

pub(super) const ROWS: &[(&str, OpFn)] = &[
    (aten::MM, matmul),
    (aten::BMM, matmul),
    (aten::MATMUL, matmul),
    (aten::ADDMM, addmm),
    (aten::LINEAR, linear),
    (aten::_PDIST_FORWARD, pdist),
    (aten::_CDIST_FORWARD, cdist),
    ("pt2kit.dft.default", super::dft::dft),
    ("transformers.grouped_mm_fallback.default", grouped_mm),
    (aten::_GROUPED_MM, grouped_mm),
    (crate::exec::int8::LINEAR, super::int8::int8_linear),
];
