//! Indexing, gathering and scattering (index, index_put, gather, scatter, embedding, ...): the ONNX emitters.

use crate::ir::op::aten;
use super::*;

fn masked_fill(cx: &mut EmitNode) -> Result<()> {
    let x = cx.operand("self")?;
    let mask = cx.operand("mask")?;
    let value = cx.operand("value")?;
    where_op(cx, &mask, &value, &x)
}

fn index_select(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let rank = cx.rank("self")?;
    let dim = normalize_dim(cx.int("dim")?, rank)? as i64;
    let index = cx.input("index")?;
    let y = cx.node("Gather", &[&x, &index], vec![attr_int("axis", dim)]);
    cx.set(0, y);
    Ok(())
}

/// Int64 index tensors broadcast together and stacked along a new last
/// axis (GatherND's and ScatterND's indices), and their broadcast shape.
fn stack_indices(cx: &mut EmitNode, idx64: &[String]) -> (String, String) {
    let mut sum = idx64[0].clone();
    for i in &idx64[1..] {
        sum = cx.node("Add", &[&sum, i], vec![]);
    }
    let bshape = cx.shape(&sum);
    let mut stacked = Vec::new();
    for i in idx64 {
        let e = cx.node("Expand", &[i, &bshape], vec![]);
        stacked.push(cx.unsqueeze(&e, &[-1]));
    }
    (cx.concat(&stacked, -1), bshape)
}

/// Advanced indexing. One index tensor is a Gather; several are broadcast
/// together, stacked and read with GatherND after moving the indexed dims
/// to the front; adjacent indexed dims then move back to where torch puts
/// them (non-adjacent ones lead, as in torch).
fn index(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let rank = cx.rank("self")?;
    let indices = cx.optional_tensors("indices")?;
    let given: Vec<(usize, String, Dtype)> = indices
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.as_ref().map(|(n, m)| (i, n.clone(), m.dtype)))
        .collect();
    if let Some((pos, mask, d)) = given
        .iter()
        .find(|(_, _, d)| matches!(d, Dtype::Bool | Dtype::Uint8))
    {
        // `x[mask]`, the mask over x's leading dims: NonZero gives the
        // [k, n] coordinates of its true elements in row-major order (as
        // torch's nonzero), GatherND takes those rows; n is a dynamic dim.
        if given.len() != 1 || *pos != 0 {
            return Err(Error::unsupported(format!(
                "indexing with a {} mask other than alone over the leading dims (data-dependent shape)",
                d.torch_name()
            )));
        }
        let k = indices[0].as_ref().map_or(0, |(_, m)| m.sizes.len());
        if k == 0 || k > rank {
            return Err(Error::unsupported(format!(
                "indexing a tensor of rank {rank} with a {}-D {} mask",
                k,
                d.torch_name()
            )));
        }
        let nz = cx.node("NonZero", &[mask], vec![]);
        let coords = cx.transpose(&nz, &[1, 0]);
        let y = cx.node("GatherND", &[&x, &coords], vec![]);
        cx.set(0, y);
        return Ok(());
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
    let (nd, _) = stack_indices(cx, &idx64);
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

fn gather(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let rank = cx.rank("self")?;
    let dim = normalize_dim(cx.int("dim")?, rank)? as i64;
    let index = cx.input("index")?;
    let y = cx.node("GatherElements", &[&x, &index], vec![attr_int("axis", dim)]);
    cx.set(0, y);
    Ok(())
}

fn embedding(cx: &mut EmitNode) -> Result<()> {
    let w = cx.input("weight")?;
    let idx = cx.input("indices")?;
    let y = cx.node("Gather", &[&w, &idx], vec![attr_int("axis", 0)]);
    cx.set(0, y);
    Ok(())
}

fn trilu(cx: &mut EmitNode, upper: bool) -> Result<()> {
    let (x, meta) = first(cx)?;
    let k = sym_arg(cx, "diagonal", 0)?;
    let k = cx.reshape_const(&k, &[])?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        Ok(cx.node("Trilu", &[x, &k], vec![attr_int("upper", upper as i64)]))
    })
}

