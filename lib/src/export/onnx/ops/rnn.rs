//! Recurrent layers (LSTM, GRU, RNN) and their cells: the ONNX emitters.

use crate::ir::op::aten;
use super::*;

/// Whether an `aten.lstm.input` node's weights are other than the plain
/// layout of `num_layers * directions * (4 with biases, else 2)` tensors:
/// with projections (`proj_size`), one more per layer and direction,
/// which ONNX's LSTM has no input for (`DECLINES` lowers such a node
/// through the decomposition table).
pub(super) fn lstm_unplain(n: &crate::ir::Node) -> bool {
    let flag = |k| matches!(n.arg(k), Some(Argument::Bool(true)));
    let (Some(Argument::Int(layers)), Some(Argument::Tensors(params))) = (n.arg("num_layers"), n.arg("params")) else {
        return true;
    };
    let per = if flag("has_biases") { 4 } else { 2 };
    let dirs = if flag("bidirectional") { 2 } else { 1 };
    params.len() as i64 != layers * dirs * per
}

/// torch's LSTM as one ONNX LSTM per layer. torch orders the gates
/// (input, forget, cell, output), ONNX (input, output, forget, cell).
fn lstm(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("input")?;
    let xm = cx.meta("input")?;
    let hx = cx.tensors("hx")?;
    let params = cx.tensors("params")?;
    let has_biases = cx.bool("has_biases")?;
    let layers = cx.int("num_layers")? as usize;
    let bidirectional = cx.bool("bidirectional")?;
    let batch_first = cx.bool("batch_first")?;
    let dirs = if bidirectional { 2 } else { 1 };
    let per = if has_biases { 4 } else { 2 };
    if lstm_unplain(cx.node) || hx.len() != 2 {
        return Err(Error::unsupported(
            "LSTM with projections (proj_size) or an unexpected parameter list",
        ));
    }
    let hidden = params[1]
        .1
        .sizes
        .get(1)
        .and_then(Sym::as_int)
        .ok_or_else(|| Error::unsupported("LSTM with a symbolic hidden size"))?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let unbatched = xm.sizes.len() == 2;
    let mut input = cx.cast(&x, xm.dtype, c)?;
    if unbatched {
        input = cx.unsqueeze(&input, &[1]);
    } else if batch_first {
        input = cx.transpose(&input, &[1, 0, 2]);
    }
    let mut state = Vec::new();
    for (name, meta) in &hx {
        let s = cx.cast(name, meta.dtype, c)?;
        state.push(if unbatched { cx.unsqueeze(&s, &[1]) } else { s });
    }
    let gate_sizes = cx.const_i64s(&[hidden; 4]);
    let reorder = |cx: &mut EmitNode, w: &str, d: Dtype| -> Result<String> {
        let w = cx.cast(w, d, c)?;
        let g = cx.node_n("Split", &[&w, &gate_sizes], vec![attr_int("axis", 0)], 4);
        Ok(cx.concat(&[g[0].clone(), g[3].clone(), g[1].clone(), g[2].clone()], 0))
    };
    let (mut hs, mut cs) = (Vec::new(), Vec::new());
    for layer in 0..layers {
        let (mut ws, mut rs, mut bs) = (Vec::new(), Vec::new(), Vec::new());
        for d in 0..dirs {
            let base = (layer * dirs + d) * per;
            let w = reorder(cx, &params[base].0, params[base].1.dtype)?;
            ws.push(cx.unsqueeze(&w, &[0]));
            let r = reorder(cx, &params[base + 1].0, params[base + 1].1.dtype)?;
            rs.push(cx.unsqueeze(&r, &[0]));
            if has_biases {
                let bi = reorder(cx, &params[base + 2].0, params[base + 2].1.dtype)?;
                let bh = reorder(cx, &params[base + 3].0, params[base + 3].1.dtype)?;
                let b = cx.concat(&[bi, bh], 0);
                bs.push(cx.unsqueeze(&b, &[0]));
            }
        }
        let w = cx.concat(&ws, 0);
        let r = cx.concat(&rs, 0);
        let b = if has_biases {
            cx.concat(&bs, 0)
        } else {
            String::new()
        };
        let starts = cx.const_i64s(&[(layer * dirs) as i64]);
        let ends = cx.const_i64s(&[((layer + 1) * dirs) as i64]);
        let axes = cx.const_i64s(&[0]);
        let h0 = cx.node("Slice", &[&state[0], &starts, &ends, &axes], vec![]);
        let c0 = cx.node("Slice", &[&state[1], &starts, &ends, &axes], vec![]);
        let ys = cx.node_n(
            "LSTM",
            &[&input, &w, &r, &b, "", &h0, &c0],
            vec![
                attr_int("hidden_size", hidden),
                attr_str(
                    "direction",
                    if bidirectional {
                        "bidirectional"
                    } else {
                        "forward"
                    },
                ),
            ],
            3,
        );
        // Y is [seq, dirs, batch, hidden]: directions side by side.
        let t = cx.transpose(&ys[0], &[0, 2, 1, 3]);
        let merged = cx.const_i64s(&[0, 0, -1]);
        input = cx.node("Reshape", &[&t, &merged], vec![]);
        hs.push(ys[1].clone());
        cs.push(ys[2].clone());
    }
    let mut y = input;
    if unbatched {
        y = cx.squeeze(&y, &[1]);
    } else if batch_first {
        y = cx.transpose(&y, &[1, 0, 2]);
    }
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    for (i, parts) in [(1, hs), (2, cs)] {
        let mut s = cx.concat(&parts, 0);
        if unbatched {
            s = cx.squeeze(&s, &[1]);
        }
        let d = cx.out_dtype(i)?;
        let s = cx.cast(&s, c, d)?;
        cx.set(i, s);
    }
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::LSTM_INPUT, lstm),
];
