//! Weights prepared once for the kernels: packed for the matrix
//! products, laid out by blocks for the depthwise and Winograd kernels,
//! and kept for as long as the executor, keyed by where each view of a
//! weight lies ([`PackCache`]); an intermediate's view is prepared per
//! call (its address may be reused by another value).

use super::*;

/// Where a matrix lies in a storage: (storage address, offset, rows,
/// cols, row stride, col stride).
type ViewKey = (usize, usize, usize, usize, usize, usize);

use crate::kernels::FastMap;

/// Packed weights ([`sgemm::PackedA`] for a convolution's weight, the left
/// operand; [`sgemm::PackedB`] for a linear layer's, the right one). Only
/// views of a weight's storage are kept: the weights live as long as the
/// executor, so their addresses name them; an intermediate's address may
/// be reused by another value, so intermediates are packed per call.
#[derive(Default)]
pub(super) struct PackCache {
    pub(super) weights: std::collections::HashSet<usize>,
    /// Whether mapped weights are packed once and kept (see
    /// [`mapped::PACK_CACHE_BYTES`]).
    pub(super) keep_mapped: bool,
    /// Whether products release mapped pages after reading them (see
    /// [`mapped::releases_after_use`]).
    pub(super) release_mapped: bool,
    a: std::sync::Mutex<FastMap<ViewKey, std::sync::Arc<sgemm::PackedA>>>,
    b: std::sync::Mutex<FastMap<ViewKey, std::sync::Arc<sgemm::PackedB>>>,
    /// Depthwise weights by blocks of 16 channels (see
    /// [`Executor::depthwise_taps`]).
    taps: std::sync::Mutex<FastMap<ViewKey, std::sync::Arc<Vec<f32>>>>,
    /// 3x3 weights transformed for Winograd's F(2x2, 3x3) and F(4x4,
    /// 3x3) (see [`Executor::winograd_weights`]).
    winograd: std::sync::Mutex<FastMap<ViewKey, std::sync::Arc<Vec<sgemm::PackedB>>>>,
    winograd4: std::sync::Mutex<FastMap<ViewKey, std::sync::Arc<Vec<sgemm::PackedB>>>>,
    /// The bfloat16 kernel products run on (`--precision bf16` on a CPU
    /// that has one), and the weights rounded and packed for it
    /// ([`lowp::PackedB16`]).
    pub(super) bf16: Option<lowp::Kernel>,
    /// The precision asked for (`ExecOptions::precision`).
    pub(super) precision: lowp::Precision,
    b16: std::sync::Mutex<FastMap<ViewKey, std::sync::Arc<lowp::PackedB16>>>,
    /// Convolutions' weights rounded to bfloat16 rows ([`lowp::A16`]).
    a16: std::sync::Mutex<FastMap<ViewKey, std::sync::Arc<lowp::A16>>>,
    /// PT2E int8 weights packed for the int8 product
    /// ([`crate::kernels::int8::PackedI8`], `ops/int8.rs`), by node and
    /// where the weight lies.
    pub(super) int8: std::sync::Mutex<
        std::collections::HashMap<(String, usize), std::sync::Arc<crate::kernels::int8::PackedI8>>,
    >,
    /// 2-D convolutions' weights laid out for [`lowp::conv`].
    conv16: std::sync::Mutex<FastMap<ViewKey, std::sync::Arc<lowp::ConvWeight16>>>,
}

impl PackCache {
    /// A cache that keeps the views of the storages at `weights`, and
    /// mapped weights' packs where `keep_mapped`.
    pub(super) fn new(
        weights: std::collections::HashSet<usize>,
        keep_mapped: bool,
        release_mapped: bool,
        precision: lowp::Precision,
        bf16: Option<lowp::Kernel>,
    ) -> PackCache {
        PackCache {
            weights,
            keep_mapped,
            release_mapped,
            precision,
            bf16,
            ..Default::default()
        }
    }
}

fn view_key(v: &sgemm::View) -> ViewKey {
    (v.data.as_ptr() as usize, v.off, v.rows, v.cols, v.rs, v.cs)
}

