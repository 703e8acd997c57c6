//! Small programs built by hand: inputs and weights first, then nodes
//! through the decomposition's `Emitter` (schema defaults, fresh names).

use pt2kit::blob::Blob;
use pt2kit::decompose::edit::{Emitter, Names};
use pt2kit::ir::*;

pub fn meta(sizes: &[i64]) -> TensorMeta {
    meta_of(Dtype::Float32, sizes)
}

pub fn meta_of(dtype: Dtype, sizes: &[i64]) -> TensorMeta {
    TensorMeta::contiguous(dtype, sizes)
}

pub fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A float32 host tensor of `shape` holding `v`.
#[allow(dead_code)]
pub fn host_f32(shape: &[usize], v: &[f32]) -> pt2kit::tensorfile::HostTensor {
    pt2kit::tensorfile::HostTensor {
        dtype: Dtype::Float32,
        shape: shape.to_vec(),
        data: f32s(v),
    }
}

/// The arguments of `aten.convolution.default` for a plain 2-D
/// convolution of `x` by `w`: no bias, stride 1, no padding, one group.
#[allow(dead_code)]
pub fn conv2d_args(x: ValueId, w: ValueId) -> Vec<(&'static str, Argument)> {
    let pair = |v: i64| Argument::Ints(vec![v, v]);
    vec![
        ("input", t(x)),
        ("weight", t(w)),
        ("bias", Argument::None),
        ("stride", pair(1)),
        ("padding", pair(0)),
        ("dilation", pair(1)),
        ("transposed", Argument::Bool(false)),
        ("output_padding", pair(0)),
        ("groups", Argument::Int(1)),
    ]
}

/// A program under construction: inputs first, then nodes via `emit`.
pub struct B {
    pub p: Program,
}

impl B {
    pub fn new() -> B {
        let mut p = Program::default();
        p.info.verifiers = vec!["TRAINING".into()];
        B { p }
    }

    pub fn input(
        &mut self,
        name: &str,
        kind: InputKind,
        m: TensorMeta,
        data: Option<Vec<u8>>,
    ) -> ValueId {
        self.p.graph.values.push(Value {
            name: name.into(),
            kind: ValueKind::Tensor(m.clone()),
        });
        let v = ValueId(self.p.graph.values.len() as u32 - 1);
        if let (Some(w), Some(bytes)) = (kind.weight_name(), data) {
            self.p.storages.push(Blob::owned(bytes));
            self.p.weights.push(Weight {
                name: w.into(),
                kind: match kind {
                    InputKind::Parameter(_) => WeightKind::Parameter,
                    InputKind::Buffer(_) => WeightKind::Buffer,
                    _ => WeightKind::Constant,
                },
                meta: m,
                storage: self.p.storages.len() as u32 - 1,
            });
        }
        self.p.graph.inputs.push(Argument::Tensor(v));
        self.p.input_kinds.push(kind);
        v
    }

    pub fn emit(&mut self, f: impl FnOnce(&mut Emitter) -> ValueId) -> ValueId {
        let mut names = Names::of(&self.p.graph);
        let mut em = Emitter::new(&mut self.p.graph.values, &mut names, NodeMeta::default());
        let v = f(&mut em);
        let nodes = em.nodes;
        self.p.graph.nodes.extend(nodes);
        v
    }

    pub fn output(&mut self, v: ValueId) {
        self.p.graph.outputs.push(Argument::Tensor(v));
        self.p.output_kinds.push(OutputKind::UserOutput);
    }
}

pub fn t(v: ValueId) -> Argument {
    Argument::Tensor(v)
}
