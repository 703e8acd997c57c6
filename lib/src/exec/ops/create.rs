//! Tensor creation (full, zeros, arange, scalar_tensor, empty, ...): the executor rows.

use super::*;

fn fill_value(ctx: &Ctx) -> Result<(Num, Dtype)> {
    Ok(match ctx.value("fill_value")? {
        Value::Tensor(t) => {
            let e = elems(&t)?;
            if e.len() == 0 {
                return Err(Error::bad_input("fill value: an empty tensor"));
            }
            (e.get(0), t.dtype)
        }
        v => match Num::of(&v) {
            Some(n) => (n, n.dtype()),
            None => return Err(Error::bad_input(format!("fill value {v:?}"))),
        },
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
        (sizes_of(&ctx.ints("size")?)?, x.dtype)
    } else {
        (sizes_of(&ctx.ints("size")?)?, Dtype::Float32)
    };
    let (value, value_dtype) = match name.trim_end_matches("_like").trim_start_matches("new_") {
        "zeros" => (Num::Int(0), base_dtype),
        "ones" => (Num::Int(1), base_dtype),
        "full" | "new_full" => {
            let (v, d) = fill_value(ctx)?;
            (v, if like { base_dtype } else { d })
        }
        "empty" | "new_empty" => (Num::Int(0), base_dtype),
        other => return Err(unsupported(other.to_string())),
    };
    let dtype = ctx
        .dtype("dtype")
        .unwrap_or(if like { base_dtype } else { value_dtype });
    ctx.check_alloc(&shape, dtype)?;
    full_of(ctx, shape, value, dtype)
}


fn scalar_tensor_op(ctx: &mut Ctx) -> OpResult {
    let v = ctx.num("s")?;
    let d = ctx.dtype("dtype").unwrap_or(Dtype::Float32);
    one(scalar_tensor(v, d, ctx.device())?)
}

fn arange(ctx: &mut Ctx) -> OpResult {
    let start = ctx.opt_num("start")?.unwrap_or(Num::Int(0));
    let end = ctx.num("end")?;
    let step = ctx.opt_num("step")?.unwrap_or(Num::Int(1));
    let all_int = [start, end, step].iter().all(|n| !matches!(n, Num::Float(_)));
    let dtype = ctx.dtype("dtype").unwrap_or(if all_int {
        Dtype::Int64
    } else {
        Dtype::Float32
    });
    if step.as_f64() == 0.0 {
        return Err(Error::bad_input("arange: step must be nonzero"));
    }
    let vals = if all_int {
        // exact: ceil((end - start) / step) and each value in integers
        let (s, e, st) = (start.as_i64() as i128, end.as_i64() as i128, step.as_i64() as i128);
        let span = e - s;
        let n = if (span > 0) == (st > 0) && span != 0 {
            (span + st - st.signum()) / st
        } else {
            0
        };
        let n = usize::try_from(n).map_err(|_| Error::bad_input("arange: too many elements"))?;
        Elems::I((0..n as i128).map(|i| (s + i * st) as i64).collect())
    } else {
        let (s, e, st) = (start.as_f64(), end.as_f64(), step.as_f64());
        let n = ((e - s) / st).ceil();
        if !n.is_finite() {
            return Err(Error::bad_input(format!("arange: {n} elements from start {s}, end {e}, step {st}")));
        }
        let n = n.max(0.0) as usize;
        Elems::F((0..n).map(|i| s + i as f64 * st).collect())
    };
    let n = vals.len();
    one(from_elems(vals, &[n], dtype, ctx.device())?)
}

fn fill_scalar(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let v = ctx.num("value")?;
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
