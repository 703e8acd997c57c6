//! Recurrent layers (LSTM, GRU, RNN) and their cells: the shape rules.

use crate::ir::op::aten;
use super::*;

/// Gate blocks of a cell's weights: the rows of `w_ih` are `gates * hidden`.
fn gates(site: &Site) -> i64 {
    match site.node.target.name.as_str() {
        "lstm" | "lstm_cell" => 4,
        "gru" | "gru_cell" => 3,
        _ => 1,
    }
}

/// Two dims that must agree where both are known.
fn agree(site: &Site, arg: &str, what: &str, got: Dim, want: Dim) -> Result<()> {
    if let (Some(g), Some(w)) = (got, want) {
        if g != w {
            return Err(site.fail(arg, format!("has {what} {g}, expected {w}")));
        }
    }
    Ok(())
}

/// `lstm.input`, `gru.input`, `rnn_tanh.input`, `rnn_relu.input`: a 3-D
/// input (`(seq, batch, features)`, or batch first), initial states of
/// `(layers * directions, batch, hidden)`, and per layer and direction
/// `w_ih`, `w_hh` (and `b_ih`, `b_hh` with biases, `w_hr` with an LSTM's
/// projection). Outputs: the sequence of the last layer's states
/// (directions concatenated), then the final states, shaped as given.
fn recurrent(site: &Site) -> Result<Vec<Out>> {
    let lstm = site.node.target.name == "lstm";
    let input = site.dims("input")?;
    if input.len() != 3 {
        return Err(site.fail(
            "input",
            format!("has rank {}, a recurrent layer takes (sequence, batch, features)", input.len()),
        ));
    }
    let hx: Vec<Vec<Dim>> = if lstm {
        let hx = site.args.tensors("hx")?;
        if hx.len() != 2 {
            return Err(site.fail("hx", format!("has {} tensors, an LSTM takes (h0, c0)", hx.len())));
        }
        hx.iter().map(|v| site.dims_of(*v)).collect::<Result<_>>()?
    } else {
        vec![site.dims("hx")?]
    };
    for (k, h) in hx.iter().enumerate() {
        if h.len() != 3 {
            return Err(site.fail("hx", format!("[{k}] has rank {}, must be 3", h.len())));
        }
    }
    let layers = site.args.int("num_layers")?;
    if layers < 1 {
        return Err(site.fail("num_layers", format!("is {layers}, must be > 0")));
    }
    let dirs = if site.args.bool("bidirectional")? { 2 } else { 1 };
    let batch_first = site.args.bool("batch_first")?;
    let (seq, batch) = if batch_first {
        (input[1], input[0])
    } else {
        (input[0], input[1])
    };
    let params = site.args.tensors("params")?;
    let biases = site.args.bool("has_biases")?;
    let proj = lstm && matches!((hx[0][2], hx[1][2]), (Some(a), Some(b)) if a != b);
    let per = 2 + 2 * biases as usize + proj as usize;
    let want = per * (layers * dirs) as usize;
    if params.len() != want {
        return Err(site.fail(
            "params",
            format!("has {} tensors, expected {want} ({per} per layer and direction)", params.len()),
        ));
    }
    for (k, h) in hx.iter().enumerate() {
        let arg = format!("hx[{k}]");
        agree(site, &arg, "dim 0", h[0], Some(layers * dirs))?;
        agree(site, &arg, "batch", h[1], batch)?;
    }
    // The first layer's input weights read the input's features.
    let w_ih = site.dims_of(params[0])?;
    let hidden = if lstm { hx[1][2] } else { hx[0][2] };
    if w_ih.len() != 2 {
        return Err(site.fail("params", format!("[0] has rank {}, must be 2", w_ih.len())));
    }
    agree(site, "params", "[0] columns", w_ih[1], input[2])?;
    agree(site, "params", "[0] rows", w_ih[0], hidden.map(|h| h * gates(site)))?;
    let out_features = hx[0][2].map(|h| h * dirs);
    let output = if batch_first {
        vec![batch, seq, out_features]
    } else {
        vec![seq, batch, out_features]
    };
    let mut outs = vec![Out::dims(output)];
    outs.extend(hx.into_iter().map(Out::dims));
    Ok(outs)
}

/// `lstm_cell`, `gru_cell`, `rnn_tanh_cell`, `rnn_relu_cell`: an input of
/// `(batch, features)` (or `(features)`), states of `(batch, hidden)`,
/// `w_ih` of `(gates * hidden, features)`; the new states, shaped as given.
fn cell(site: &Site) -> Result<Vec<Out>> {
    let input = site.dims("input")?;
    if input.is_empty() || input.len() > 2 {
        return Err(site.fail("input", format!("has rank {}, must be 1 or 2", input.len())));
    }
    let hx: Vec<Vec<Dim>> = if site.node.target.name == "lstm_cell" {
        let hx = site.args.tensors("hx")?;
        if hx.len() != 2 {
            return Err(site.fail("hx", format!("has {} tensors, an LSTM cell takes (h, c)", hx.len())));
        }
        hx.iter().map(|v| site.dims_of(*v)).collect::<Result<_>>()?
    } else {
        vec![site.dims("hx")?]
    };
    let w_ih = site.dims("w_ih")?;
    if w_ih.len() != 2 {
        return Err(site.fail("w_ih", format!("has rank {}, must be 2", w_ih.len())));
    }
    agree(site, "w_ih", "columns", w_ih[1], input[input.len() - 1])?;
    for (k, h) in hx.iter().enumerate() {
        if h.len() != input.len() {
            return Err(site.fail(
                "hx",
                format!("[{k}] has rank {}, the input {}", h.len(), input.len()),
            ));
        }
        if input.len() == 2 {
            agree(site, &format!("hx[{k}]"), "batch", h[0], input[0])?;
        }
        let hidden = h[h.len() - 1].map(|n| n * gates(site));
        agree(site, "w_ih", "rows", w_ih[0], hidden)?;
    }
    Ok(hx.into_iter().map(Out::dims).collect())
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::LSTM_INPUT, recurrent), (aten::GRU_INPUT, recurrent),
    (aten::RNN_TANH_INPUT, recurrent), (aten::RNN_RELU_INPUT, recurrent),
    (aten::LSTM_CELL, cell), (aten::GRU_CELL, cell),
    (aten::RNN_TANH_CELL, cell), (aten::RNN_RELU_CELL, cell),
];
