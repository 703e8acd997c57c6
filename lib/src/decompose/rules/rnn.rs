//! Recurrent layers (LSTM, GRU, RNN) and their cells: the decomposition rules.

use crate::ir::op::aten;
use super::*;

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
fn lstm(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let cell = match a.0.target.name.as_str() {
        "lstm" => Cell::Lstm,
        "gru" => Cell::Gru,
        "rnn_tanh" => Cell::Tanh,
        _ => Cell::Relu,
    };
    let x = a.tensor("input")?;
    let hx = if cell == Cell::Lstm {
        a.tensors("hx")?
    } else {
        vec![a.tensor("hx")?]
    };
    let params = a.tensors("params")?;
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
    // A symbolic sequence length does not come from torch.export (2.15
    // specialises it in aten.lstm's own decomposition); a recurrence over a
    // dynamic length arrives as higher_order.scan, which every tool runs.
    let seq = em.static_dim(
        input,
        0,
        "a recurrent layer (unrolled over the sequence; write a dynamic-length recurrence with scan)",
    )?;
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
            cat_op(em, &dir_out, 2, None)?
        } else {
            dir_out[0]
        };
        if dropout != 0.0 && train && layer + 1 < layers {
            let sizes = em.sizes(input)?;
            let meta = em.meta_like(input, dtype, sizes)?;
            input = em.op(
                aten::DROPOUT,
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
            let gates = binary(em, aten::ADD_TENSOR, hh, xt, dtype, None)?;
            let g = chunk_op(em, gates, 4, 1)?;
            let i = unary(em, aten::SIGMOID, g[0])?;
            let f = unary(em, aten::SIGMOID, g[1])?;
            let cc = unary(em, aten::TANH, g[2])?;
            let o = unary(em, aten::SIGMOID, g[3])?;
            let fc = binary(em, aten::MUL_TENSOR, f, c.unwrap(), dtype, None)?;
            let ic = binary(em, aten::MUL_TENSOR, i, cc, dtype, None)?;
            let cn = binary(em, aten::ADD_TENSOR, fc, ic, dtype, None)?;
            let tc = unary(em, aten::TANH, cn)?;
            h = binary(em, aten::MUL_TENSOR, o, tc, dtype, None)?;
            if let Some(w) = w_hr {
                h = linear_op(em, h, w, None)?;
            }
            c = Some(cn);
        }
        Cell::Gru => {
            let gi = chunk_op(em, xt, 3, 1)?;
            let gh = chunk_op(em, hh, 3, 1)?;
            let rs = binary(em, aten::ADD_TENSOR, gi[0], gh[0], dtype, None)?;
            let r = unary(em, aten::SIGMOID, rs)?;
            let zs = binary(em, aten::ADD_TENSOR, gi[1], gh[1], dtype, None)?;
            let z = unary(em, aten::SIGMOID, zs)?;
            let rh = binary(em, aten::MUL_TENSOR, r, gh[2], dtype, None)?;
            let ns = binary(em, aten::ADD_TENSOR, gi[2], rh, dtype, None)?;
            let n = unary(em, aten::TANH, ns)?;
            // h' = n + z * (h - n)
            let hn = binary(em, aten::SUB_TENSOR, h, n, dtype, None)?;
            let zh = binary(em, aten::MUL_TENSOR, z, hn, dtype, None)?;
            h = binary(em, aten::ADD_TENSOR, n, zh, dtype, None)?;
        }
        Cell::Tanh | Cell::Relu => {
            let s = binary(em, aten::ADD_TENSOR, hh, xt, dtype, None)?;
            let act = if cell == Cell::Tanh {
                aten::TANH
            } else {
                aten::RELU
            };
            h = unary(em, act, s)?;
        }
    }
    Ok((h, c))
}

/// `lstm_cell`, `gru_cell`, `rnn_tanh_cell`, `rnn_relu_cell`: one step.
fn rnn_cell(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let cell = match a.0.target.name.as_str() {
        "lstm_cell" => Cell::Lstm,
        "gru_cell" => Cell::Gru,
        "rnn_tanh_cell" => Cell::Tanh,
        _ => Cell::Relu,
    };
    let x = a.tensor("input")?;
    if em.rank(x)? != 2 {
        return Err(Error::unsupported(format!(
            "node {}: {} on unbatched input",
            a.0.name, a.0.target
        )));
    }
    let (h, c) = if cell == Cell::Lstm {
        let hx = a.tensors("hx")?;
        (hx[0], Some(hx[1]))
    } else {
        (a.tensor("hx")?, None)
    };
    let dtype = em.dtype(x)?;
    let xt = linear_op(em, x, a.tensor("w_ih")?, a.opt_tensor("b_ih")?)?;
    let hh = linear_op(em, h, a.tensor("w_hh")?, a.opt_tensor("b_hh")?)?;
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
        aten::CHUNK,
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
        aten::SELECT_INT,
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
        aten::LINEAR,
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
        aten::STACK,
        vec![
            ("tensors", Argument::Tensors(xs.to_vec())),
            ("dim", Argument::Int(dim as i64)),
        ],
        meta,
    )
}

rules! {
    aten::GRU_INPUT => [aten::SELECT_INT, aten::LINEAR, aten::CHUNK, aten::SIGMOID, aten::TANH, aten::MUL_TENSOR, aten::ADD_TENSOR, aten::SUB_TENSOR, aten::STACK, aten::CAT, aten::TRANSPOSE_INT] lstm;
    aten::RNN_TANH_INPUT => [aten::SELECT_INT, aten::LINEAR, aten::TANH, aten::ADD_TENSOR, aten::STACK, aten::CAT, aten::TRANSPOSE_INT] lstm;
    aten::RNN_RELU_INPUT => [aten::SELECT_INT, aten::LINEAR, aten::RELU, aten::ADD_TENSOR, aten::STACK, aten::CAT, aten::TRANSPOSE_INT] lstm;
    aten::LSTM_INPUT => [aten::SELECT_INT, aten::LINEAR, aten::CHUNK, aten::SIGMOID, aten::TANH, aten::MUL_TENSOR, aten::ADD_TENSOR, aten::STACK, aten::CAT, aten::TRANSPOSE_INT, aten::DROPOUT] lstm;
    aten::LSTM_CELL => [aten::LINEAR, aten::CHUNK, aten::SIGMOID, aten::TANH, aten::MUL_TENSOR, aten::ADD_TENSOR] rnn_cell;
    aten::GRU_CELL => [aten::LINEAR, aten::CHUNK, aten::SIGMOID, aten::TANH, aten::MUL_TENSOR, aten::ADD_TENSOR, aten::SUB_TENSOR] rnn_cell;
    aten::RNN_TANH_CELL => [aten::LINEAR, aten::TANH, aten::ADD_TENSOR] rnn_cell;
    aten::RNN_RELU_CELL => [aten::LINEAR, aten::RELU, aten::ADD_TENSOR] rnn_cell;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