impl Executor<'_> {
    /// `m` packed as the matrix kernel's left operand: kept when it lies in
    /// a weight, packed afresh otherwise.
    pub fn packed_a(&self, m: &sgemm::View) -> std::sync::Arc<sgemm::PackedA> {
        self.packed(&self.packs.a, m, sgemm::pack_a)
    }

    /// `m` packed as the matrix kernel's right operand, as [`Self::packed_a`].
    pub fn packed_b(&self, m: &sgemm::View) -> std::sync::Arc<sgemm::PackedB> {
        self.packed(&self.packs.b, m, sgemm::pack_b)
    }

    /// A depthwise weight `ws` (`[c][taps]`) laid out as its kernel reads
    /// it, `[c / 16][taps][16]` (lanes past `c` zero): made once for a
    /// weight and kept (MobileNetV3's `[576, 1, 5, 5]` took 4 us a call
    /// to lay out, 16 us a run at batch 1 over its depthwise layers),
    /// per call for an intermediate.
    pub fn depthwise_taps(&self, ws: &[f32], c: usize, taps: usize) -> std::sync::Arc<Vec<f32>> {
        let view = sgemm::View {
            data: ws,
            off: 0,
            rows: c,
            cols: taps,
            rs: taps,
            cs: 1,
        };
        self.packed(&self.packs.taps, &view, |v| {
            ops::depthwise_by_blocks(v.data, v.rows, v.cols)
        })
    }

    /// A 3x3 weight (`[co, c * 9]`) as the packed `[c, co]` matrices of
    /// Winograd's F(m x m, 3x3) (`m` 2 or 4: 16 or 36 of them,
    /// [`ops::winograd_weights`]): made once for a weight and kept, per
    /// call for an intermediate.
    pub fn winograd_weights(
        &self,
        w: &sgemm::View,
        m: usize,
    ) -> std::sync::Arc<Vec<sgemm::PackedB>> {
        if m == 4 {
            self.packed(&self.packs.winograd4, w, |w| ops::winograd_weights(w, 4))
        } else {
            self.packed(&self.packs.winograd, w, |w| ops::winograd_weights(w, 2))
        }
    }

    fn packed<T>(
        &self,
        cache: &std::sync::Mutex<FastMap<ViewKey, std::sync::Arc<T>>>,
        m: &sgemm::View,
        pack: impl Fn(&sgemm::View) -> T,
    ) -> std::sync::Arc<T> {
        let key = view_key(m);
        if !self.packs.weights.contains(&key.0) {
            return std::sync::Arc::new(pack(m));
        }
        let Ok(mut cache) = cache.lock() else {
            return std::sync::Arc::new(pack(m));
        };
        cache
            .entry(key)
            .or_insert_with(|| std::sync::Arc::new(pack(m)))
            .clone()
    }

    /// The weights left where they lie (see [`mapped`]): how many, and
    /// their bytes.
    pub fn mapped_weights(&self) -> (usize, u64) {
        self.weights
            .values()
            .filter_map(|v| match v {
                Value::Mapped(m) => {
                    Some(m.dims().iter().product::<usize>() as u64 * m.dtype.size() as u64)
                }
                _ => None,
            })
            .fold((0, 0), |(n, b), x| (n + 1, b + x))
    }

    /// Whether a product releases a mapped weight's pages once it has read
    /// them (the mapped weights outgrow memory: [`mapped::releases_after_use`]).
    pub fn releases_mapped(&self) -> bool {
        self.packs.release_mapped
    }

    /// A mapped weight `m` (rank 2, `[k, n]`) packed as the right operand,
    /// when mapped weights are kept packed (`None`: pack it per call). Its
    /// mapped pages are released once it is packed.
    pub fn packed_mapped(&self, m: &mapped::Mapped) -> Option<std::sync::Arc<sgemm::PackedB>> {
        if !self.packs.keep_mapped || m.rank() != 2 {
            return None;
        }
        let key = mapped_key(m);
        let mut cache = self.packs.b.lock().ok()?;
        Some(
            cache
                .entry(key)
                .or_insert_with(|| {
                    let fill = |r: usize, j0: usize, out: &mut [f32]| m.fill_row(r, j0, out);
                    let packed = sgemm::pack_b_with(m.dims()[0], m.dims()[1], &fill);
                    m.release();
                    std::sync::Arc::new(packed)
                })
                .clone(),
        )
    }
}

