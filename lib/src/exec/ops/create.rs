//! Tensor creation (full, zeros, arange, scalar_tensor, empty, ...): the executor rows.

use super::*;

fn fill_value(ctx: &Ctx) -> Result<(f64, Dtype)> {
    Ok(match ctx.value("fill_value")? {
        Value::Int(i) => (i as f64, Dtype::Int64),
        Value::Float(f) => (f, Dtype::Float32),
        Value::Bool(b) => (b as i64 as f64, Dtype::Bool),
        Value::Tensor(t) => (
            t.to_host()?.to_f64().first().copied().unwrap_or(0.0),
            t.dtype,
        ),
        other => return Err(Error::bad_input(format!("fill value {other:?}"))),
    })
}

fn creation(ctx: &mut Ctx) -> OpResult {
    let name = ctx.node.target.name.clone();
    let like = name.ends_with("_like");
    let (shape, base_dtype) = if like {
        let x = ctx.tensor("self")?;
        (x.dims().to_vec(), x.dtype)
    } else if name.starts_with("new_") {
        let x = ctx.tensor("self")?;
        (
            ctx.ints("size")?.iter().map(|&s| s as usize).collect(),
            x.dtype,
        )
    } else {
        let size = ctx.ints("size")?;
        (size.iter().map(|&s| s as usize).collect(), Dtype::Float32)
    };
    let (value, value_dtype) = match name.trim_end_matches("_like").trim_start_matches("new_") {
        "zeros" => (0.0, base_dtype),
        "ones" => (1.0, base_dtype),
        "full" | "new_full" => {
            let (v, d) = fill_value(ctx)?;
            (v, if like { base_dtype } else { d })
        }
        "empty" | "new_empty" => (0.0, base_dtype),
        other => return Err(unsupported(other.to_string())),
    };
    let dtype = ctx
        .dtype("dtype")
        .unwrap_or(if like { base_dtype } else { value_dtype });
    full_of(ctx, shape, value, dtype)
}

fn scalar_tensor_op(ctx: &mut Ctx) -> OpResult {
    let v = ctx.float("s")?;
    let d = ctx.dtype("dtype").unwrap_or(Dtype::Float32);
    one(scalar_tensor(v, d, ctx.device())?)
}

fn arange(ctx: &mut Ctx) -> OpResult {
    let start = if ctx.has("start") {
        ctx.float("start")?
    } else {
        0.0
    };
    let end = ctx.float("end")?;
    let step = if ctx.has("step") {
        ctx.float("step")?
    } else {
        1.0
    };
    let all_int = ["start", "end", "step"].iter().all(|n| {
        !matches!(
            ctx.node.arg(n),
            Some(Argument::Float(_)) | Some(Argument::SymFloat(_))
        )
    });
    let dtype = ctx.dtype("dtype").unwrap_or(if all_int {
        Dtype::Int64
    } else {
        Dtype::Float32
    });
    let n = ((end - start) / step).ceil().max(0.0) as usize;
    let vals: Vec<f64> = (0..n).map(|i| start + i as f64 * step).collect();
    let t = CandleTensor::new(vals.as_slice(), ctx.device()).map_err(ce)?;
    one(Tensor::new(t, Dtype::Float64).cast(dtype)?)
}

fn fill_scalar(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let v = ctx.float("value")?;
    full_of(ctx, x.dims().to_vec(), v, x.dtype)
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[
    ("aten.zeros.default", creation),
    ("aten.ones.default", creation),
    ("aten.full.default", creation),
    ("aten.empty.memory_format", creation),
    ("aten.zeros_like.default", creation),
    ("aten.ones_like.default", creation),
    ("aten.full_like.default", creation),
    ("aten.empty_like.default", creation),
    ("aten.scalar_tensor.default", scalar_tensor_op),
    ("aten.arange.default", arange),
    ("aten.arange.start", arange),
    ("aten.arange.start_step", arange),
    ("aten.fill.Scalar", fill_scalar),
    ("aten.new_ones.default", creation),
    ("aten.new_zeros.default", creation),
    ("aten.new_full.default", creation),
];
