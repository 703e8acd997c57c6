//! Convolutions, transposed convolutions, im2col and col2im: the decomposition rules.

use crate::ir::op::aten;
use super::*;

/// `convolution` on a batched input; an unbatched one gets a batch of one.
fn convolution(
    em: &mut Emitter,
    a: &NodeArgs,
    x: ValueId,
    args: Vec<(&str, Argument)>,
    spatial: usize,
) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let unbatched = em.rank(x)? == spatial + 1;
    let mut all = vec![(
        "input",
        Argument::Tensor(if unbatched { unsqueeze(em, x, 0)? } else { x }),
    )];
    all.extend(args);
    if unbatched {
        let m = em.meta(out)?.clone();
        let mut sizes = m.sizes.clone();
        sizes.insert(0, Sym::Int(1));
        let meta = em.meta_like(out, m.dtype, sizes)?;
        let r = em.op(aten::CONVOLUTION, all, meta)?;
        return Ok(vec![squeeze_dims(em, r, &[0], Some(out))?]);
    }
    em.op_into(aten::CONVOLUTION, all, out)?;
    Ok(vec![out])
}

fn conv(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (mut x, w) = (a.tensor("input")?, a.tensor("weight")?);
    let spatial = em.rank(w)? - 2;
    let dilation = a.syms("dilation")?;
    let padding = match a.0.arg("padding") {
        Some(Argument::String(mode)) => {
            let k = em.static_sizes(w, "convolution with padding='same'")?;
            let dil: Vec<i64> = a.ints("dilation")?;
            let mut pad = Vec::new();
            let mut extra = Vec::new();
            for d in 0..spatial {
                let total = if mode == "same" {
                    dil.get(d).copied().unwrap_or(dil[0]) * (k[d + 2] - 1)
                } else {
                    0
                };
                pad.push(SymRef::Int(total / 2));
                extra.push(total % 2);
            }
            if extra.iter().any(|&e| e != 0) {
                // Asymmetric: pad the far side once more, as torch does.
                let mut p = Vec::new();
                for d in (0..spatial).rev() {
                    p.extend([0, extra[d]]);
                }
                let m = em.meta(x)?.clone();
                let mut sizes = m.sizes.clone();
                let r = sizes.len();
                for d in 0..spatial {
                    if extra[d] != 0 {
                        sizes[r - spatial + d] =
                            crate::decompose::edit::sym_mul(&sizes[r - spatial + d], &Sym::Int(1));
                        if let Sym::Int(v) = sizes[r - spatial + d] {
                            sizes[r - spatial + d] = Sym::Int(v + extra[d]);
                        } else {
                            return Err(Error::unsupported(
                                "padding='same' on a symbolic spatial size",
                            ));
                        }
                    }
                }
                let meta = em.meta_like(x, m.dtype, sizes)?;
                x = em.op(
                    aten::CONSTANT_PAD_ND,
                    vec![("self", Argument::Tensor(x)), ("pad", ints_arg(&p))],
                    meta,
                )?;
            }
            pad
        }
        _ => a.syms("padding")?,
    };
    let args = vec![
        ("weight", Argument::Tensor(w)),
        ("bias", a.arg("bias")),
        ("stride", sym_ints_arg(&a.syms("stride")?)),
        ("padding", sym_ints_arg(&padding)),
        ("dilation", sym_ints_arg(&dilation)),
        ("transposed", Argument::Bool(false)),
        (
            "output_padding",
            sym_ints_arg(&vec![SymRef::Int(0); spatial]),
        ),
        ("groups", Argument::SymInt(a.sym("groups")?)),
    ];
    convolution(em, a, x, args, spatial)
}

fn conv_transpose(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, w) = (a.tensor("input")?, a.tensor("weight")?);
    let spatial = em.rank(w)? - 2;
    let args = vec![
        ("weight", Argument::Tensor(w)),
        ("bias", a.arg("bias")),
        ("stride", sym_ints_arg(&a.syms("stride")?)),
        ("padding", sym_ints_arg(&a.syms("padding")?)),
        ("dilation", sym_ints_arg(&a.syms("dilation")?)),
        ("transposed", Argument::Bool(true)),
        ("output_padding", sym_ints_arg(&a.syms("output_padding")?)),
        ("groups", Argument::SymInt(a.sym("groups")?)),
    ];
    convolution(em, a, x, args, spatial)
}

fn underscore_convolution(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let mut args: Vec<(&str, Argument)> = Vec::new();
    for name in [
        "input",
        "weight",
        "bias",
        "stride",
        "padding",
        "dilation",
        "transposed",
        "output_padding",
        "groups",
    ] {
        args.push((name, a.arg(name)));
    }
    em.op_into(aten::CONVOLUTION, args, a.out(0)?)?;
    Ok(vec![a.out(0)?])
}

