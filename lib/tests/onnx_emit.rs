//! ONNX emitters on small hand-built graphs, where an opset's type
//! constraints decide the nodes written.

mod common;

use common::build::*;
use pt2kit::export::onnx::{self, OnnxOptions};
use pt2kit::ir::*;

/// `full_like` of a bfloat16 tensor: ConstantOfShape takes bfloat16 only
/// from opset 20, so before it the value is made in float32 and cast (the
/// 4-layer Llama cut in bfloat16 failed ONNX's full checker at opset 18).
#[test]
fn bfloat16_constant_of_shape_before_opset_20_is_made_in_float32() {
    let mut b = B::new();
    let x = b.input(
        "x",
        InputKind::UserInput,
        meta_of(Dtype::BFloat16, &[2, 3]),
        None,
    );
    let y = b.emit(|em| {
        em.op(
            "aten.full_like.default",
            vec![("self", t(x)), ("fill_value", Argument::Float(0.5))],
            meta_of(Dtype::BFloat16, &[2, 3]),
        )
        .unwrap()
    });
    b.output(y);
    for (opset, cast) in [(18, true), (19, true), (20, false), (21, false)] {
        let model = onnx::to_onnx(
            &b.p,
            &OnnxOptions {
                opset,
                ..Default::default()
            },
        )
        .unwrap();
        let graph = &model.model.graph;
        let cos: Vec<_> = graph
            .node
            .iter()
            .filter(|n| n.op_type == "ConstantOfShape")
            .collect();
        assert_eq!(cos.len(), 1, "opset {opset}");
        let value = cos[0].attribute.iter().find(|a| a.name == "value").unwrap();
        let dtype = value.t.data_type;
        let bf16 = onnx::proto::tensor_proto::DataType::BFLOAT16 as i32;
        let f32 = onnx::proto::tensor_proto::DataType::FLOAT as i32;
        assert_eq!(dtype, if cast { f32 } else { bf16 }, "opset {opset}");
        let casts = graph.node.iter().filter(|n| n.op_type == "Cast").count();
        assert_eq!(casts > 0, cast, "opset {opset}");
    }
}

/// Every tensor a node computes is declared in the ONNX graph's
/// value_info (or is an output), with the IR's dtype and sizes: the shapes
/// the shape rules held the program to at load, written once.
#[test]
fn value_info_declares_every_intermediate_with_its_shape() {
    for model in ["mlp", "bert", "dynamic"] {
        let p = common::read(&common::repo().join(format!("golden/models/{model}.pt2")));
        let m = onnx::to_onnx(&p, &OnnxOptions::default()).unwrap();
        let graph = &m.model.graph;
        let declared: std::collections::HashMap<&str, &onnx::proto::ValueInfoProto> = graph
            .value_info
            .iter()
            .chain(&graph.output)
            .map(|v| (v.name.as_str(), v))
            .collect();
        let mut checked = 0;
        for node in &p.graph.nodes {
            for v in defined_tensors(node) {
                let value = p.graph.value(v);
                let ValueKind::Tensor(meta) = &value.kind else {
                    continue;
                };
                let Some(info) = declared.get(value.name.as_str()) else {
                    continue; // a value no ONNX node defines under its name
                };
                let t = info.type_.tensor_type();
                let dims: Vec<String> = t
                    .shape
                    .dim
                    .iter()
                    .map(|d| {
                        if d.has_dim_value() {
                            d.dim_value().to_string()
                        } else {
                            d.dim_param().to_string()
                        }
                    })
                    .collect();
                let want: Vec<String> = meta.sizes.iter().map(|s| s.to_string()).collect();
                assert_eq!(dims.len(), want.len(), "{model}: {}", value.name);
                for (d, w) in dims.iter().zip(&want) {
                    if w.parse::<i64>().is_ok() {
                        assert_eq!(d, w, "{model}: {} {dims:?} vs {want:?}", value.name);
                    }
                }
                checked += 1;
            }
        }
        assert!(
            checked * 10 >= p.graph.nodes.len() * 8,
            "{model}: only {checked} of {} node values declared",
            p.graph.nodes.len()
        );
    }
}

