//! Shape ops that make new tensors (cat, split, flip, repeat, pad, ...) and views by shape (view, permute, expand, ...): the shape rules.

use crate::ir::op::aten;
use super::*;

fn numel(dims: &[Dim]) -> Option<i64> {
    dims.iter().try_fold(1i64, |n, d| d.map(|d| n.saturating_mul(d)))
}

/// view/reshape: at most one -1, no other negative size, and the element
/// count preserved.
fn view(site: &Site) -> Result<Vec<Out>> {
    let input = site.dims("self")?;
    let arg = if site.args.has("size") { "size" } else { "shape" };
    let mut sizes = site.sym_list(arg)?;
    let holes: Vec<usize> = (0..sizes.len()).filter(|i| sizes[*i] == Some(-1)).collect();
    if holes.len() > 1 {
        return Err(site.fail(arg, "has more than one -1"));
    }
    if let Some((i, n)) = sizes.iter().enumerate().find_map(|(i, s)| match s {
        Some(n) if *n < -1 => Some((i, *n)),
        _ => None,
    }) {
        return Err(site.fail(&format!("{arg}[{i}]"), format!("is {n}, must be >= -1")));
    }
    let known: Option<i64> = sizes
        .iter()
        .filter(|s| **s != Some(-1))
        .try_fold(1i64, |n, d| d.map(|d| n.saturating_mul(d)));
    match (numel(&input), known, holes.first()) {
        (Some(total), Some(k), Some(&hole)) => {
            if k == 0 || total % k != 0 {
                return Err(site.fail(
                    arg,
                    format!("{} does not divide the {total} elements of the input", show(&sizes)),
                ));
            }
            sizes[hole] = Some(total / k);
        }
        (Some(total), Some(k), None) if total != k => {
            return Err(site.fail(
                arg,
                format!("{} holds {k} elements, the input {total}", show(&sizes)),
            ));
        }
        (_, _, Some(&hole)) => sizes[hole] = None,
        _ => {}
    }
    Ok(vec![Out::dims(sizes)])
}

/// permute: `dims` is a permutation of the input's dims.
fn permute(site: &Site) -> Result<Vec<Out>> {
    let input = site.dims("self")?;
    let perm = site.args.ints("dims")?;
    if perm.len() != input.len() {
        return Err(site.fail(
            "dims",
            format!("has {} entries for a tensor of rank {}", perm.len(), input.len()),
        ));
    }
    let mut seen = vec![false; input.len()];
    let mut out = Vec::new();
    for p in &perm {
        let i = site.dim_index("dims", *p, input.len())?;
        if std::mem::replace(&mut seen[i], true) {
            return Err(site.fail("dims", format!("{perm:?} repeats dim {p}")));
        }
        out.push(input[i]);
    }
    Ok(vec![Out::dims(out)])
}

/// transpose (and swapaxes, whose dims are `axis0` and `axis1`).
fn transpose(site: &Site) -> Result<Vec<Out>> {
    let mut dims = site.dims("self")?;
    let (d0, d1) = if site.args.has("axis0") { ("axis0", "axis1") } else { ("dim0", "dim1") };
    let a = site.dim_index(d0, site.args.int(d0)?, dims.len())?;
    let b = site.dim_index(d1, site.args.int(d1)?, dims.len())?;
    if !dims.is_empty() {
        dims.swap(a, b);
    }
    Ok(vec![Out::dims(dims)])
}

/// expand: as many sizes as dims or more; each kept dim is 1 or equal.
fn expand(site: &Site) -> Result<Vec<Out>> {
    let input = site.dims("self")?;
    let sizes = site.sym_list("size")?;
    if sizes.len() < input.len() {
        return Err(site.fail(
            "size",
            format!("has {} sizes for a tensor of rank {}", sizes.len(), input.len()),
        ));
    }
    let lead = sizes.len() - input.len();
    let mut out = Vec::new();
    for (i, s) in sizes.iter().enumerate() {
        let have = if i >= lead { input[i - lead] } else { None };
        out.push(match (s, have) {
            (Some(-1), _) if i < lead => {
                return Err(site.fail(&format!("size[{i}]"), "is -1 for a new dim"))
            }
            (Some(-1), h) => h,
            (Some(n), _) if *n < 0 => {
                return Err(site.fail(&format!("size[{i}]"), format!("is {n}, must be >= -1")))
            }
            (Some(n), Some(h)) if i >= lead && h != 1 && h != *n => {
                return Err(site.fail(
                    &format!("size[{i}]"),
                    format!("is {n}, but the input's dim is {h} (only a 1 expands)"),
                ))
            }
            (s, _) => *s,
        });
    }
    Ok(vec![Out::dims(out)])
}