fn one_hot(cx: &mut EmitNode) -> Result<()> {
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

fn nonzero(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    // (as bools, which every runtime's NonZero takes: a cast to bool is
    // "not zero", NaN included, as torch's)
    let x = cx.cast(&x, meta.dtype, Dtype::Bool)?;
    let nz = cx.node("NonZero", &[&x], vec![]);
    let y = cx.transpose(&nz, &[1, 0]);
    cx.set(0, y);
    Ok(())
}

/// What a scatter reads: `self` in the compute dtype `c`, the index, the
/// updates (src, or the value expanded) in `c`, and the dim.
struct Scatter {
    x: String,
    index: String,
    updates: String,
    dim: i64,
    c: Dtype,
}

fn scatter_operands(cx: &mut EmitNode) -> Result<Scatter> {
    let rank = cx.rank("self")?;
    let dim = normalize_dim(cx.int("dim")?, rank)? as i64;
    let index = cx.input("index")?;
    let c = cx.compute(cx.out_dtype(0)?);
    let x = cx.input_as("self", c)?;
    let updates = if cx.has("src") {
        let src = cx.input_as("src", c)?;
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
    Ok(Scatter {
        x,
        index,
        updates,
        dim,
        c,
    })
}

/// ScatterElements of `updates` into `data` at the scatter's index.
fn scatter_elements(
    cx: &mut EmitNode,
    s: &Scatter,
    data: &str,
    updates: &str,
    reduction: &str,
) -> String {
    cx.node(
        "ScatterElements",
        &[data, &s.index, updates],
        vec![attr_int("axis", s.dim), attr_str("reduction", reduction)],
    )
}

/// Binds the result, cast from the compute dtype to the output's.
fn set_scatter_result(cx: &mut EmitNode, s: &Scatter, y: &str) -> Result<()> {
    let y = cx.cast(y, s.c, cx.out_dtype(0)?)?;
    cx.set(0, y);
    Ok(())
}

/// scatter / scatter_add as ScatterElements.
fn scatter(cx: &mut EmitNode) -> Result<()> {
    let reduction = match cx.node.target.name.as_str() {
        "scatter_add" => "add",
        _ => "none",
    };
    let s = scatter_operands(cx)?;
    let y = scatter_elements(cx, &s, &s.x, &s.updates, reduction);
    set_scatter_result(cx, &s, &y)
}

/// The lowest (or highest) value of a dtype: the identity of max (min).
fn extreme(dtype: Dtype, highest: bool) -> Lit {
    let (lo, hi) = match dtype {
        Dtype::Bool => (0, 1),
        Dtype::Uint8 => (0, u8::MAX as i64),
        Dtype::Int8 => (i8::MIN as i64, i8::MAX as i64),
        Dtype::Int16 => (i16::MIN as i64, i16::MAX as i64),
        Dtype::Int32 => (i32::MIN as i64, i32::MAX as i64),
        Dtype::Int64 => (i64::MIN, i64::MAX),
        _ => {
            return Lit::Float(if highest {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            })
        }
    };
    Lit::Int(if highest { hi } else { lo })
}

/// scatter_reduce.two: ScatterElements with the reduction. Without
/// include_self, the positions an index points at start from the
/// reduction's identity instead of `self`, so only src values meet there
/// (torch fills them the same way). mean is the sum divided by how many
/// values met at each position (self counting one); where none did, the
/// count is taken as 1, which leaves `self`. ScatterElements reduces by
/// max and min from opset 18 only: before, amax and amin are computed
/// densely ([`scatter_extreme_dense`]).
fn scatter_reduce(cx: &mut EmitNode) -> Result<()> {
    let include_self = cx.opt_bool("include_self")?.unwrap_or(true);
    let reduce = cx.string("reduce")?;
    let s = scatter_operands(cx)?;
    let (reduction, identity) = match reduce.as_str() {
        "sum" | "mean" => ("add", Lit::Int(0)),
        "prod" => ("mul", Lit::Int(1)),
        "amax" => ("max", extreme(s.c, false)),
        "amin" => ("min", extreme(s.c, true)),
        other => {
            return Err(Error::bad_input(format!(
                "scatter_reduce reduce={other:?}: must be sum, prod, mean, amax or amin"
            )))
        }
    };
    // How many src values land on each position (int64, self's shape).
    let counts = if reduce == "mean" || !include_self {
        let ones = cx.shape(&s.index);
        let ones = constant_of_shape(cx, &ones, Lit::Int(1), Dtype::Int64)?;
        let zeros = cx.shape(&s.x);
        let zeros = constant_of_shape(cx, &zeros, Lit::Int(0), Dtype::Int64)?;
        Some(scatter_elements(cx, &s, &zeros, &ones, "add"))
    } else {
        None
    };
    let base = match &counts {
        Some(n) if !include_self => {
            let zero = cx.const_i64(0);
            let hit = cx.node("Greater", &[n, &zero], vec![]);
            let identity = cx.scalar(identity, s.c)?;
            cx.node("Where", &[&hit, &identity, &s.x], vec![])
        }
        _ => s.x.clone(),
    };
    let y = if matches!(reduction, "max" | "min") && cx.opset() < 18 {
        scatter_extreme_dense(cx, &s, &base, reduction)?
    } else {
        scatter_elements(cx, &s, &base, &s.updates, reduction)
    };
    let y = match counts {
        Some(n) if reduce == "mean" => scatter_mean(cx, &s, &y, &n, include_self)?,
        _ => y,
    };
    set_scatter_result(cx, &s, &y)
}

/// A scatter's sums divided by the counts (plus one for self), at least 1;
/// integers divide with floor, as torch does.
fn scatter_mean(
    cx: &mut EmitNode,
    s: &Scatter,
    sum: &str,
    counts: &str,
    include_self: bool,
) -> Result<String> {
    let extra = cx.const_i64(include_self as i64);
    let one = cx.const_i64(1);
    let n = cx.node("Add", &[counts, &extra], vec![]);
    let n = cx.node("Max", &[&n, &one], vec![]);
    if s.c.is_floating() {
        let n = cx.cast(&n, Dtype::Int64, s.c)?;
        return Ok(cx.node("Div", &[sum, &n], vec![]));
    }
    let sum = cx.cast(sum, s.c, Dtype::Float64)?;
    let n = cx.cast(&n, Dtype::Int64, Dtype::Float64)?;
    let q = cx.node("Div", &[&sum, &n], vec![]);
    let q = cx.node("Floor", &[&q], vec![]);
    cx.cast(&q, Dtype::Float64, s.c)
}

/// amax / amin by comparison, for opsets without ScatterElements' max and
/// min: position j along the dim takes the extreme of the updates whose
/// index is j. A mask `index == j`, with a new axis for j before the dim,
/// selects the updates (the identity elsewhere); reduced over the index's
/// own dim, that is each position's extreme over the index's extent.
/// Combined with `base` there, it is written back with ScatterElements at
/// indices 0..size (distinct, so without a reduction).
fn scatter_extreme_dense(cx: &mut EmitNode, s: &Scatter, base: &str, reduction: &str) -> Result<String> {
    let (reduce_op, pick) = match reduction {
        "max" => ("ReduceMax", "Max"),
        _ => ("ReduceMin", "Min"),
    };
    let rank = cx.rank("self")?;
    let d = s.dim;
    // 0..size(dim), shaped to lie along `dim` in a tensor of `rank` dims
    let along = |cx: &mut EmitNode, rank: usize| -> Result<String> {
        let shape = cx.shape(base);
        let at = cx.const_i64(d);
        let size = cx.node("Gather", &[&shape, &at], vec![attr_int("axis", 0)]);
        let (zero, one) = (cx.const_i64(0), cx.const_i64(1));
        let r = cx.node("Range", &[&zero, &size, &one], vec![]);
        let dims: Vec<i64> = (0..rank as i64)
            .map(|k| if k == d { -1 } else { 1 })
            .collect();
        cx.reshape_const(&r, &dims)
    };
    let positions = along(cx, rank + 1)?;
    let index = cx.unsqueeze(&s.index, &[d]);
    let mask = cx.node("Equal", &[&index, &positions], vec![]);
    let updates = cx.unsqueeze(&s.updates, &[d]);
    let identity = cx.scalar(extreme(s.c, reduction == "min"), s.c)?;
    let picked = cx.node("Where", &[&mask, &updates, &identity], vec![]);
    let extremes = cx.reduce(reduce_op, &picked, Some(&[d + 1]), false);
    // over the index's extent (all of `dim`): combined with base, written back
    let extent = cx.shape(&extremes);
    let zeros = cx.const_i64s(&vec![0; rank]);
    let part = cx.node("Slice", &[base, &zeros, &extent], vec![]);
    let combined = cx.node(pick, &[&extremes, &part], vec![]);
    let positions = along(cx, rank)?;
    let at = cx.node("Expand", &[&positions, &extent], vec![]);
    Ok(cx.node(
        "ScatterElements",
        &[base, &at, &combined],
        vec![attr_int("axis", d)],
    ))
}

/// slice_scatter / select_scatter: src written over a strided range of
/// `dim`, as ScatterElements with the range's indices.
fn slice_scatter(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let rank = meta.sizes.len();
    let dim = normalize_dim(cx.opt_int("dim")?.unwrap_or(0), rank)? as i64;
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

/// The index tensors of an `indices` list as int64, each with the dim it
/// indexes and its rank. A boolean (or uint8) mask over k dims stands for
/// the k rows of its NonZero, one index tensor per dim, as in torch.
fn int_indices(
    cx: &mut EmitNode,
    indices: &[Option<(String, &TensorMeta)>],
) -> Result<Vec<(usize, String, usize)>> {
    let mut dim = 0;
    let mut out = Vec::new();
    for t in indices {
        let Some((name, m)) = t else {
            dim += 1;
            continue;
        };
        let k = m.sizes.len();
        if !matches!(m.dtype, Dtype::Bool | Dtype::Uint8) {
            out.push((dim, cx.cast(name, m.dtype, Dtype::Int64)?, k));
            dim += 1;
            continue;
        }
        if k == 0 {
            return Err(Error::unsupported("index_put with a 0-d boolean mask"));
        }
        let nz = cx.node("NonZero", &[name], vec![]);
        for j in 0..k {
            let row = cx.const_i64(j as i64);
            let row = cx.node("Gather", &[&nz, &row], vec![attr_int("axis", 0)]);
            out.push((dim + j, row, 1));
        }
        dim += k;
    }
    Ok(out)
}

/// A boolean mask over the leading dims with one value, not accumulated:
/// a Where. `None` when the node is not that.
fn index_put_mask_fill(cx: &mut EmitNode, xs: &str, vs: &str, c: Dtype) -> Result<Option<String>> {
    let indices = cx.optional_tensors("indices")?;
    let one_value = cx
        .meta("values")?
        .static_sizes()
        .is_some_and(|s| s.iter().product::<i64>() == 1);
    let accumulate = cx.opt_bool("accumulate")?.unwrap_or(false);
    let (Some(Some((mask, mm))), rest) = (indices.first(), indices.get(1..).unwrap_or_default())
    else {
        return Ok(None);
    };
    if mm.dtype != Dtype::Bool || rest.iter().any(Option::is_some) || !one_value || accumulate {
        return Ok(None);
    }
    let v = cx.reshape_const(vs, &[])?;
    let extra: Vec<i64> = (mm.sizes.len() as i64..cx.rank("self")? as i64).collect();
    let m = if extra.is_empty() {
        mask.clone()
    } else {
        cx.unsqueeze(mask, &extra)
    };
    let y = cx.node("Where", &[&m, &v, xs], vec![]);
    cx.cast(&y, c, cx.out_dtype(0)?).map(Some)
}

/// index_put: a boolean mask over the leading dims with one value is a
/// Where; otherwise a ScatterND (add for accumulate) of the index tensors
/// ([`int_indices`], broadcast and stacked) into `self` with the indexed
/// dims moved first. The values are laid out as torch's `self[indices]`:
/// the broadcast index dims first, or, when the indexed dims are adjacent
/// and not at the front, in their place; they are expanded to that shape,
/// and in the second case the index dims are moved first too.
fn index_put(cx: &mut EmitNode) -> Result<()> {
    let rank = cx.rank("self")?;
    let accumulate = cx.opt_bool("accumulate")?.unwrap_or(false);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.input_as("self", c)?;
    let vs = cx.input_as("values", c)?;
    if let Some(y) = index_put_mask_fill(cx, &xs, &vs, c)? {
        cx.set(0, y);
        return Ok(());
    }
    let indices = cx.optional_tensors("indices")?;
    let given = int_indices(cx, &indices)?;
    if given.is_empty() {
        return Err(Error::unsupported("index_put without an index tensor"));
    }
    let positions: Vec<usize> = given.iter().map(|g| g.0).collect();
    let k = given.len();
    let adjacent = positions.windows(2).all(|w| w[1] == w[0] + 1);
    let in_place = adjacent && positions[0] > 0;
    let mut perm: Vec<i64> = positions.iter().map(|p| *p as i64).collect();
    perm.extend((0..rank as i64).filter(|d| !positions.contains(&(*d as usize))));
    let identity = perm.iter().enumerate().all(|(i, p)| *p == i as i64);
    let xt = if identity {
        xs
    } else {
        cx.transpose(&xs, &perm)
    };
    let idx64: Vec<String> = given.iter().map(|g| g.1.clone()).collect();
    let (nd, bshape) = stack_indices(cx, &idx64);
    // The dims not indexed, in order.
    let xt_shape = cx.shape(&xt);
    let rest = slice_1d(cx, &xt_shape, k as i64, i64::MAX);
    let updates = if in_place {
        let p = positions[0] as i64;
        let nb = given.iter().map(|g| g.2).max().unwrap_or(1) as i64;
        let (pre, post) = (slice_1d(cx, &rest, 0, p), slice_1d(cx, &rest, p, i64::MAX));
        let vshape = cx.concat(&[pre, bshape, post], 0);
        let v = cx.node("Expand", &[&vs, &vshape], vec![]);
        let post_n = (rank - k) as i64 - p;
        let first: Vec<i64> = (p..p + nb)
            .chain(0..p)
            .chain(p + nb..p + nb + post_n)
            .collect();
        cx.transpose(&v, &first)
    } else {
        let ushape = cx.concat(&[bshape, rest], 0);
        cx.node("Expand", &[&vs, &ushape], vec![])
    };
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

/// Elements `start..end` of a 1-D value.
fn slice_1d(cx: &mut EmitNode, x: &str, start: i64, end: i64) -> String {
    let (s, e) = (cx.const_i64s(&[start]), cx.const_i64s(&[end]));
    cx.node("Slice", &[x, &s, &e], vec![])
}

/// masked_scatter: the positions where the mask (broadcast to self) holds
/// take source's elements in row-major order. A position's element of the
/// flattened source is how many mask positions before it hold (an
/// exclusive CumSum); Gather reads them, and Where keeps self elsewhere.
fn masked_scatter(cx: &mut EmitNode) -> Result<()> {
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.input_as("self", c)?;
    let source = cx.input_as("source", c)?;
    let flat_source = cx.reshape_const(&source, &[-1])?;
    let shape = cx.shape(&xs);
    let mask = cx.input_as("mask", Dtype::Bool)?;
    let mask = cx.node("Expand", &[&mask, &shape], vec![]);
    let flat_mask = cx.reshape_const(&mask, &[-1])?;
    let counts = cx.cast(&flat_mask, Dtype::Bool, Dtype::Int64)?;
    let axis = cx.const_i64(0);
    let before = cx.node("CumSum", &[&counts, &axis], vec![attr_int("exclusive", 1)]);
    let zero = cx.const_i64(0);
    let at = cx.node("Where", &[&flat_mask, &before, &zero], vec![]);
    let taken = cx.node("Gather", &[&flat_source, &at], vec![attr_int("axis", 0)]);
    let taken = cx.node("Reshape", &[&taken, &shape], vec![]);
    let y = cx.node("Where", &[&mask, &taken, &xs], vec![]);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// `_embedding_bag`: the sum (mode 0), mean (1) or maximum (2) of the
/// weight rows of each bag. A bag is a run of `indices` starting at its
/// offset; entries equal to `padding_idx` count for nothing. Each index's
/// bag comes from comparing its position with the offsets, and a
/// `[bags, indices]` membership matrix then sums (MatMul) or masks (max)
/// the gathered rows. The bookkeeping outputs (offset2bag, bag_size,
/// max_indices) are converted only when nothing reads them.
fn embedding_bag(cx: &mut EmitNode) -> Result<()> {
    for (i, what) in [(1, "offset2bag"), (2, "bag_size"), (3, "max_indices")] {
        if cx.out_used(i) {
            return Err(Error::unsupported(format!(
                "_embedding_bag output {what} is read by the graph"
            )));
        }
    }
    if cx.rank("indices")? != 1 {
        return Err(Error::unsupported("_embedding_bag with 2-D indices"));
    }
    let mode = cx.opt_int("mode")?.unwrap_or(0);
    let padding_idx = cx.opt_int("padding_idx")?.unwrap_or(-1);
    let include_last = cx.opt_bool("include_last_offset")?.unwrap_or(false);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let weight = cx.input("weight")?;
    let weight = cx.cast(&weight, cx.dtype("weight")?, c)?;
    let indices = cx.input("indices")?;
    let indices = cx.cast(&indices, cx.dtype("indices")?, Dtype::Int64)?;
    let offsets = cx.input("offsets")?;
    let offsets = cx.cast(&offsets, cx.dtype("offsets")?, Dtype::Int64)?;
    let offsets = if include_last {
        let (start, end, axis) = (
            cx.const_i64s(&[0]),
            cx.const_i64s(&[-1]),
            cx.const_i64s(&[0]),
        );
        cx.node("Slice", &[&offsets, &start, &end, &axis], vec![])
    } else {
        offsets
    };
    // Positions 0..L and bags 0..B, as columns and rows.
    let zero = cx.const_i64(0);
    let one = cx.const_i64(1);
    let count = |cx: &mut EmitNode, x: &str| {
        let shape = cx.node("Shape", &[x], vec![]);
        cx.squeeze(&shape, &[0])
    };
    let l = count(cx, &indices);
    let positions = cx.node("Range", &[&zero, &l, &one], vec![]);
    let b = count(cx, &offsets);
    let bags = cx.node("Range", &[&zero, &b, &one], vec![]);
    // bag of each position: how many offsets lie at or before it, less one
    let (offsets_row, positions_col) =
        (cx.unsqueeze(&offsets, &[0]), cx.unsqueeze(&positions, &[1]));
    let started = cx.node("LessOrEqual", &[&offsets_row, &positions_col], vec![]);
    let started = cx.cast(&started, Dtype::Bool, Dtype::Int64)?;
    let started = cx.reduce("ReduceSum", &started, Some(&[1]), false);
    let bag_of = cx.node("Sub", &[&started, &one], vec![]);
    let (bags_col, bag_of_row) = (cx.unsqueeze(&bags, &[1]), cx.unsqueeze(&bag_of, &[0]));
    let mut member = cx.node("Equal", &[&bags_col, &bag_of_row], vec![]);
    if padding_idx >= 0 {
        let pad = cx.const_i64(padding_idx);
        let is_pad = cx.node("Equal", &[&indices, &pad], vec![]);
        let kept = cx.node("Not", &[&is_pad], vec![]);
        let kept = cx.unsqueeze(&kept, &[0]);
        member = cx.node("And", &[&member, &kept], vec![]);
    }
    let mut rows = cx.node("Gather", &[&weight, &indices], vec![attr_int("axis", 0)]);
    if let Some(psw) = cx.opt_input("per_sample_weights")? {
        let psw = cx.cast(&psw, cx.dtype("per_sample_weights")?, c)?;
        let psw = cx.unsqueeze(&psw, &[1]);
        rows = cx.node("Mul", &[&rows, &psw], vec![]);
    }
    let member_f = cx.cast(&member, Dtype::Bool, c)?;
    let y = match mode {
        0 | 1 => {
            let sum = cx.node("MatMul", &[&member_f, &rows], vec![]);
            if mode == 0 {
                sum
            } else {
                let n = cx.reduce("ReduceSum", &member_f, Some(&[1]), true);
                let floor = cx.scalar(Lit::Float(1.0), c)?;
                let n = cx.node("Max", &[&n, &floor], vec![]);
                cx.node("Div", &[&sum, &n], vec![])
            }
        }
        2 => {
            let lowest = cx.scalar(Lit::Float(f64::NEG_INFINITY), c)?;
            let m3 = cx.unsqueeze(&member, &[2]);
            let r3 = cx.unsqueeze(&rows, &[0]);
            let masked = cx.node("Where", &[&m3, &r3, &lowest], vec![]);
            let max = cx.reduce("ReduceMax", &masked, Some(&[1]), false);
            // an empty bag is zeros, as in torch
            let any = cx.reduce("ReduceMax", &member_f, Some(&[1]), true);
            let zero_c = cx.scalar(Lit::Float(0.0), c)?;
            let nonempty = cx.node("Greater", &[&any, &zero_c], vec![]);
            cx.node("Where", &[&nonempty, &max, &zero_c], vec![])
        }
        other => {
            return Err(Error::bad_input(format!(
                "_embedding_bag mode {other}: must be 0 (sum), 1 (mean) or 2 (max)"
            )))
        }
    };
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::MASKED_FILL_SCALAR, masked_fill),
    (aten::MASKED_FILL_TENSOR, masked_fill),
    (aten::INDEX_SELECT, index_select),
    (aten::INDEX_TENSOR, index),
    (aten::_UNSAFE_INDEX_TENSOR, index),
    (aten::GATHER, gather),
    (aten::EMBEDDING, embedding),
    (aten::ONE_HOT, one_hot),
    (aten::NONZERO, nonzero),
    (aten::SCATTER_SRC, scatter),
    (aten::SCATTER_VALUE, scatter),
    (aten::SCATTER_ADD, scatter),
    (aten::SCATTER_REDUCE_TWO, scatter_reduce),
    (aten::SLICE_SCATTER, slice_scatter),
    (aten::SELECT_SCATTER, slice_scatter),
    (aten::INDEX_PUT, index_put),
    (aten::MASKED_SCATTER, masked_scatter),
    (aten::TRIL, |cx| trilu(cx, false)),
    (aten::TRIU, |cx| trilu(cx, true)),
    (aten::_EMBEDDING_BAG, embedding_bag),
];
