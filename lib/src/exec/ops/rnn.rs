//! Recurrent layers (LSTM, GRU, RNN) and their cells: the executor rows.

use crate::ir::op::aten;
use super::*;

fn sigmoid_ct(t: &CandleTensor) -> Result<CandleTensor> {
    t.neg()
        .and_then(|t| t.exp())
        .and_then(|t| t + 1.0)
        .and_then(|t| t.recip())
        .map_err(Error::from)
}

/// `aten.lstm.input`: unidirectional, no projections.
fn lstm(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let hx: Vec<Tensor> = ctx.tensors("hx")?.into_iter().flatten().collect();
    let params: Vec<Tensor> = ctx.tensors("params")?.into_iter().flatten().collect();
    let has_biases = ctx.bool("has_biases")?;
    let layers = ctx.int("num_layers")? as usize;
    if ctx.bool("bidirectional")? {
        return Err(unsupported("bidirectional LSTM"));
    }
    if ctx.bool("train")? && ctx.float("dropout")? > 0.0 {
        return Err(unsupported("LSTM dropout in training mode"));
    }
    let batch_first = ctx.bool("batch_first")?;
    let per_layer = if has_biases { 4 } else { 2 };
    if params.len() != per_layer * layers || hx.len() != 2 {
        return Err(unsupported(
            "LSTM with projections or an unexpected parameter layout",
        ));
    }
    let dt = x.dtype;
    let mut seq = if batch_first {
        x.t.transpose(0, 1)?
    } else {
        x.t.clone()
    }; // [Tensor, B, I]
    let steps = seq.dims()[0];
    let (mut h_n, mut c_n) = (Vec::new(), Vec::new());
    for l in 0..layers {
        let p = &params[l * per_layer..(l + 1) * per_layer];
        let w_ih = p[0].cast(dt)?.t.t()?;
        let w_hh = p[1].cast(dt)?.t.t()?;
        let bias = if has_biases {
            Some(p[2].cast(dt)?.t.add(&p[3].cast(dt)?.t)?)
        } else {
            None
        };
        let mut h = hx[0].cast(dt)?.t.get(l)?;
        let mut c = hx[1].cast(dt)?.t.get(l)?;
        let hidden = h.dims()[1];
        let mut outs = Vec::with_capacity(steps);
        for t in 0..steps {
            let xt = seq.get(t)?;
            let mut gates = xt
                .matmul(&w_ih)
                .and_then(|g| g.add(&h.matmul(&w_hh)?))?;
            if let Some(b) = &bias {
                gates = gates.broadcast_add(b)?;
            }
            let chunk = |k: usize| gates.narrow(1, k * hidden, hidden).map_err(Error::from);
            let (i, f, g, o) = (
                sigmoid_ct(&chunk(0)?)?,
                sigmoid_ct(&chunk(1)?)?,
                chunk(2)?.tanh()?,
                sigmoid_ct(&chunk(3)?)?,
            );
            c = f.mul(&c).and_then(|fc| fc.add(&i.mul(&g)?))?;
            h = o.mul(&c.tanh()?)?;
            outs.push(h.clone());
        }
        seq = CandleTensor::stack(&outs, 0)?;
        h_n.push(h);
        c_n.push(c);
    }
    let output = if batch_first {
        seq.transpose(0, 1)?
    } else {
        seq
    };
    Ok(vec![
        Value::Tensor(Tensor::new(output, dt)),
        Value::Tensor(Tensor::new(CandleTensor::stack(&h_n, 0)?, dt)),
        Value::Tensor(Tensor::new(CandleTensor::stack(&c_n, 0)?, dt)),
    ])
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[(aten::LSTM_INPUT, lstm)];