/// cat: same rank (1-D empty tensors aside), equal dims but the one joined.
fn cat(site: &Site) -> Result<Vec<Out>> {
    let parts: Vec<Vec<Dim>> = site
        .args
        .tensors("tensors")?
        .into_iter()
        .map(|v| site.dims_of(v))
        .collect::<Result<_>>()?;
    let parts: Vec<&Vec<Dim>> = parts
        .iter()
        .filter(|p| !(p.len() == 1 && p[0] == Some(0)))
        .collect();
    let Some(first) = parts.first() else {
        return Ok(vec![]);
    };
    let d = site.dim_index("dim", site.args.opt_int("dim")?.unwrap_or(0), first.len())?;
    let mut out = (*first).clone();
    for (k, p) in parts.iter().enumerate().skip(1) {
        if p.len() != first.len() {
            return Err(site.fail(
                "tensors",
                format!("[{k}] has rank {}, the first has {}", p.len(), first.len()),
            ));
        }
        for i in 0..p.len() {
            if i == d {
                out[i] = match (out[i], p[i]) {
                    (Some(a), Some(b)) => Some(a + b),
                    _ => None,
                };
            } else if let (Some(a), Some(b)) = (first[i], p[i]) {
                if a != b {
                    return Err(site.fail(
                        "tensors",
                        format!("[{k}] has {b} in dim {i}, the first {a} (only dim {d} may differ)"),
                    ));
                }
            }
        }
    }
    Ok(vec![Out::dims(out)])
}

/// split_with_sizes (and split.sizes): the sizes add up to the dim.
fn split_with_sizes(site: &Site) -> Result<Vec<Out>> {
    let input = site.dims("self")?;
    let d = site.dim_index("dim", site.args.opt_int("dim")?.unwrap_or(0), input.len())?;
    let arg = if site.args.has("split_sizes") { "split_sizes" } else { "split_size" };
    let sizes = site.sym_list(arg)?;
    if let Some((i, n)) = sizes.iter().enumerate().find_map(|(i, s)| s.filter(|n| *n < 0).map(|n| (i, n))) {
        return Err(site.fail(&format!("{arg}[{i}]"), format!("is {n}, must be >= 0")));
    }
    if let (Some(sum), Some(have)) = (
        sizes.iter().try_fold(0i64, |t, s| s.map(|s| t + s)),
        input.get(d).copied().flatten(),
    ) {
        if sum != have {
            return Err(site.fail(
                arg,
                format!("{} add up to {sum}, dim {d} is {have}", show(&sizes)),
            ));
        }
    }
    Ok(sizes
        .iter()
        .map(|s| {
            let mut o = input.clone();
            if let Some(x) = o.get_mut(d) {
                *x = *s;
            }
            Out::dims(o)
        })
        .collect())
}

/// slice: `dim` in range, a positive step.
fn slice(site: &Site) -> Result<Vec<Out>> {
    let input = site.dims("self")?;
    let d = site.dim_index("dim", site.args.opt_int("dim")?.unwrap_or(0), input.len())?;
    let step = site.sym_int("step")?.unwrap_or(1);
    if step <= 0 {
        return Err(site.fail("step", format!("is {step}, must be > 0")));
    }
    let mut out = input.clone();
    let n = input.get(d).copied().flatten();
    // absent: from 0, to the end; symbolic: unknown
    let start = if site.args.has("start") { site.sym_int("start")? } else { Some(0) };
    let end = if site.args.has("end") { site.sym_int("end")? } else { n };
    if let Some(x) = out.get_mut(d) {
        *x = match (n, start, end) {
            (Some(n), Some(s), Some(e)) => {
                let clamp = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(n) };
                Some(((clamp(e) - clamp(s)).max(0) + step - 1) / step)
            }
            _ => None,
        };
    }
    Ok(vec![Out::dims(out)])
}

/// select: `dim` in range, `index` within the dim.
fn select(site: &Site) -> Result<Vec<Out>> {
    let mut dims = site.dims("self")?;
    if dims.is_empty() {
        return Err(site.fail("self", "is 0-d: there is no dim to select from"));
    }
    let d = site.dim_index("dim", site.args.int("dim")?, dims.len())?;
    if let (Some(i), Some(n)) = (site.sym_int("index")?, dims[d]) {
        if i < -n || i >= n {
            return Err(site.fail("index", format!("is {i}, out of range for dim {d} of size {n}")));
        }
    }
    dims.remove(d);
    Ok(vec![Out::dims(dims)])
}