/// The ONNX nodes of a program after `ir2onnx`'s fallback (what the
/// emitters decline lowered), or the conversion's error.
fn onnx_nodes(p: &Program, opset: i64) -> Result<Vec<onnx::proto::NodeProto>, String> {
    let lowered = pt2kit::decompose::fallback::lower_unsupported(p, onnx::converts)
        .map_err(|e| e.to_string())?;
    let m = onnx::to_onnx(
        lowered.as_ref().map_or(p, |(l, _)| l),
        &OnnxOptions {
            opset,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(m.model.graph.node.clone())
}

/// [`onnx_nodes`] by op type.
fn onnx_ops(p: &Program, opset: i64) -> Result<Vec<String>, String> {
    Ok(onnx_nodes(p, opset)?
        .into_iter()
        .map(|n| n.op_type)
        .collect())
}

/// PT2E int8: the fixtures' quantize and dequantize nodes become
/// QuantizeLinear and DequantizeLinear (per-channel ones with an axis),
/// but q_ops' dequantize to float64 (lowered to torch's arithmetic); a
/// range narrower than the dtype's gets a Clip after QuantizeLinear.
#[test]
fn quantized_decomposed_is_written_as_qdq() {
    for (fixture, clips) in [
        ("q_cnn_x86", 0),
        ("q_cnn_xnnpack_pc", 0),
        ("q_mlp_xnnpack_dyn", 0),
        ("q_mlp_xnnpack_unfolded", 3),
        ("q_ops", 2),
    ] {
        let p = common::read(&common::repo().join(format!("golden/quant/{fixture}.pt2")));
        let ir = |prefix: &str| {
            p.graph
                .nodes
                .iter()
                .filter(|n| {
                    n.target.namespace == "quantized_decomposed"
                        && n.target.name.starts_with(prefix)
                })
                .count()
        };
        let f64_out = usize::from(fixture == "q_ops");
        for opset in [17, 21] {
            let nodes = onnx_nodes(&p, opset).unwrap();
            let count = |op: &str| nodes.iter().filter(|n| n.op_type == op).count();
            assert_eq!(
                count("QuantizeLinear"),
                ir("quantize_per"),
                "{fixture} at {opset}"
            );
            assert_eq!(
                count("DequantizeLinear"),
                ir("dequantize_per") - f64_out,
                "{fixture} at {opset}"
            );
            let quantized: Vec<&String> = nodes
                .iter()
                .filter(|n| n.op_type == "QuantizeLinear")
                .flat_map(|n| &n.output)
                .collect();
            let after_q = nodes
                .iter()
                .filter(|n| n.op_type == "Clip" && quantized.contains(&&n.input[0]))
                .count();
            assert_eq!(after_q, clips, "{fixture} at {opset}");
        }
    }
}

/// What QuantizeLinear/DequantizeLinear cannot say as torch computes it:
/// a per-tensor dequantize to float64 is lowered to torch's arithmetic;
/// per-channel float64 scales are refused, by name and reason.
#[test]
fn qdq_declines_and_refusals() {
    let mut b = B::new();
    let x = b.input(
        "x",
        InputKind::UserInput,
        meta_of(Dtype::Int8, &[2, 3]),
        None,
    );
    let y = b.emit(|em| {
        em.op(
            "quantized_decomposed.dequantize_per_tensor.default",
            vec![
                ("input", t(x)),
                ("scale", Argument::Float(0.1)),
                ("zero_point", Argument::Int(3)),
                ("quant_min", Argument::Int(-128)),
                ("quant_max", Argument::Int(127)),
                ("dtype", Argument::ScalarType(Dtype::Int8)),
                ("out_dtype", Argument::ScalarType(Dtype::Float64)),
            ],
            meta_of(Dtype::Float64, &[2, 3]),
        )
        .unwrap()
    });
    b.output(y);
    let ops = onnx_ops(&b.p, 18).unwrap();
    assert!(!ops.iter().any(|o| o == "DequantizeLinear"), "{ops:?}");
    assert!(ops.iter().any(|o| o == "Mul"), "{ops:?}");

    let mut b = B::new();
    let x = b.input(
        "x",
        InputKind::UserInput,
        meta_of(Dtype::Int8, &[2, 3]),
        None,
    );
    let s = b.input(
        "s",
        InputKind::UserInput,
        meta_of(Dtype::Float64, &[3]),
        None,
    );
    let y = b.emit(|em| {
        em.op(
            "quantized_decomposed.dequantize_per_channel.default",
            vec![
                ("input", t(x)),
                ("scales", t(s)),
                ("zero_points", Argument::None),
                ("axis", Argument::Int(1)),
                ("quant_min", Argument::Int(-128)),
                ("quant_max", Argument::Int(127)),
                ("dtype", Argument::ScalarType(Dtype::Int8)),
            ],
            meta_of(Dtype::Float32, &[2, 3]),
        )
        .unwrap()
    });
    b.output(y);
    let e = onnx_ops(&b.p, 18).unwrap_err();
    assert!(e.contains("per-channel scales of float64: QuantizeLinear and DequantizeLinear take float32 scales"), "{e}");
}