impl Executor<'_> {
    /// The bfloat16 kernel the products run on: `--precision bf16` on a
    /// CPU that has one ([`lowp::kernel`]); `None` for float32.
    pub fn bf16_kernel(&self) -> Option<lowp::Kernel> {
        self.packs.bf16
    }

    /// What `-v` says of the precision: the bfloat16 kernel the products
    /// run on, or why they stay in float32 though bfloat16 was asked for;
    /// `None` for float32 asked.
    pub fn precision_note(&self) -> Option<String> {
        match (self.packs.precision, self.packs.bf16) {
            (lowp::Precision::F32, _) => None,
            (lowp::Precision::Bf16, Some(k)) => Some(format!(
                "precision bf16: the products with a float32 weight (linear, matmul, addmm), the batched products of two activations (bmm, matmul) and the convolutions of one group round both operands to bfloat16 and sum in float32 on {}; everything else runs in float32",
                k.name()
            )),
            (lowp::Precision::Bf16, None) => Some(if self.device.is_cpu() {
                "precision bf16: this CPU has no AVX512-BF16 (or PT2KIT_NO_AVX512 / PT2KIT_NO_AVX2 turned it off): everything runs in float32".to_string()
            } else {
                "precision bf16: only on the CPU device; everything runs in float32".to_string()
            }),
        }
    }

    /// `m` (a convolution's weight, `[c_out, c_in * taps]`) rounded to
    /// bfloat16 rows, the left operand of [`lowp::gemm`]: made once for a
    /// weight and kept, per call for an intermediate.
    pub fn rounded_a16(&self, m: &sgemm::View) -> std::sync::Arc<lowp::A16> {
        self.packed(&self.packs.a16, m, |v| {
            lowp::round_a(v.data, v.off, v.rows, v.cols, v.rs, v.cs)
        })
    }

    /// `m` (a 2-D convolution's weight, `[c_out, c * taps]`) rounded to
    /// bfloat16 and laid out for [`lowp::conv`]: made once for a weight
    /// and kept, per call for an intermediate (a weight scaled per call).
    pub fn conv_weight16(
        &self,
        m: &sgemm::View,
        c: usize,
        taps: usize,
    ) -> std::sync::Arc<lowp::ConvWeight16> {
        self.packed(&self.packs.conv16, m, |v| {
            let mut rows = Vec::new();
            let data = if v.rs == c * taps && v.cs == 1 {
                &v.data[v.off..]
            } else {
                rows.extend(
                    (0..v.rows * v.cols)
                        .map(|i| v.data[v.off + i / v.cols * v.rs + i % v.cols * v.cs]),
                );
                &rows[..]
            };
            lowp::conv_weight(data, v.rows, c, taps)
        })
    }

    /// A weight `m` (`[k, n]`, a view of a weight's storage) rounded to
    /// bfloat16 and packed once, kept; `None` for a view of anything else
    /// (a batched product of two activations rounds both per call:
    /// `linalg::bf16_bmm`).
    pub fn packed_b16(&self, m: &sgemm::View) -> Option<std::sync::Arc<lowp::PackedB16>> {
        let key = view_key(m);
        if !self.packs.weights.contains(&key.0) {
            return None;
        }
        let mut cache = self.packs.b16.lock().ok()?;
        Some(
            cache
                .entry(key)
                .or_insert_with(|| {
                    std::sync::Arc::new(lowp::pack_b(m.data, m.off, m.rows, m.cols, m.rs, m.cs))
                })
                .clone(),
        )
    }

    /// A mapped weight `m` (rank 2, `[k, n]`) rounded to bfloat16 and
    /// packed once, where mapped weights are kept packed (`None`: the
    /// product stays in float32, packed per call); its mapped pages are
    /// released once it is packed.
    pub fn packed_mapped_b16(&self, m: &mapped::Mapped) -> Option<std::sync::Arc<lowp::PackedB16>> {
        if !self.packs.keep_mapped || m.rank() != 2 {
            return None;
        }
        let key = mapped_key(m);
        let mut cache = self.packs.b16.lock().ok()?;
        Some(
            cache
                .entry(key)
                .or_insert_with(|| {
                    let (k, n) = (m.dims()[0], m.dims()[1]);
                    let (rs, cs) = (m.layout.stride()[0], m.layout.stride()[1]);
                    let bytes: &[u8] = &m.blob;
                    if m.dtype == Dtype::Float32 && bytes.as_ptr().align_offset(4) == 0 {
                        // float32 where it lies, read as floats (bounds
                        // checked by pack_b)
                        // SAFETY: aligned, and len / 4 floats lie in bytes
                        let data = unsafe {
                            std::slice::from_raw_parts(
                                bytes.as_ptr().cast::<f32>(),
                                bytes.len() / 4,
                            )
                        };
                        let packed = lowp::pack_b(data, m.layout.start_offset(), k, n, rs, cs);
                        m.release();
                        return std::sync::Arc::new(packed);
                    }
                    let mut rows = vec![0f32; k * n];
                    for (r, row) in rows.chunks_exact_mut(n.max(1)).enumerate().take(k) {
                        m.fill_row(r, 0, row);
                    }
                    let packed = lowp::pack_b(&rows, 0, k, n, n, 1);
                    m.release();
                    std::sync::Arc::new(packed)
                })
                .clone(),
        )
    }
}

