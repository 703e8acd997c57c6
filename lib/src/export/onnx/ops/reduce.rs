//! Reductions (sum, mean, amax, argmax, var, prod, cumsum, sort, topk, ...): the ONNX emitters.

use crate::ir::op::aten;
use super::*;

fn reduce(cx: &mut EmitNode, op: &str, dim_arg: Option<&str>) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dims = reduce_dims(cx, dim_arg, rank)?;
    let keepdim = cx.opt_bool("keepdim")?.unwrap_or(false);
    let sizes = meta.sizes.clone();
    let out = cx.out_dtype(0)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        if rank == 0 {
            return Ok(x.to_string());
        }
        // ReduceMax/ReduceMin take bool from opset 20 only: as uint8
        if c == Dtype::Bool {
            let u = cx.cast(x, Dtype::Bool, Dtype::Uint8)?;
            let r = cx.reduce(op, &u, dims.as_deref(), keepdim);
            return cx.cast(&r, Dtype::Uint8, Dtype::Bool);
        }
        let axes: Vec<i64> = dims.clone().unwrap_or_else(|| (0..rank as i64).collect());
        let wide_int = matches!(c, Dtype::Int64 | Dtype::Uint64);
        match op {
            "ReduceSum" if wide_int => Ok(exact_int_sum(cx, x, &axes, keepdim)),
            "ReduceProd" if wide_int => exact_int_prod(cx, x, &axes, &sizes, keepdim),
            "ReduceProd" if c != out && c.is_floating() => {
                half_prod(cx, x, (&axes, &sizes, keepdim), (c, out))
            }
            "ReduceMax" | "ReduceMin" if c.is_floating() => {
                let r = cx.reduce(op, x, dims.as_deref(), keepdim);
                nan_where_any(cx, x, &r, c, &axes, keepdim)
            }
            _ => Ok(cx.reduce(op, x, dims.as_deref(), keepdim)),
        }
    })
}

/// `r` (a max or min of `x` over `axes`) with NaN wherever the reduced
/// line holds one, as torch's max and min propagate it (ONNX Runtime's
/// ReduceMax and ReduceMin skip NaN).
fn nan_where_any(cx: &mut EmitNode, x: &str, r: &str, c: Dtype, axes: &[i64], keepdim: bool) -> Result<String> {
    let isnan = cx.node("IsNaN", &[x], vec![]);
    let flag = cx.cast(&isnan, Dtype::Bool, Dtype::Float32)?;
    let any = cx.reduce("ReduceMax", &flag, Some(axes), keepdim);
    let zero = cx.scalar(Lit::Float(0.0), Dtype::Float32)?;
    let has = cx.node("Greater", &[&any, &zero], vec![]);
    let nan = cx.scalar(Lit::Float(f64::NAN), c)?;
    Ok(cx.node("Where", &[&has, &nan, r], vec![]))
}

/// An int64 sum that ONNX Runtime computes exactly (its ReduceSum of
/// int64 goes through float64 and rounds past 2^53): a running sum along
/// each axis in turn, its last element kept.
fn exact_int_sum(cx: &mut EmitNode, x: &str, axes: &[i64], keepdim: bool) -> String {
    let mut v = x.to_string();
    let (start, end) = (cx.const_i64s(&[-1]), cx.const_i64s(&[i64::MAX]));
    for &a in axes {
        let axis = cx.const_i64(a);
        let run = cx.node("CumSum", &[&v, &axis], vec![]);
        let ax = cx.const_i64s(&[a]);
        v = cx.node("Slice", &[&run, &start, &end, &ax], vec![]);
    }
    if keepdim {
        v
    } else {
        cx.squeeze(&v, axes)
    }
}

/// An int64 product that ONNX Runtime computes exactly (its ReduceProd
/// of int64 rounds through float64 past 2^53): over each static axis the
/// line padded with ones to a power of two and halved, the halves
/// multiplied (wrapping, as torch's); a symbolic axis takes ReduceProd.
fn exact_int_prod(cx: &mut EmitNode, x: &str, axes: &[i64], sizes: &[Sym], keepdim: bool) -> Result<String> {
    let mut v = x.to_string();
    for &a in axes {
        let Some(mut n) = sizes[a as usize].as_int() else {
            v = cx.reduce("ReduceProd", &v, Some(&[a]), true);
            continue;
        };
        let ax = cx.const_i64s(&[a]);
        if n == 0 {
            v = cx.reduce("ReduceProd", &v, Some(&[a]), true);
            continue;
        }
        let width = (n as u64).next_power_of_two() as i64;
        if width != n {
            let mut pads = vec![0i64; 2 * sizes.len()];
            pads[sizes.len() + a as usize] = width - n;
            let pads = cx.const_i64s(&pads);
            let one = cx.scalar(Lit::Int(1), Dtype::Int64)?;
            v = cx.node("Pad", &[&v, &pads, &one], vec![]);
            n = width;
        }
        while n > 1 {
            let half = n / 2;
            let (s0, s1, s2) = (cx.const_i64s(&[0]), cx.const_i64s(&[half]), cx.const_i64s(&[n]));
            let lo = cx.node("Slice", &[&v, &s0, &s1, &ax], vec![]);
            let hi = cx.node("Slice", &[&v, &s1, &s2, &ax], vec![]);
            v = cx.node("Mul", &[&lo, &hi], vec![]);
            n = half;
        }
    }
    Ok(if keepdim { v } else { cx.squeeze(&v, axes) })
}