fn unsqueeze(site: &Site) -> Result<Vec<Out>> {
    let mut dims = site.dims("self")?;
    let d = site.dim_index("dim", site.args.int("dim")?, dims.len() + 1)?;
    dims.insert(d, Some(1));
    Ok(vec![Out::dims(dims)])
}

fn squeeze(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    let listed: Vec<usize> = match site.args.arg("dim") {
        Argument::None => (0..dims.len()).collect(),
        _ => site
            .args
            .ints("dim")?
            .iter()
            .map(|d| site.dim_index("dim", *d, dims.len()))
            .collect::<Result<_>>()?,
    };
    let out = dims
        .iter()
        .enumerate()
        .filter(|(i, d)| !(listed.contains(i) && **d == Some(1)))
        .map(|(_, d)| *d)
        .collect();
    Ok(vec![Out::dims(out)])
}

fn flatten(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    if dims.is_empty() {
        return Ok(vec![Out::dims(vec![Some(1)])]);
    }
    let a = site.dim_index("start_dim", site.args.opt_int("start_dim")?.unwrap_or(0), dims.len())?;
    let b = site.dim_index("end_dim", site.args.opt_int("end_dim")?.unwrap_or(-1), dims.len())?;
    if a > b {
        return Err(site.fail("start_dim", format!("{a} comes after end_dim {b}")));
    }
    let mut out = dims[..a].to_vec();
    out.push(numel(&dims[a..=b]));
    out.extend_from_slice(&dims[b + 1..]);
    Ok(vec![Out::dims(out)])
}

/// unflatten: `dim` in range, `sizes` (one -1 at most) that multiply to it.
fn unflatten(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    let d = site.dim_index("dim", site.args.int("dim")?, dims.len())?;
    let mut sizes = site.sym_list("sizes")?;
    let holes = sizes.iter().filter(|s| **s == Some(-1)).count();
    if holes > 1 {
        return Err(site.fail("sizes", "has more than one -1"));
    }
    let known = sizes
        .iter()
        .filter(|s| **s != Some(-1))
        .try_fold(1i64, |n, s| s.map(|s| n * s));
    if let (Some(n), Some(k)) = (dims.get(d).copied().flatten(), known) {
        if holes == 1 && (k == 0 || n % k != 0) || holes == 0 && n != k {
            return Err(site.fail(
                "sizes",
                format!("{} do not make the {n} of dim {d}", show(&sizes)),
            ));
        }
        if let Some(h) = sizes.iter_mut().find(|s| **s == Some(-1)) {
            *h = Some(n / k);
        }
    }
    let mut out = dims[..d].to_vec();
    out.extend(sizes);
    out.extend_from_slice(&dims[d + 1..]);
    Ok(vec![Out::dims(out)])
}

/// constant_pad_nd: an even number of pads, at most two per dim, negative
/// pads that cut no more than the dim holds, sizes that stay >= 0.
fn constant_pad(site: &Site) -> Result<Vec<Out>> {
    let mut dims = site.dims("self")?;
    let pad = site.sym_list("pad")?;
    if pad.len() % 2 != 0 || pad.len() / 2 > dims.len() {
        return Err(site.fail(
            "pad",
            format!("has {} values for a tensor of rank {}: an even number, two per dim at most", pad.len(), dims.len()),
        ));
    }
    let r = dims.len();
    for (k, pair) in pad.chunks(2).enumerate() {
        let d = r - 1 - k;
        dims[d] = match (dims[d], pair[0], pair[1]) {
            (Some(n), Some(a), Some(b)) => {
                // Negative pads first cut the dim (torch narrows), each
                // within what is there, then positive ones grow it.
                let cut = a.min(0).saturating_add(b.min(0));
                if n.saturating_add(cut) < 0 {
                    return Err(site.fail(
                        "pad",
                        format!("{} cuts more than dim {d} of size {n} holds (torch: narrow(): length must be non-negative)", show(&pad)),
                    ));
                }
                let m = n.saturating_add(a).saturating_add(b);
                if m < 0 {
                    return Err(site.fail("pad", format!("{} makes dim {d} of size {n} negative", show(&pad))));
                }
                Some(m)
            }
            _ => None,
        };
    }
    Ok(vec![Out::dims(dims)])
}

