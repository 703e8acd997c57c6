//! Pooling: max, average and adaptive, 1-D to 3-D: the ONNX emitters.

use crate::ir::op::aten;
use super::*;

// pooling

/// A pooling op's spatial rank, kernel and stride (a single value or an
/// empty stride expanded as torch does).
fn pool_window(cx: &EmitNode) -> Result<(usize, Vec<i64>, Vec<i64>)> {
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

/// torch's ceil mode as explicit end padding with ceil_mode 0: ONNX
/// rounds up without dropping a last window that starts in the right
/// padding, as torch does, so its output (and its shape inference) can
/// disagree with torch's. The end padding is what makes floor rounding
/// give torch's output sizes; `None` (ceil_mode 1 then) where the sizes
/// are symbolic, no padding does it, or `limit` (the declared padding, for
/// an average that counts padding) would be passed.
fn ceil_as_pads(
    cx: &EmitNode,
    n: usize,
    (kernel, stride, padding, dilation): (&[i64], &[i64], &[i64], &[i64]),
    limit: bool,
) -> Result<Option<Vec<i64>>> {
    let input = last_static(&cx.meta("self")?.sizes, n, "pooling").ok();
    let output = last_static(&cx.out_meta(0)?.sizes, n, "pooling").ok();
    let (Some(input), Some(output)) = (input, output) else {
        return Ok(None);
    };
    let mut ends = Vec::with_capacity(n);
    for j in 0..n {
        let span = dilation[j] * (kernel[j] - 1) + 1;
        let end = ((output[j] - 1) * stride[j] + span - input[j] - padding[j]).max(0);
        let floor = (input[j] + padding[j] + end - span).div_euclid(stride[j]) + 1;
        if floor != output[j] || (limit && end > padding[j]) {
            return Ok(None);
        }
        ends.push(end);
    }
    Ok(Some(ends))
}

fn max_pool(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let (n, kernel, stride) = pool_window(cx)?;
    let padding = spatial(cx, "padding", n, 0)?;
    let dilation = spatial(cx, "dilation", n, 1)?;
    let mut ceil = cx.opt_bool("ceil_mode")?.unwrap_or(false);
    let mut end = padding.clone();
    if ceil {
        if let Some(e) = ceil_as_pads(cx, n, (&kernel, &stride, &padding, &dilation), false)? {
            (ceil, end) = (false, e);
        }
    }
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let (xs, added) = batch(cx, &xs, meta.sizes.len(), n);
    let attrs = vec![
        attr_ints("kernel_shape", &kernel),
        attr_ints("strides", &stride),
        attr_ints("pads", &[padding, end].concat()),
        attr_ints("dilations", &dilation),
        attr_int("ceil_mode", ceil as i64),
    ];
    let want_indices = cx.out_count() > 1 && cx.out_used(1);
    let ys = cx.node_n("MaxPool", &[&xs], attrs.clone(), if want_indices { 2 } else { 1 });
    let plane: Vec<Sym> = meta.sizes[meta.sizes.len() - n..].to_vec();
    let (plane_shape, numel) = if want_indices {
        let s = cx.sizes(&plane)?;
        let numel = cx.reduce("ReduceProd", &s, None, false);
        (s, numel)
    } else {
        (String::new(), String::new())
    };
    let (mut y, mut idx) = (ys[0].clone(), ys.get(1).cloned());
    // A dequantized int8 holds no NaN (PT2E's scales are finite), and the
    // NaN handling would split the DequantizeLinear -> MaxPool ->
    // QuantizeLinear chain that ONNX Runtime runs as one int8 MaxPool (and
    // at opset 21 its QDQ propagation then types the zero point it adds
    // wrongly for int8: the session fails to load).
    let dequantized = cx.producer_op(&x) == Some("DequantizeLinear");
    if c.is_floating() && !dequantized {
        // torch's window takes a NaN (its last), ONNX Runtime's skips
        // it: where a window holds one, NaN and that NaN's place, from a
        // pool over each NaN's place in its plane (-1 elsewhere)
        let isnan = cx.node("IsNaN", &[&xs], vec![]);
        if want_indices {
            let zero = cx.const_i64(0);
            let one = cx.const_i64(1);
            let iota = cx.node("Range", &[&zero, &numel, &one], vec![]);
            let iota = cx.node("Reshape", &[&iota, &plane_shape], vec![]);
            let iota = cx.cast(&iota, Dtype::Int64, Dtype::Float64)?;
            let none = cx.scalar(Lit::Float(-1.0), Dtype::Float64)?;
            let z = cx.node("Where", &[&isnan, &iota, &none], vec![]);
            let zs = cx.node_n("MaxPool", &[&z], attrs, 2);
            let zero = cx.scalar(Lit::Float(0.0), Dtype::Float64)?;
            let has = cx.node("GreaterOrEqual", &[&zs[0], &zero], vec![]);
            let nan = cx.scalar(Lit::Float(f64::NAN), c)?;
            y = cx.node("Where", &[&has, &nan, &y], vec![]);
            idx = Some(cx.node("Where", &[&has, &zs[1], &ys[1]], vec![]));
        } else {
            let flag = cx.cast(&isnan, Dtype::Bool, Dtype::Float32)?;
            let any = cx.node("MaxPool", &[&flag], attrs);
            let zero = cx.scalar(Lit::Float(0.0), Dtype::Float32)?;
            let has = cx.node("Greater", &[&any, &zero], vec![]);
            let nan = cx.scalar(Lit::Float(f64::NAN), c)?;
            y = cx.node("Where", &[&has, &nan, &y], vec![]);
        }
    }
    let y = unbatch(cx, y, added);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    if let Some(idx) = idx {
        // ONNX indexes the whole tensor, torch each channel's plane.
        let idx = cx.node("Mod", &[&idx, &numel], vec![attr_int("fmod", 0)]);
        let idx = unbatch(cx, idx, added);
        cx.set(1, idx);
    }
    Ok(())
}

/// Windows of at most this many elements are summed one element after
/// another, in torch's order ([`window_sums`]); larger ones through
/// ONNX's AveragePool, whose order of summing differs (which shows only
/// where huge values absorb small ones).
const SEQUENTIAL_WINDOW_MAX: i64 = 256;

/// A global average pool of at most this many elements a window is summed
/// one element after another, as torch's mean sums a line shorter than
/// one vector of float32 (16 lanes); longer ones take its vectorised
/// order, which ReduceMean stands for (the sums agree but for the order
/// of rounding; `mean` converts the same way).
const GLOBAL_SEQUENTIAL_MAX: i64 = 16;

fn avg_pool(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let (n, kernel, stride) = pool_window(cx)?;
    let padding = spatial(cx, "padding", n, 0)?;
    let divisor = cx.opt_int("divisor_override")?;
    if divisor == Some(0) {
        return Err(Error::bad_input("avg_pool: divisor_override must not be 0"));
    }
    let mut ceil = cx.opt_bool("ceil_mode")?.unwrap_or(false);
    let include_pad = cx.opt_bool("count_include_pad")?.unwrap_or(true);
    let input = last_static(&meta.sizes, n, "avg_pool");
    let output = last_static(&cx.out_meta(0)?.sizes, n, "avg_pool");
    if let (Ok(input), Ok(output)) = (&input, &output) {
        if kernel.iter().product::<i64>() <= SEQUENTIAL_WINDOW_MAX {
            let window = Window { kernel: &kernel, stride: &stride, padding: &padding };
            return window_sums(cx, (&x, meta), window, (input, output), include_pad, divisor);
        }
    }
    if let Some(divisor) = divisor {
        let d = Divisor::Fixed(divisor);
        return avg_pool_sums(cx, (&x, meta), (&kernel, &stride, &padding), d);
    }
    let mut end = padding.clone();
    if ceil {
        let ones = vec![1; n];
        match ceil_as_pads(cx, n, (&kernel, &stride, &padding, &ones), include_pad)? {
            Some(e) => (ceil, end) = (false, e),
            // torch's last window overhangs the padding, and its divisor
            // counts the padding but not the overhang: sums over windows,
            // divided by torch's count per window
            None if include_pad && last_static(&meta.sizes, n, "").is_ok() => {
                let d = Divisor::CountPadding;
                return avg_pool_sums(cx, (&x, meta), (&kernel, &stride, &padding), d);
            }
            None => {}
        }
    }
    let attrs = vec![
        attr_ints("kernel_shape", &kernel),
        attr_ints("strides", &stride),
        attr_ints("pads", &[padding, end].concat()),
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

/// A pooling window: kernel, stride and (leading) padding per spatial dim.
struct Window<'a> {
    kernel: &'a [i64],
    stride: &'a [i64],
    padding: &'a [i64],
}

/// Average pooling as torch's CPU kernel computes it: each window's
/// elements summed one after another in row-major order (in float32 for
/// float32 and narrower, float64 for float64, wrapping int64 for
/// integers), divided by torch's count for the window (the padding
/// counted or not, or `divisor_override`; integers truncating). Each
/// kernel offset is one strided Slice of the zero-padded input, added in
/// turn.
fn window_sums(
    cx: &mut EmitNode,
    (x, meta): (&str, &TensorMeta),
    w: Window,
    (input, output): (&[i64], &[i64]),
    include_pad: bool,
    divisor: Option<i64>,
) -> Result<()> {
    let n = w.kernel.len();
    let out = cx.out_dtype(0)?;
    let c = if out.is_floating() { cx.compute(out) } else { Dtype::Int64 };
    // torch's divisor per output position, one dim at a time
    let mut counts = vec![1i64];
    for j in 0..n {
        let per: Vec<i64> = (0..output[j])
            .map(|o| {
                let start = o * w.stride[j] - w.padding[j];
                let end = (start + w.kernel[j]).min(input[j] + w.padding[j]);
                let inside = end.min(input[j]) - start.max(0);
                if include_pad { end - start } else { inside.max(0) }
            })
            .collect();
        counts = counts.iter().flat_map(|m| per.iter().map(move |c| m * c)).collect();
    }
    let rank = meta.sizes.len();
    let xs = cx.cast(x, meta.dtype, c)?;
    let (xs, added) = batch(cx, &xs, rank, n);
    let lead = rank + added as usize - n;
    let ends: Vec<i64> = (0..n)
        .map(|j| ((output[j] - 1) * w.stride[j] + w.kernel[j] - input[j] - w.padding[j]).max(0))
        .collect();
    let xp = if w.padding.iter().chain(&ends).any(|p| *p != 0) {
        let zeros = vec![0; lead];
        let pads = cx.const_i64s(&[zeros.clone(), w.padding.to_vec(), zeros, ends].concat());
        cx.node("Pad", &[&xs, &pads], vec![])
    } else {
        xs
    };
    let axes: Vec<i64> = (lead..lead + n).map(|a| a as i64).collect();
    let (axes, steps) = (cx.const_i64s(&axes), cx.const_i64s(w.stride));
    let mut sum: Option<String> = None;
    let volume = w.kernel.iter().product::<i64>();
    for flat in 0..volume {
        // the kernel offset, row-major
        let mut offset = vec![0i64; n];
        let mut rem = flat;
        for j in (0..n).rev() {
            offset[j] = rem % w.kernel[j];
            rem /= w.kernel[j];
        }
        let starts = cx.const_i64s(&offset);
        let stops: Vec<i64> = (0..n).map(|j| offset[j] + (output[j] - 1) * w.stride[j] + 1).collect();
        let stops = cx.const_i64s(&stops);
        let part = cx.node("Slice", &[&xp, &starts, &stops, &axes, &steps], vec![]);
        sum = Some(match sum {
            None => part,
            Some(s) => cx.node("Add", &[&s, &part], vec![]),
        });
    }
    let sum = sum.ok_or_else(|| Error::bad_input("avg_pool with an empty kernel"))?;
    let d = match divisor {
        Some(d) => cx.scalar(Lit::Int(d), c)?,
        None if counts.iter().all(|v| *v == counts[0]) => cx.scalar(Lit::Int(counts[0]), c)?,
        None if c.is_floating() => {
            let raw: Vec<u8> = counts.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
            let d = cx.constant(Dtype::Float32, output, raw)?;
            cx.cast(&d, Dtype::Float32, c)?
        }
        None => {
            let raw: Vec<u8> = counts.iter().flat_map(|v| v.to_le_bytes()).collect();
            cx.constant(Dtype::Int64, output, raw)?
        }
    };
    let y = cx.node("Div", &[&sum, &d], vec![]);
    let y = unbatch(cx, y, added);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// Adaptive average pooling as torch computes it: each output's window
/// summed in row-major order (a CumSum over the window flattened, its
/// last element), divided by its size, the windows concatenated.
/// `None` where the windows are too many to write one by one.
fn adaptive_avg_sums(
    cx: &mut EmitNode,
    x: &str,
    (input, output): (&[i64], &[i64]),
    rank: usize,
    c: Dtype,
) -> Result<Option<String>> {
    let n = input.len();
    let windows: i64 = output.iter().product();
    if windows > 1024 {
        return Ok(None);
    }
    let (xs, added) = batch(cx, x, rank, n);
    let lead = rank + added as usize - n;
    let axes: Vec<i64> = (lead..lead + n).map(|a| a as i64).collect();
    let axes = cx.const_i64s(&axes);
    let mut flat_shape = vec![0i64; lead];
    flat_shape.push(-1);
    let (last, end) = (cx.const_i64s(&[-1]), cx.const_i64s(&[i64::MAX]));
    let sum_axis = cx.const_i64(lead as i64);
    let lead_axis = cx.const_i64s(&[lead as i64]);
    let mut parts = Vec::new();
    for flat in 0..windows {
        let mut o = vec![0i64; n];
        let mut rem = flat;
        for j in (0..n).rev() {
            o[j] = rem % output[j];
            rem /= output[j];
        }
        let (lo, hi): (Vec<i64>, Vec<i64>) = (0..n)
            .map(|j| (o[j] * input[j] / output[j], ((o[j] + 1) * input[j] + output[j] - 1) / output[j]))
            .unzip();
        let size: i64 = lo.iter().zip(&hi).map(|(a, b)| b - a).product();
        let whole = lo.iter().all(|v| *v == 0) && hi.iter().zip(input).all(|(h, i)| h == i);
        let w = if whole {
            xs.clone()
        } else {
            let (a, b) = (cx.const_i64s(&lo), cx.const_i64s(&hi));
            cx.node("Slice", &[&xs, &a, &b, &axes], vec![])
        };
        // (0 copies a leading dim: no allowzero)
        let fs = cx.const_i64s(&flat_shape);
        let w = cx.node("Reshape", &[&w, &fs], vec![]);
        let run = cx.node("CumSum", &[&w, &sum_axis], vec![]);
        let s = cx.node("Slice", &[&run, &last, &end, &lead_axis], vec![]);
        let k = cx.scalar(Lit::Int(size), c)?;
        parts.push(cx.node("Div", &[&s, &k], vec![]));
    }
    let y = cx.concat(&parts, lead as i64);
    let mut shape = vec![0i64; lead];
    shape.extend_from_slice(output);
    let shape = cx.const_i64s(&shape);
    let y = cx.node("Reshape", &[&y, &shape], vec![]);
    Ok(Some(unbatch(cx, y, added)))
}

/// What an average divides each window's sum by.
enum Divisor {
    /// `divisor_override`.
    Fixed(i64),
    /// torch's count with `count_include_pad`: the window's extent, padding
    /// included, but not past the padding (a ceil-mode last window).
    CountPadding,
}

/// An average pool as torch computes it, from sums: each of torch's
/// windows sums what it covers of the input, divided by the `divisor`.
/// Padding adds nothing to a sum, so the input is padded with zeros:
/// `padding` on both sides and, in ceil mode, enough at the end that
/// torch's last window fits (its sizes are the output's). An AveragePool
/// over that, times the kernel's size, is then each window's sum.
fn avg_pool_sums(
    cx: &mut EmitNode,
    (x, meta): (&str, &TensorMeta),
    (kernel, stride, padding): (&[i64], &[i64], &[i64]),
    divisor: Divisor,
) -> Result<()> {
    let n = kernel.len();
    let input = last_static(&meta.sizes, n, "avg_pool from window sums")?;
    let output = last_static(&cx.out_meta(0)?.sizes, n, "avg_pool from window sums")?;
    let end: Vec<i64> = (0..n)
        .map(|j| {
            padding[j]
                + ((output[j] - 1) * stride[j] + kernel[j] - input[j] - 2 * padding[j]).max(0)
        })
        .collect();
    let rank = meta.sizes.len();
    let kernel_size = kernel.iter().product::<i64>() as f64;
    // per output position: torch's divisor (a constant over the output
    // plane, or one number)
    let counts: Option<Vec<f32>> = match divisor {
        Divisor::Fixed(_) => None,
        Divisor::CountPadding => {
            let mut map = vec![1f32];
            for j in 0..n {
                let per: Vec<i64> = (0..output[j])
                    .map(|o| {
                        let start = o * stride[j] - padding[j];
                        (start + kernel[j]).min(input[j] + padding[j]) - start
                    })
                    .collect();
                map = map
                    .iter()
                    .flat_map(|m| per.iter().map(move |c| m * *c as f32))
                    .collect();
            }
            Some(map)
        }
    };
    let scale = match divisor {
        Divisor::Fixed(d) => kernel_size / d as f64,
        Divisor::CountPadding => kernel_size,
    };
    elementwise(cx, x, meta.dtype, |cx, x, c| {
        let (xs, added) = batch(cx, x, rank, n);
        let lead = vec![0; rank + added as usize - n];
        let pads = cx.const_i64s(&[lead.clone(), padding.to_vec(), lead, end].concat());
        let padded = cx.node("Pad", &[&xs, &pads], vec![]);
        let mean = cx.node(
            "AveragePool",
            &[&padded],
            vec![
                attr_ints("kernel_shape", kernel),
                attr_ints("strides", stride),
            ],
        );
        let k = cx.scalar(Lit::Float(scale), c)?;
        let mut y = cx.node("Mul", &[&mean, &k], vec![]);
        if let Some(map) = &counts {
            let raw: Vec<u8> = map.iter().flat_map(|v| v.to_le_bytes()).collect();
            let d = cx.constant(Dtype::Float32, &output, raw)?;
            let d = cx.cast(&d, Dtype::Float32, c)?;
            y = cx.node("Div", &[&y, &d], vec![]);
        }
        Ok(unbatch(cx, y, added))
    })
}

/// The ONNX ops of one kind of adaptive pooling: over the whole plane,
/// over equal strided windows, and a reduction over one window's dim.
struct Adaptive {
    global: &'static str,
    pool: &'static str,
    reduce: &'static str,
}

const ADAPTIVE_AVG: Adaptive = Adaptive {
    global: "GlobalAveragePool",
    pool: "AveragePool",
    reduce: "ReduceMean",
};

const ADAPTIVE_MAX: Adaptive = Adaptive {
    global: "GlobalMaxPool",
    pool: "MaxPool",
    reduce: "ReduceMax",
};

/// Adaptive average or max pooling over the last `len(output_size)` dims:
/// a global pool for output size 1, a plain pool when every size divides,
/// otherwise torch's windows one by one ([`adaptive_windows`]). Only the
/// values of adaptive_max_pool convert: ONNX has no indices for windows of
/// unequal sizes, so a node whose indices are read is declined
/// (`DECLINES`) and lowered through its decomposition rule.
fn adaptive_pool(cx: &mut EmitNode, ops: &Adaptive) -> Result<()> {
    if cx.out_count() > 1 && cx.out_used(1) {
        return Err(Error::internal(format!(
            "{}: the indices output is read, and the emitter converts only the values",
            cx.node.target.name
        )));
    }
    let x = cx.input("self")?;
    let meta = cx.meta("self")?;
    let output = cx.ints("output_size")?;
    let n = output.len();
    let rank = meta.sizes.len();
    if rank <= n || output.iter().any(|o| *o <= 0) {
        return Err(Error::bad_input(format!(
            "adaptive pooling of a rank-{rank} tensor to {output:?}"
        )));
    }
    let input = last_static(&meta.sizes, n, "adaptive pooling");
    let mean = ops.reduce == "ReduceMean";
    // torch's CPU kernel takes the mean over the window dims for an output
    // of ones (a global pool), whose order of summing is one element
    // after another only for a window shorter than a vector: past that,
    // ReduceMean, as `mean` converts; other windows are summed in torch's
    // order
    let elements = input.as_ref().map_or(i64::MAX, |i| i.iter().product::<i64>());
    let global = output.iter().all(|o| *o == 1) && elements > GLOBAL_SEQUENTIAL_MAX;
    let sums = mean && !global;
    if let (true, Ok(input)) = (sums, &input) {
        // torch's order of summing: windows of one size as strided slices
        // (two nodes an element of the window), or each window by a
        // running sum (six nodes a window: a global pool's one window)
        let k: Vec<i64> = input.iter().zip(&output).map(|(i, o)| i / o).collect();
        let even = input.iter().zip(&output).all(|(i, o)| i % o == 0);
        let (elements, windows) = (k.iter().product::<i64>(), output.iter().product::<i64>());
        if even && elements <= SEQUENTIAL_WINDOW_MAX && elements <= 3 * windows {
            let zeros = vec![0; n];
            let window = Window { kernel: &k, stride: &k, padding: &zeros };
            return window_sums(cx, (&x, meta), window, (input, &output), true, None);
        }
    }
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        if let (true, Ok(input)) = (sums, &input) {
            // (or window by window)
            if let Some(y) = adaptive_avg_sums(cx, x, (input, &output), rank, c)? {
                return Ok(y);
            }
        }
        if mean && global {
            let axes: Vec<i64> = (rank - n..rank).map(|a| a as i64).collect();
            return Ok(cx.reduce("ReduceMean", x, Some(&axes), true));
        }
        let (xs, added) = batch(cx, x, rank, n);
        let input = match input.as_ref() {
            Ok(i) => Some(i.clone()),
            Err(_) if output.iter().all(|o| *o == 1) => None,
            // symbolic sizes pooled to other than 1: its error
            Err(_) => Some(last_static(&meta.sizes, n, "adaptive pooling")?),
        };
        let pool = |cx: &mut EmitNode, v: &str| -> String {
            match &input {
                None => cx.node(ops.global, &[v], vec![]),
                Some(_) if output.iter().all(|o| *o == 1) => cx.node(ops.global, &[v], vec![]),
                Some(input) if input.iter().zip(&output).all(|(i, o)| i % o == 0) => {
                    let k: Vec<i64> = input.iter().zip(&output).map(|(i, o)| i / o).collect();
                    cx.node(
                        ops.pool,
                        &[v],
                        vec![attr_ints("kernel_shape", &k), attr_ints("strides", &k)],
                    )
                }
                Some(input) => adaptive_windows(cx, v, (input, &output), ops.reduce),
            }
        };
        let mut y = pool(cx, &xs);
        if !mean && c.is_floating() {
            // torch's maximum of a window holding NaN is NaN; ONNX
            // Runtime's pools and ReduceMax skip it: a pool of the NaN
            // flags says which windows hold one
            let isnan = cx.node("IsNaN", &[&xs], vec![]);
            let flag = cx.cast(&isnan, Dtype::Bool, Dtype::Float32)?;
            let any = pool(cx, &flag);
            let zero = cx.scalar(Lit::Float(0.0), Dtype::Float32)?;
            let has = cx.node("Greater", &[&any, &zero], vec![]);
            let nan = cx.scalar(Lit::Float(f64::NAN), c)?;
            y = cx.node("Where", &[&has, &nan, &y], vec![]);
        }
        Ok(unbatch(cx, y, added))
    })
}

/// torch's adaptive windows over the last dims of `x`: window i of a dim
/// of size `len` pooled to `m` is [floor(i * len / m), ceil((i + 1) * len
/// / m)). Windows are boxes, so the mean (or maximum) over one is the mean
/// (maximum) of the means (maxima) along its last dim: the dims are pooled
/// one at a time, each window a Slice and a keepdims reduction, the
/// windows concatenated.
fn adaptive_windows(
    cx: &mut EmitNode,
    x: &str,
    (input, output): (&[i64], &[i64]),
    reduce: &str,
) -> String {
    let n = input.len();
    let mut y = x.to_string();
    for j in (0..n).rev() {
        let (len, m) = (input[j], output[j]);
        if len == m {
            continue;
        }
        let axis = j as i64 - n as i64;
        let axes = cx.const_i64s(&[axis]);
        let windows: Vec<String> = (0..m)
            .map(|i| {
                let starts = cx.const_i64s(&[i * len / m]);
                let ends = cx.const_i64s(&[((i + 1) * len + m - 1) / m]);
                let w = cx.node("Slice", &[&y, &starts, &ends, &axes], vec![]);
                cx.reduce(reduce, &w, Some(&[axis]), true)
            })
            .collect();
        y = cx.concat(&windows, axis);
    }
    y
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::MAX_POOL1D, max_pool),
    (aten::MAX_POOL2D, max_pool),
    (aten::MAX_POOL3D, max_pool),
    (aten::MAX_POOL2D_WITH_INDICES, max_pool),
    (aten::MAX_POOL3D_WITH_INDICES, max_pool),
    (aten::AVG_POOL1D, avg_pool),
    (aten::AVG_POOL2D, avg_pool),
    (aten::AVG_POOL3D, avg_pool),
    (aten::ADAPTIVE_AVG_POOL1D, |cx| adaptive_pool(cx, &ADAPTIVE_AVG)),
    (aten::ADAPTIVE_AVG_POOL2D, |cx| adaptive_pool(cx, &ADAPTIVE_AVG)),
    (aten::_ADAPTIVE_AVG_POOL2D, |cx| adaptive_pool(cx, &ADAPTIVE_AVG)),
    (aten::ADAPTIVE_AVG_POOL3D, |cx| adaptive_pool(cx, &ADAPTIVE_AVG)),
    (aten::_ADAPTIVE_AVG_POOL3D, |cx| adaptive_pool(cx, &ADAPTIVE_AVG)),
    (aten::ADAPTIVE_MAX_POOL1D, |cx| adaptive_pool(cx, &ADAPTIVE_MAX)),
    (aten::ADAPTIVE_MAX_POOL2D, |cx| adaptive_pool(cx, &ADAPTIVE_MAX)),
    (aten::ADAPTIVE_MAX_POOL3D, |cx| adaptive_pool(cx, &ADAPTIVE_MAX)),
];