impl Executor<'_> {
    /// `--precision bf16`: every 2-D convolution's weight (one group, a
    /// float32 weight of the program, more input channels than a stem's)
    /// rounded and laid out for [`lowp::conv`] now, at load, rather than
    /// on the first run.
    pub(super) fn prepack_bf16(&self) {
        if self.packs.bf16.is_none() {
            return;
        }
        let graph = &self.program.graph;
        let mut by_value = std::collections::HashMap::new();
        for (pos, arg) in graph.inputs.iter().enumerate() {
            if let (Argument::Tensor(v), Some(Value::Tensor(t))) = (arg, self.weights.get(&pos)) {
                by_value.insert(*v, t);
            }
        }
        let weights: Vec<&Tensor> = graph
            .nodes
            .iter()
            .filter(|n| n.target.name == "convolution" || n.target.name == "conv2d")
            .filter(|n| !matches!(n.arg("transposed"), Some(Argument::Bool(true))))
            .filter(|n| {
                matches!(
                    n.arg("groups"),
                    None | Some(Argument::Int(1)) | Some(Argument::SymInt(SymRef::Int(1)))
                )
            })
            .filter_map(|n| match n.arg("weight") {
                Some(Argument::Tensor(v)) => by_value.get(v).copied(),
                _ => None,
            })
            .filter(|t| {
                t.dtype == Dtype::Float32 && t.dims().len() == 4 && t.dims()[1] > STEM_CHANNELS_MAX
            })
            .collect();
        crate::kernels::threads::in_pool(|| {
            for t in weights {
                // (a weight the kernel cannot read is left to the run,
                // which says why)
                let _ = ops::prepack_conv_weight(self, &t.t);
            }
        });
    }
}

/// Convolutions from up to this many input channels are not laid out at
/// load: a stem's, which runs in float32 (`kernels::conv::few`).
const STEM_CHANNELS_MAX: usize = 4;

/// Where a rank-2 mapped weight lies (its storage, offset, dims and
/// strides): the key its packed forms are kept under.
fn mapped_key(m: &mapped::Mapped) -> ViewKey {
    (
        m.blob.as_ptr() as usize,
        m.layout.start_offset(),
        m.dims()[0],
        m.dims()[1],
        m.layout.stride()[0],
        m.layout.stride()[1],
    )
}