/// repeat: at least one count per dim, none negative.
fn repeat(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    let reps = site.sym_list("repeats")?;
    if reps.len() < dims.len() {
        return Err(site.fail(
            "repeats",
            format!("has {} counts for a tensor of rank {}", reps.len(), dims.len()),
        ));
    }
    if let Some((i, n)) = reps.iter().enumerate().find_map(|(i, s)| s.filter(|n| *n < 0).map(|n| (i, n))) {
        return Err(site.fail(&format!("repeats[{i}]"), format!("is {n}, must be >= 0")));
    }
    let lead = reps.len() - dims.len();
    let out = reps
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let have = if i >= lead { dims[i - lead] } else { Some(1) };
            match (r, have) {
                (Some(r), Some(h)) => Some(r * h),
                _ => None,
            }
        })
        .collect();
    Ok(vec![Out::dims(out)])
}

/// flip: distinct dims in range.
fn flip(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    let mut seen = vec![false; dims.len().max(1)];
    for d in site.args.ints("dims")? {
        let i = site.dim_index("dims", d, dims.len())?;
        if std::mem::replace(&mut seen[i], true) {
            return Err(site.fail("dims", format!("names dim {d} twice")));
        }
    }
    Ok(vec![Out::dims(dims)])
}

/// t: a tensor of rank 2 at most, transposed.
fn t(site: &Site) -> Result<Vec<Out>> {
    let mut dims = site.dims("self")?;
    if dims.len() > 2 {
        return Err(site.fail("self", format!("has rank {}, t takes 2 at most", dims.len())));
    }
    dims.reverse();
    Ok(vec![Out::dims(dims)])
}

/// split.Tensor: chunks of `split_size` (the last one shorter) along `dim`.
fn split(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    let d = site.dim_index("dim", site.args.opt_int("dim")?.unwrap_or(0), dims.len())?;
    let Some(size) = site.sym_int("split_size")? else {
        return Ok(vec![]);
    };
    let n = dims.get(d).copied().flatten();
    if size < 0 || (size == 0 && n.is_some_and(|n| n > 0)) {
        return Err(site.fail("split_size", format!("is {size}, must be > 0")));
    }
    let Some(n) = n else { return Ok(vec![]) };
    let mut out = Vec::new();
    let mut at = 0;
    while at < n || (n == 0 && out.is_empty()) {
        let mut o = dims.clone();
        o[d] = Some(size.min(n - at));
        out.push(Out::dims(o));
        at += size.max(1);
    }
    Ok(out)
}

/// reflection/replication pads over the last `n` dims: two pads per dim;
/// a reflection pad shorter than its dim; sizes that stay positive.
fn mode_pad(site: &Site, n: usize, reflect: bool) -> Result<Vec<Out>> {
    let mut dims = site.dims("self")?;
    let pad = site.sym_list("padding")?;
    if pad.len() != 2 * n || dims.len() < n {
        return Err(site.fail(
            "padding",
            format!("has {} values for {n} padded dims of a tensor of rank {}", pad.len(), dims.len()),
        ));
    }
    let r = dims.len();
    for (k, pair) in pad.chunks(2).enumerate() {
        let d = r - 1 - k;
        if let (Some(size), Some(a), Some(b)) = (dims[d], pair[0], pair[1]) {
            if reflect && (a >= size || b >= size) {
                return Err(site.fail(
                    "padding",
                    format!("{} reflects dim {d} of size {size}: each pad must be smaller", show(&pad)),
                ));
            }
            if size + a + b <= 0 {
                return Err(site.fail("padding", format!("{} leaves dim {d} of size {size} empty", show(&pad))));
            }
            dims[d] = Some(size + a + b);
        } else {
            dims[d] = None;
        }
    }
    Ok(vec![Out::dims(dims)])
}

/// chunk: `chunks` > 0 pieces of `ceil(n / chunks)` along `dim`, the last
/// shorter, fewer when they run out (torch's split by that size; a dim of
/// 0 gives `chunks` empty pieces). A symbolic dim gives no count.
fn chunk(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    if dims.is_empty() {
        return Err(site.fail("self", "is 0-d: chunk takes a tensor of rank 1 or more"));
    }
    let chunks = site.args.int("chunks")?;
    if chunks <= 0 {
        return Err(site.fail("chunks", format!("is {chunks}, must be > 0")));
    }
    let d = site.dim_index("dim", site.args.opt_int("dim")?.unwrap_or(0), dims.len())?;
    let Some(n) = dims[d] else {
        return Ok(vec![]);
    };
    let size = (n + chunks - 1) / chunks;
    let piece = |len: i64| {
        let mut o = dims.clone();
        o[d] = Some(len);
        Out::dims(o)
    };
    if n == 0 {
        return Ok((0..chunks).map(|_| piece(0)).collect());
    }
    let mut out = Vec::new();
    let mut at = 0;
    while at < n {
        out.push(piece(size.min(n - at)));
        at += size;
    }
    Ok(out)
}