/// Longest line a float16 or bfloat16 product is written out step by step.
const HALF_PROD_MAX: i64 = 1024;

/// A float16 or bfloat16 product as torch's CPU kernel computes it: one
/// element after another, each running product rounded to the dtype (a
/// product that overflows or underflows there stays inf or 0, whatever
/// follows): the line's elements sliced out and multiplied in turn, in
/// `c` and rounded to `half` after each.
fn half_prod(cx: &mut EmitNode, x: &str, (axes, sizes, keepdim): (&[i64], &[Sym], bool), (c, half): (Dtype, Dtype)) -> Result<String> {
    let static_sizes: Option<Vec<i64>> = sizes.iter().map(Sym::as_int).collect();
    let Some(dims) = static_sizes else {
        return Err(Error::unsupported(format!(
            "a {} product over symbolic sizes (torch rounds each step's product to {0}, which ir2onnx writes out step by step)",
            half.torch_name()
        )));
    };
    // one line: the reduced axis, or everything flattened
    let (line, axis, n) = if axes.len() == 1 {
        (x.to_string(), axes[0], dims[axes[0] as usize])
    } else {
        let all = cx.reshape_const(x, &[-1])?;
        (all, 0, dims.iter().product())
    };
    if n == 0 {
        return Ok(cx.reduce("ReduceProd", x, Some(axes), keepdim));
    }
    if n > HALF_PROD_MAX {
        return Err(Error::unsupported(format!(
            "a {} product over {n} elements (torch rounds each step's product to {0}, which ir2onnx writes out step by step up to {HALF_PROD_MAX})",
            half.torch_name()
        )));
    }
    let ax = cx.const_i64s(&[axis]);
    let mut acc: Option<String> = None;
    for i in 0..n {
        let (a, b) = (cx.const_i64s(&[i]), cx.const_i64s(&[i + 1]));
        let v = cx.node("Slice", &[&line, &a, &b, &ax], vec![]);
        acc = Some(match acc {
            None => v,
            Some(p) => {
                let m = cx.node("Mul", &[&p, &v], vec![]);
                let h = cx.cast(&m, c, half)?;
                cx.cast(&h, half, c)?
            }
        });
    }
    let p = acc.expect("a line of at least one element");
    if axes.len() == 1 {
        Ok(if keepdim { p } else { cx.squeeze(&p, axes) })
    } else if keepdim {
        cx.reshape_const(&p, &vec![1; dims.len()])
    } else {
        cx.reshape_const(&p, &[])
    }
}