/// `im2col` as torch decomposes it: the input padded, then indexed at
/// each block's rows and columns (`[kh, bh, 1, 1]` and `[kw, bw]`: block
/// start plus dilated tap), `[n, c, kh, bh, kw, bw]` permuted to
/// `[n, c, kh, kw, bh, bw]` and flattened to `[n, c * kh * kw, bh * bw]`.
fn im2col(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let out = a.out(0)?;
    let sizes = em.static_sizes(x, "im2col")?;
    let r = sizes.len();
    let two = |name: &str| -> Result<Vec<i64>> {
        let v = a.ints(name)?;
        Ok(if v.len() == 1 { vec![v[0]; 2] } else { v })
    };
    let (k, d, p, s) = (two("kernel_size")?, two("dilation")?, two("padding")?, two("stride")?);
    if !(3..=4).contains(&r) || [&k, &d, &p, &s].iter().any(|v| v.len() != 2) {
        return Err(Error::bad_input(format!(
            "im2col of {sizes:?} with kernel {k:?}, dilation {d:?}, padding {p:?}, stride {s:?}"
        )));
    }
    let x4 = if r == 3 { unsqueeze(em, x, 0)? } else { x };
    let padded = if p.iter().any(|&v| v != 0) {
        let mut sizes = em.sizes(x4)?;
        sizes[2] = Sym::Int(sizes[2].as_int().unwrap_or(0) + 2 * p[0]);
        sizes[3] = Sym::Int(sizes[3].as_int().unwrap_or(0) + 2 * p[1]);
        let meta = em.meta_like(x4, em.dtype(x4)?, sizes)?;
        em.op(
            aten::CONSTANT_PAD_ND,
            vec![
                ("self", Argument::Tensor(x4)),
                ("pad", ints_arg(&[p[1], p[1], p[0], p[0]])),
                ("value", Argument::Float(0.0)),
            ],
            meta,
        )?
    } else {
        x4
    };
    let mut blocks = [0; 2];
    let mut at = Vec::new();
    for j in 0..2 {
        let span = sizes[r - 2 + j] + 2 * p[j] - d[j] * (k[j] - 1);
        if span <= 0 || s[j] <= 0 || d[j] <= 0 || k[j] <= 0 {
            return Err(Error::bad_input(format!(
                "im2col: a kernel of {} (dilation {}) does not fit spatial dim {j} of {sizes:?} padded by {}",
                k[j], d[j], p[j]
            )));
        }
        blocks[j] = (span + s[j] - 1) / s[j];
        let starts = arange_to(em, x, blocks[j] * s[j], s[j], Dtype::Int64)?;
        let taps = arange_to(em, x, k[j] * d[j], d[j], Dtype::Int64)?;
        let taps = unsqueeze(em, taps, 1)?;
        let idx = binary(em, aten::ADD_TENSOR, taps, starts, Dtype::Int64, None)?;
        at.push(if j == 0 {
            let rows = unsqueeze(em, idx, 2)?;
            unsqueeze(em, rows, 3)?
        } else {
            idx
        });
    }
    let (n, c) = (em.size(padded, 0)?, em.size(padded, 1)?);
    let dims = [em.sym_of(n), em.sym_of(c)]
        .into_iter()
        .chain([k[0], blocks[0], k[1], blocks[1]].map(Sym::Int))
        .collect();
    let meta = em.meta_like(x, em.dtype(x)?, dims)?;
    let picked = em.op(
        aten::INDEX_TENSOR,
        vec![
            ("self", Argument::Tensor(padded)),
            (
                "indices",
                Argument::OptionalTensors(vec![None, None, Some(at[0]), Some(at[1])]),
            ),
        ],
        meta,
    )?;
    let blocks_first = permute(em, picked, &[0, 1, 2, 4, 3, 5], None)?;
    let rows = em.mul(c, SymRef::Int(k[0] * k[1]))?;
    let mut shape = vec![rows, SymRef::Int(blocks[0] * blocks[1])];
    if r == 4 {
        shape.insert(0, n);
    }
    Ok(vec![reshape(em, blocks_first, &shape, Some(out))?])
}

rules! {
    aten::CONV1D => [aten::CONVOLUTION] conv;
    aten::CONV2D => [aten::CONVOLUTION] conv;
    aten::CONV3D => [aten::CONVOLUTION] conv;
    aten::CONV1D_PADDING => [aten::CONVOLUTION, aten::CONSTANT_PAD_ND] conv;
    aten::CONV2D_PADDING => [aten::CONVOLUTION, aten::CONSTANT_PAD_ND] conv;
    aten::CONV3D_PADDING => [aten::CONVOLUTION, aten::CONSTANT_PAD_ND] conv;
    aten::CONV_TRANSPOSE1D => [aten::CONVOLUTION] conv_transpose;
    aten::CONV_TRANSPOSE2D_INPUT => [aten::CONVOLUTION] conv_transpose;
    aten::CONV_TRANSPOSE3D_INPUT => [aten::CONVOLUTION] conv_transpose;
    aten::_CONVOLUTION => [aten::CONVOLUTION] underscore_convolution;
    aten::IM2COL => [aten::UNSQUEEZE, aten::CONSTANT_PAD_ND, aten::ARANGE_START_STEP, aten::ADD_TENSOR, aten::INDEX_TENSOR, aten::PERMUTE, aten::VIEW, aten::CLONE] im2col;
    aten::_CONVOLUTION_MODE => [aten::CONVOLUTION, aten::CONSTANT_PAD_ND] conv;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