/// unbind: one tensor per index of `dim`, that dim removed. A symbolic dim
/// gives no count.
fn unbind(site: &Site) -> Result<Vec<Out>> {
    let mut dims = site.dims("self")?;
    if dims.is_empty() {
        return Err(site.fail("self", "is 0-d: there is no dim to unbind"));
    }
    let d = site.dim_index("dim", site.args.opt_int("dim")?.unwrap_or(0), dims.len())?;
    let Some(n) = dims.remove(d) else {
        return Ok(vec![]);
    };
    Ok((0..n).map(|_| Out::dims(dims.clone())).collect())
}

/// stack: one or more tensors of one shape; a new dim of their count.
fn stack(site: &Site) -> Result<Vec<Out>> {
    let parts: Vec<Vec<Dim>> = site
        .args
        .tensors("tensors")?
        .into_iter()
        .map(|v| site.dims_of(v))
        .collect::<Result<_>>()?;
    let Some(first) = parts.first() else {
        return Err(site.fail("tensors", "is empty: stack needs at least one tensor"));
    };
    let mut out = first.clone();
    for (k, p) in parts.iter().enumerate().skip(1) {
        if p.len() != first.len() {
            return Err(site.fail(
                "tensors",
                format!("[{k}] has rank {}, the first has {}", p.len(), first.len()),
            ));
        }
        for (i, (a, b)) in out.iter_mut().zip(p).enumerate() {
            match (*a, *b) {
                (Some(x), Some(y)) if x != y => {
                    return Err(site.fail(
                        "tensors",
                        format!("[{k}] has {y} in dim {i}, the first {x}: stacked tensors have one shape"),
                    ))
                }
                (None, y) => *a = y,
                _ => {}
            }
        }
    }
    let d = site.dim_index("dim", site.args.opt_int("dim")?.unwrap_or(0), first.len() + 1)?;
    out.insert(d, Some(parts.len() as i64));
    Ok(vec![Out::dims(out)])
}

/// roll: as many shifts as dims (or one shift and no dims: the flattened
/// tensor), dims in range; the input's shape.
fn roll(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    let shifts = site.sym_list("shifts")?;
    let along = match site.args.arg("dims") {
        Argument::None => vec![],
        _ => site.args.ints("dims")?,
    };
    if (along.is_empty() && shifts.len() != 1) || (!along.is_empty() && along.len() != shifts.len()) {
        return Err(site.fail(
            "shifts",
            format!("has {} values for {} dims (one shift per dim, or one and no dims)", shifts.len(), along.len()),
        ));
    }
    for d in along {
        site.dim_index("dims", d, dims.len())?;
    }
    Ok(vec![Out::dims(dims)])
}

/// pixel_shuffle / pixel_unshuffle: rank >= 3; channels (shuffle) or the
/// last two dims (unshuffle) divisible by the factor.
fn pixel_shuffle(site: &Site, up: bool) -> Result<Vec<Out>> {
    let mut dims = site.dims("self")?;
    let arg = if up { "upscale_factor" } else { "downscale_factor" };
    let f = site.args.int(arg)?;
    if f <= 0 {
        return Err(site.fail(arg, format!("is {f}, must be > 0")));
    }
    let r = dims.len();
    if r < 3 {
        return Err(site.fail("self", format!("has rank {r}, must be at least 3 (..., C, H, W)")));
    }
    let (c, h, w) = (r - 3, r - 2, r - 1);
    if up {
        if let Some(n) = dims[c] {
            if n % (f * f) != 0 {
                return Err(site.fail("self", format!("has {n} channels, not divisible by {f}*{f}")));
            }
        }
        dims[c] = dims[c].map(|n| n / (f * f));
        dims[h] = dims[h].map(|n| n * f);
        dims[w] = dims[w].map(|n| n * f);
    } else {
        for i in [h, w] {
            if let Some(n) = dims[i] {
                if n % f != 0 {
                    return Err(site.fail("self", format!("has {n} in dim {i}, not divisible by {f}")));
                }
            }
            dims[i] = dims[i].map(|n| n / f);
        }
        dims[c] = dims[c].map(|n| n * f * f);
    }
    Ok(vec![Out::dims(dims)])
}