/// any/all: a max/min over the values as 0/1.
fn any_all(cx: &mut EmitNode, op: &str) -> Result<()> {
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
fn var_std(cx: &mut EmitNode, sqrt: bool) -> Result<()> {
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
        // divided by max(0, N - correction), as torch's: nothing, or no
        // more than the correction, gives NaN (0 / 0)
        let n = match count.iter().map(Sym::as_int).collect::<Option<Vec<i64>>>() {
            Some(v) => cx.scalar(Lit::Float((v.iter().product::<i64>() as f64 - correction).max(0.0)), c)?,
            None => {
                let sizes = cx.sizes(&count)?;
                let p = cx.reduce("ReduceProd", &sizes, None, false);
                let pf = cx.cast(&p, Dtype::Int64, c)?;
                let k = cx.scalar(Lit::Float(correction), c)?;
                let d = cx.node("Sub", &[&pf, &k], vec![]);
                let zero = cx.scalar(Lit::Float(0.0), c)?;
                cx.node("Max", &[&d, &zero], vec![])
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

fn max_min_dim(cx: &mut EmitNode, reduce_op: &str, arg_op: &str) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dim = normalize_dim(cx.int("dim")?, rank)? as i64;
    let keepdim = cx.opt_bool("keepdim")?.unwrap_or(false);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let v = cx.reduce(reduce_op, &xs, Some(&[dim]), keepdim);
    let v = if c.is_floating() {
        nan_where_any(cx, &xs, &v, c, &[dim], keepdim)?
    } else {
        v
    };
    let v = cx.cast(&v, c, out)?;
    cx.set(0, v);
    if cx.out_used(1) {
        let i = arg_node(cx, arg_op, &xs, c, dim, keepdim)?;
        cx.set(1, i);
    }
    Ok(())
}

/// ArgMax or ArgMin along `axis` as torch gives it: the first NaN's place
/// where the line holds one (ONNX Runtime's skip NaN), else the first
/// extreme's.
fn arg_node(cx: &mut EmitNode, op: &str, x: &str, c: Dtype, axis: i64, keepdim: bool) -> Result<String> {
    let attrs = || vec![attr_int("axis", axis), attr_int("keepdims", keepdim as i64)];
    let i = cx.node(op, &[x], attrs());
    if !c.is_floating() {
        return Ok(i);
    }
    let isnan = cx.node("IsNaN", &[x], vec![]);
    let flag = cx.cast(&isnan, Dtype::Bool, Dtype::Float32)?;
    let first_nan = cx.node("ArgMax", &[&flag], attrs());
    let any = cx.reduce("ReduceMax", &flag, Some(&[axis]), keepdim);
    let zero = cx.scalar(Lit::Float(0.0), Dtype::Float32)?;
    let has = cx.node("Greater", &[&any, &zero], vec![]);
    Ok(cx.node("Where", &[&has, &first_nan, &i], vec![]))
}

fn arg_max_min(cx: &mut EmitNode, op: &str) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let keepdim = cx.opt_bool("keepdim")?.unwrap_or(false);
    let c = cx.compute(meta.dtype);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let y = match cx.opt_int("dim")? {
        Some(d) => arg_node(cx, op, &xs, c, normalize_dim(d, rank)? as i64, keepdim)?,
        None => {
            let flat = cx.reshape_const(&xs, &[-1])?;
            let i = arg_node(cx, op, &flat, c, 0, false)?;
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

fn cumsum(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let dim = normalize_dim(cx.int("dim")?, meta.sizes.len())? as i64;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let axis = cx.const_i64(dim);
        Ok(cx.node("CumSum", &[x, &axis], vec![]))
    })
}

fn topk(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dim = normalize_dim(cx.opt_int("dim")?.unwrap_or(-1), rank)? as i64;
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
    cx: &mut EmitNode,
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
fn sort(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let rank = meta.sizes.len();
    let dim = normalize_dim(cx.opt_int("dim")?.unwrap_or(-1), rank)? as i64;
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

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::SUM, |cx| reduce(cx, "ReduceSum", None)),
    (aten::SUM_DIM_INTLIST, |cx| reduce(cx, "ReduceSum", Some("dim"))),
    (aten::MEAN, |cx| reduce(cx, "ReduceMean", None)),
    (aten::MEAN_DIM, |cx| reduce(cx, "ReduceMean", Some("dim"))),
    (aten::PROD, |cx| reduce(cx, "ReduceProd", None)),
    (aten::PROD_DIM_INT, |cx| reduce(cx, "ReduceProd", Some("dim"))),
    (aten::AMAX, |cx| reduce(cx, "ReduceMax", Some("dim"))),
    (aten::AMIN, |cx| reduce(cx, "ReduceMin", Some("dim"))),
    (aten::MAX, |cx| reduce(cx, "ReduceMax", None)),
    (aten::MIN, |cx| reduce(cx, "ReduceMin", None)),
    (aten::LOGSUMEXP, |cx| reduce(cx, "ReduceLogSumExp", Some("dim"))),
    (aten::ANY, |cx| any_all(cx, "ReduceMax")),
    (aten::ANY_DIM, |cx| any_all(cx, "ReduceMax")),
    (aten::ANY_DIMS, |cx| any_all(cx, "ReduceMax")),
    (aten::ALL, |cx| any_all(cx, "ReduceMin")),
    (aten::ALL_DIM, |cx| any_all(cx, "ReduceMin")),
    (aten::ALL_DIMS, |cx| any_all(cx, "ReduceMin")),
    (aten::VAR_CORRECTION, |cx| var_std(cx, false)),
    (aten::STD_CORRECTION, |cx| var_std(cx, true)),
    (aten::VAR_DIM, |cx| var_std(cx, false)),
    (aten::STD_DIM, |cx| var_std(cx, true)),
    (aten::MAX_DIM, |cx| max_min_dim(cx, "ReduceMax", "ArgMax")),
    (aten::MIN_DIM, |cx| max_min_dim(cx, "ReduceMin", "ArgMin")),
    (aten::ARGMAX, |cx| arg_max_min(cx, "ArgMax")),
    (aten::ARGMIN, |cx| arg_max_min(cx, "ArgMin")),
    (aten::CUMSUM, cumsum),
    (aten::TOPK, topk),
    (aten::SORT, sort),
    (aten::ARGSORT, sort),
];
