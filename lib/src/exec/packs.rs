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
}

impl PackCache {
    /// A cache that keeps the views of the storages at `weights`, and
    /// mapped weights' packs where `keep_mapped`.
    pub(super) fn new(
        weights: std::collections::HashSet<usize>,
        keep_mapped: bool,
        release_mapped: bool,
    ) -> PackCache {
        PackCache {
            weights,
            keep_mapped,
            release_mapped,
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
        pack: fn(&sgemm::View) -> T,
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
        let key = (
            m.blob.as_ptr() as usize,
            m.layout.start_offset(),
            m.dims()[0],
            m.dims()[1],
            m.layout.stride()[0],
            m.layout.stride()[1],
        );
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