/// expand_as: `self` expands to `other`'s shape.
fn expand_as(site: &Site) -> Result<Vec<Out>> {
    let input = site.dims("self")?;
    let target = site.dims("other")?;
    if target.len() < input.len() {
        return Err(site.fail(
            "other",
            format!("has rank {}, self {}: expand cannot drop dims", target.len(), input.len()),
        ));
    }
    let lead = target.len() - input.len();
    for (i, have) in input.iter().enumerate() {
        if let (Some(h), Some(t)) = (have, target[lead + i]) {
            if *h != 1 && *h != t {
                return Err(site.fail(
                    "other",
                    format!("has {t} in dim {}, self {h} (only a 1 expands)", lead + i),
                ));
            }
        }
    }
    Ok(vec![Out::dims(target)])
}

/// view_as / reshape_as: `other`'s shape, the element count preserved.
fn view_as(site: &Site) -> Result<Vec<Out>> {
    let input = site.dims("self")?;
    let target = site.dims("other")?;
    if let (Some(a), Some(b)) = (numel(&input), numel(&target)) {
        if a != b {
            return Err(site.fail(
                "other",
                format!("has {b} elements, self {a}: a view keeps the element count"),
            ));
        }
    }
    Ok(vec![Out::dims(target)])
}

/// narrow: `dim` in range, `start` and `length` within it.
fn narrow(site: &Site) -> Result<Vec<Out>> {
    let mut dims = site.dims("self")?;
    if dims.is_empty() {
        return Err(site.fail("self", "is 0-d: there is no dim to narrow"));
    }
    let d = site.dim_index("dim", site.args.int("dim")?, dims.len())?;
    let length = site.sym_int("length")?;
    if let Some(l) = length {
        if l < 0 {
            return Err(site.fail("length", format!("is {l}, must be >= 0")));
        }
    }
    if let (Some(n), Some(s), Some(l)) = (dims[d], site.sym_int("start")?, length) {
        let s = if s < 0 { s + n } else { s };
        if s < 0 || s + l > n {
            return Err(site.fail(
                "start",
                format!("{s} with length {l} runs out of dim {d} of size {n}"),
            ));
        }
    }
    dims[d] = length;
    Ok(vec![Out::dims(dims)])
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::VIEW, view), (aten::_UNSAFE_VIEW, view),
    (aten::RESHAPE, view), (aten::PERMUTE, permute),
    (aten::TRANSPOSE_INT, transpose), (aten::EXPAND, expand),
    (aten::CAT, cat), (aten::SPLIT_WITH_SIZES, split_with_sizes),
    (aten::SLICE_TENSOR, slice), (aten::SELECT_INT, select),
    (aten::UNSQUEEZE, unsqueeze), (aten::SQUEEZE_DIM, squeeze),
    (aten::SQUEEZE_DIMS, squeeze), (aten::SQUEEZE, squeeze),
    (aten::FLATTEN_USING_INTS, flatten), (aten::UNFLATTEN_INT, unflatten), (aten::CONSTANT_PAD_ND, constant_pad),
    (aten::REPEAT, repeat), (aten::FLIP, flip),
    (aten::T, t), (aten::SPLIT_TENSOR, split),
    (aten::REFLECTION_PAD1D, |s| mode_pad(s, 1, true)),
    (aten::REFLECTION_PAD2D, |s| mode_pad(s, 2, true)),
    (aten::REFLECTION_PAD3D, |s| mode_pad(s, 3, true)),
    (aten::REPLICATION_PAD1D, |s| mode_pad(s, 1, false)),
    (aten::REPLICATION_PAD2D, |s| mode_pad(s, 2, false)),
    (aten::REPLICATION_PAD3D, |s| mode_pad(s, 3, false)),
    (aten::SPLIT_SIZES, split_with_sizes), (aten::CHUNK, chunk),
    (aten::PAD, constant_pad), (aten::SWAPAXES, transpose), (aten::UNBIND_INT, unbind), (aten::STACK, stack),
    (aten::ROLL, roll), (aten::NARROW, narrow),
    (aten::PIXEL_SHUFFLE, |s| pixel_shuffle(s, true)),
    (aten::PIXEL_UNSHUFFLE, |s| pixel_shuffle(s, false)),
    (aten::EXPAND_AS, expand_as), (aten::VIEW_AS, view_as), (aten::RESHAPE_AS, view_as),
];
