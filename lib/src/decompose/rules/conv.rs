//! Convolutions, transposed convolutions, im2col and col2im: the decomposition rules.

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
        let r = em.op("aten.convolution.default", all, meta)?;
        return Ok(vec![squeeze_dims(em, r, &[0], Some(out))?]);
    }
    em.op_into("aten.convolution.default", all, out)?;
    Ok(vec![out])
}

fn conv(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (mut x, w) = (a.t("input")?, a.t("weight")?);
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
                    "aten.constant_pad_nd.default",
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
    let (x, w) = (a.t("input")?, a.t("weight")?);
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
    em.op_into("aten.convolution.default", args, a.out(0)?)?;
    Ok(vec![a.out(0)?])
}

rules! {
    "aten.conv1d.default" => ["aten.convolution.default"] conv;
    "aten.conv2d.default" => ["aten.convolution.default"] conv;
    "aten.conv3d.default" => ["aten.convolution.default"] conv;
    "aten.conv1d.padding" => ["aten.convolution.default", "aten.constant_pad_nd.default"] conv;
    "aten.conv2d.padding" => ["aten.convolution.default", "aten.constant_pad_nd.default"] conv;
    "aten.conv3d.padding" => ["aten.convolution.default", "aten.constant_pad_nd.default"] conv;
    "aten.conv_transpose1d.default" => ["aten.convolution.default"] conv_transpose;
    "aten.conv_transpose2d.input" => ["aten.convolution.default"] conv_transpose;
    "aten.conv_transpose3d.input" => ["aten.convolution.default"] conv_transpose;
    "aten._convolution.default" => ["aten.convolution.default"] underscore_convolution;
    "aten._convolution_mode.default" => ["aten.convolution.default", "aten.constant_pad_nd.default"] conv;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
