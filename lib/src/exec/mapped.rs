//! Weights read where they lie: a large weight whose every use is a view
//! feeding a matrix product or an embedding stays a window of the mapped
//! IR file or archive ([`Mapped`]) instead of being copied into the
//! executor's memory. Views of it (`permute`, `t`, `view`, `expand`, ...)
//! change only its layout (the rows of `ops::MAPPED_VIEWS`); the products
//! read its bytes, converted to float32 block by block as the packed kernel
//! needs them ([`crate::kernels::sgemm::gemm_rows`]); an embedding copies only
//! the rows it looks up. Any other use copies the view once, into a
//! transient tensor ([`Mapped::materialize`]), so a weight mapped wrongly
//! costs time, never a wrong answer.
//!
//! The executor maps every such weight of [`MAP_MIN_BYTES`] or more (or
//! all of them, or none: [`MapWeights`]). Up to [`PACK_CACHE_BYTES`] of
//! them, a product packs its weight once from the map and keeps that (the
//! mapped pages are then released: [`Blob::release`]); above, it packs
//! each block as it reads it, every call (a few rows against a linear
//! layer's float32 weight read in place instead: [`Mapped::product_rows`]),
//! and where the mapped weights outgrow memory ([`releases_after_use`])
//! releases the pages after, so a model larger than memory runs with its
//! weights in the page cache, which the kernel can drop and read again,
//! not in the process's memory.

use candle_core::Layout;

use super::{Tensor, Value};
use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::ir::{Argument, Dtype, Graph, ValueId};
use crate::kernels::sgemm;

/// Mapped weights up to this total are packed once for the matrix kernel
/// and kept (their mapped pages released): fast repeated runs. Above it, a
/// product packs its block of the weight as it reads it, every call, and
/// releases the pages after: a model larger than memory runs.
pub const PACK_CACHE_BYTES: u64 = 1 << 30;
/// Whether the products release a mapped weight's pages after each read
/// of it, for a model larger than memory: where the mapped weights
/// (`total` bytes) exceed half of the memory the kernel reports available
/// (`MemAvailable`) as the executor starts, or where that is unknown.
/// Below it the pages stay mapped (clean file pages, which the kernel can
/// still reclaim) and no run faults them in again: 12 x `Linear(8192,
/// 8192)` (3.2 GB) at batch 1 took 143 ms a run releasing them, 49 ms
/// keeping them (ONNX Runtime, its weights copied into memory, 72 ms).
pub fn releases_after_use(total: u64) -> bool {
    available_memory().is_none_or(|a| total > a / 2)
}

/// `MemAvailable` from `/proc/meminfo`, in bytes.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb = info
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    kb.checked_mul(1024)
}

/// A weight smaller than this is copied when mapping is automatic (norms,
/// biases); [`MapWeights::Always`] maps every weight it can.
pub const MAP_MIN_BYTES: usize = 1 << 20;

/// Whether the executor maps its weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MapWeights {
    /// Each weight of [`MAP_MIN_BYTES`] or more.
    #[default]
    Auto,
    /// Every weight that is only read in place.
    Always,
    Never,
}

/// A view of a weight's bytes, in its storage.
#[derive(Clone)]
pub struct Mapped {
    pub blob: Blob,
    pub dtype: Dtype,
    pub layout: Layout,
}

impl std::fmt::Debug for Mapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Mapped({} {:?} strides {:?})",
            self.dtype.short_name(),
            self.layout.dims(),
            self.layout.stride()
        )
    }
}

/// The dtypes a mapped weight may have (the products read them as float32).
pub fn mappable_dtype(d: Dtype) -> bool {
    matches!(d, Dtype::Float32 | Dtype::BFloat16 | Dtype::Float16)
}

impl Mapped {
    pub fn dims(&self) -> &[usize] {
        self.layout.dims()
    }

    pub fn rank(&self) -> usize {
        self.layout.dims().len()
    }

    /// The bytes the view covers (elements times element size).
    pub fn nbytes(&self) -> u64 {
        self.dims().iter().product::<usize>() as u64 * self.dtype.size() as u64
    }

    /// Drops the mapped pages under this view from the process's memory
    /// (the page cache keeps them): after a product packed it, or read it.
    pub fn release(&self) {
        let es = self.dtype.size();
        let dims = self.layout.dims();
        if dims.contains(&0) {
            return;
        }
        let first = self.layout.start_offset();
        let last = dims
            .iter()
            .zip(self.layout.stride())
            .map(|(&d, &s)| (d - 1) * s)
            .sum::<usize>()
            + first;
        self.blob
            .slice(first * es..((last + 1) * es).min(self.blob.len()))
            .release();
    }

    /// The same bytes under another layout, checked to stay inside them.
    pub fn with_layout(&self, layout: Layout) -> Result<Mapped> {
        let es = self.dtype.size();
        let last = layout.dims().iter().zip(layout.stride()).try_fold(
            layout.start_offset(),
            |at, (&d, &s)| {
                if d == 0 {
                    Some(at)
                } else {
                    at.checked_add((d - 1).checked_mul(s)?)
                }
            },
        );
        let empty = layout.dims().contains(&0);
        match last {
            Some(l) if empty || (l + 1) * es <= self.blob.len() => Ok(Mapped {
                blob: self.blob.clone(),
                dtype: self.dtype,
                layout,
            }),
            _ => Err(Error::bad_input(format!(
                "a view {:?} strides {:?} from {} past the end of its weight ({} bytes)",
                layout.dims(),
                layout.stride(),
                layout.start_offset(),
                self.blob.len()
            ))),
        }
    }

    /// Element `at` (in elements from the storage's start) as float32.
    #[inline(always)]
    fn read(&self, bytes: &[u8], at: usize) -> f32 {
        match self.dtype {
            Dtype::Float32 => {
                let b = &bytes[at * 4..at * 4 + 4];
                f32::from_le_bytes([b[0], b[1], b[2], b[3]])
            }
            Dtype::BFloat16 => {
                let b = &bytes[at * 2..at * 2 + 2];
                f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16)
            }
            _ => {
                let b = &bytes[at * 2..at * 2 + 2];
                half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()
            }
        }
    }

    /// Row `r`, columns `[j0, j0 + out.len())` of a rank-2 view, as float32
    /// (the packed kernel's fill for its right operand).
    pub fn fill_row(&self, r: usize, j0: usize, out: &mut [f32]) {
        let bytes: &[u8] = &self.blob;
        let (rs, cs) = (self.layout.stride()[0], self.layout.stride()[1]);
        let mut at = self.layout.start_offset() + r * rs + j0 * cs;
        if self.dtype == Dtype::Float32 {
            // float32, the row's last element checked once (not `read`'s
            // dtype match and bounds check an element): the packing of
            // BERT's weights on the first run, one thread, 372-385 -> 361-364
            // ms of that run (its later runs read them packed)
            let last = out.len().checked_sub(1).map_or(at, |n| at + n * cs);
            if (last + 1) * 4 <= bytes.len() {
                let p = bytes.as_ptr();
                for (i, o) in out.iter_mut().enumerate() {
                    // SAFETY: at + i * cs <= last, whose 4 bytes lie in the blob
                    let b = unsafe { p.add((at + i * cs) * 4).cast::<[u8; 4]>().read_unaligned() };
                    *o = f32::from_le_bytes(b);
                }
                return;
            }
        }
        for o in out.iter_mut() {
            *o = self.read(bytes, at);
            at += cs;
        }
    }

    /// `C = A B (+ bias)` of A's few rows (`[rows, k]`, at most
    /// [`sgemm::dot::DOT_MAX_ROWS`], rows in order) and this view as B
    /// (`[k, n]`), read in place where it is float32 whose columns lie as
    /// rows (a linear layer's `[n, k]` weight seen through `t`: each C
    /// element a dot product, [`sgemm::dot`]); C (`[rows, n]`) written
    /// whole. `None` (nothing written) where it does not apply.
    pub fn product_rows(
        &self,
        a: &sgemm::View,
        bias: Option<&[f32]>,
        c: &mut [std::mem::MaybeUninit<f32>],
    ) -> Option<()> {
        let ([k, n], [rs, cs]) = (
            <[usize; 2]>::try_from(self.dims()).ok()?,
            <[usize; 2]>::try_from(self.layout.stride()).ok()?,
        );
        let rows = a.rows;
        let fits = self.dtype == Dtype::Float32
            && rs == 1
            && cs >= k
            && a.cols == k
            && a.cs == 1
            && (1..=sgemm::dot::DOT_MAX_ROWS).contains(&rows)
            && k > 0
            && n > 0
            && c.len() >= rows * n
            && bias.is_none_or(|b| b.len() >= n)
            && crate::kernels::cpu().vector;
        if !fits {
            return None;
        }
        let bytes: &[u8] = &self.blob;
        let start = self.layout.start_offset();
        let w_end = (n - 1)
            .checked_mul(cs)?
            .checked_add(start)?
            .checked_add(k)?;
        let a_end = (rows - 1)
            .checked_mul(a.rs)?
            .checked_add(a.off)?
            .checked_add(k)?;
        if w_end.checked_mul(4)? > bytes.len() || a_end > a.data.len() {
            return None;
        }
        let a = sgemm::dot::Rows {
            p: a.data[a.off..].as_ptr(),
            ld: a.rs,
            rows,
        };
        let w = sgemm::dot::Rows {
            p: bytes[start * 4..].as_ptr().cast(),
            ld: cs,
            rows: n,
        };
        // SAFETY: A's rows and W's rows checked inside their memory above
        // (W read unaligned); C holds rows x n; the kernels' ISA checked
        unsafe { sgemm::dot::dot_rows(a, w, k, bias, c.as_mut_ptr().cast(), n) };
        Some(())
    }

    /// The view copied into a contiguous tensor of its own dtype.
    pub fn materialize(&self, device: &candle_core::Device) -> Result<Tensor> {
        let es = self.dtype.size();
        let bytes: &[u8] = &self.blob;
        let dims = self.layout.dims();
        let n: usize = dims.iter().product();
        let mut out = Vec::with_capacity(n * es);
        if let Some((a, b)) = self.layout.contiguous_offsets() {
            out.extend_from_slice(&bytes[a * es..b * es]);
        } else {
            let stride = self.layout.stride();
            let mut idx = vec![0usize; dims.len()];
            for _ in 0..n {
                let at = self.layout.start_offset()
                    + idx.iter().zip(stride).map(|(i, s)| i * s).sum::<usize>();
                out.extend_from_slice(&bytes[at * es..(at + 1) * es]);
                for d in (0..dims.len()).rev() {
                    idx[d] += 1;
                    if idx[d] < dims[d] {
                        break;
                    }
                    idx[d] = 0;
                }
            }
        }
        Tensor::from_bytes(self.dtype, dims, &out, device)
    }

    /// Rows `ids` of a rank-2 view (an embedding's lookup), as a tensor of
    /// the weight's dtype `[ids.len(), cols]`; ids are checked first.
    pub fn rows(&self, ids: &[i64], device: &candle_core::Device) -> Result<Tensor> {
        let (rows, cols) = (self.dims()[0], self.dims()[1]);
        if let Some(bad) = ids.iter().find(|&&i| i < 0 || i as usize >= rows) {
            return Err(Error::bad_input(format!(
                "embedding: an id: index {bad} is out of range for a dim of size {rows}"
            )));
        }
        let es = self.dtype.size();
        let bytes: &[u8] = &self.blob;
        let (rs, cs) = (self.layout.stride()[0], self.layout.stride()[1]);
        let mut out = Vec::with_capacity(ids.len() * cols * es);
        for &i in ids {
            let start = self.layout.start_offset() + i as usize * rs;
            if cs == 1 {
                out.extend_from_slice(&bytes[start * es..(start + cols) * es]);
            } else {
                for j in 0..cols {
                    let at = start + j * cs;
                    out.extend_from_slice(&bytes[at * es..(at + 1) * es]);
                }
            }
        }
        Tensor::from_bytes(self.dtype, &[ids.len(), cols], &out, device)
    }
}

/// A weight's bytes as a mapped value (`None`: a dtype the products do not
/// read, or sizes that are not static).
pub fn of_weight(program: &crate::ir::Program, w: &crate::ir::Weight) -> Option<Mapped> {
    if !mappable_dtype(w.meta.dtype) {
        return None;
    }
    let sizes: Vec<usize> = w.meta.static_sizes()?.iter().map(|&s| s as usize).collect();
    let strides: Vec<usize> = w
        .meta
        .static_strides()?
        .iter()
        .map(|&s| usize::try_from(s).ok())
        .collect::<Option<_>>()?;
    let offset = usize::try_from(w.meta.storage_offset.as_int()?).ok()?;
    let blob = program.storages.get(w.storage as usize)?.clone();
    let m = Mapped {
        blob,
        dtype: w.meta.dtype,
        layout: Layout::new(sizes.into(), strides, offset),
    };
    m.with_layout(m.layout.clone()).ok()
}

/// Whether every use of `v` in `graph` is a view that keeps it mapped
/// (`views`: ops with a row in `ops::MAPPED_VIEWS`) or an argument that
/// reads it in place (`reads`: op and argument name), recursively through
/// the views; a graph output or a subgraph's use is not.
pub fn only_read_in_place(
    graph: &Graph,
    v: ValueId,
    views: &dyn Fn(&str) -> bool,
    reads: &[(&str, &str)],
) -> bool {
    if graph.outputs.iter().any(|a| refers(a, v)) {
        return false;
    }
    let mut used = false;
    for node in &graph.nodes {
        let op = node.target.to_string();
        for arg in &node.inputs {
            if !refers(&arg.arg, v) {
                continue;
            }
            used = true;
            if reads.iter().any(|(o, a)| *o == op && *a == arg.name) {
                continue;
            }
            let is_view = views(&op) && matches!(arg.name.as_str(), "self" | "input");
            let outs: Vec<ValueId> = crate::ir::defined_tensors(node);
            if !is_view || outs.len() != 1 || !only_read_in_place(graph, outs[0], views, reads) {
                return false;
            }
        }
    }
    used
}

fn refers(a: &Argument, v: ValueId) -> bool {
    let mut refs = Vec::new();
    a.value_refs(&mut refs);
    refs.contains(&v)
}

/// A value as a tensor, a mapped view copied first.
pub fn tensor_of(value: Value, device: &candle_core::Device) -> Result<Value> {
    match value {
        Value::Mapped(m) => Ok(Value::Tensor(m.materialize(device)?)),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A linear layer's `[n, k]` weight at an odd byte offset of its
    /// storage, seen as `[k, n]` (`t`), times a few rows: read in place,
    /// against a float64 reference; a layout whose B rows lie as rows is
    /// not taken (`None`, nothing written).
    #[test]
    fn product_rows_reads_a_linear_weight_in_place() {
        if !crate::kernels::cpu().vector {
            return;
        }
        let (m, k, n) = (3, 70, 33);
        let w = sgemm::tests::values(n * k, 7);
        let x = sgemm::tests::values(m * k, 8);
        let mut bytes = vec![0u8; 1];
        bytes.extend(w.iter().flat_map(|v| v.to_le_bytes()));
        let blob = Blob::owned(bytes).slice(1..1 + n * k * 4);
        let view = |stride: [usize; 2]| Mapped {
            blob: blob.clone(),
            dtype: Dtype::Float32,
            layout: Layout::new(candle_core::Shape::from((k, n)), stride.to_vec(), 0),
        };
        let a = sgemm::View::row_major(&x, m, k);
        let mut c = sgemm::uninit(m * n);
        assert_eq!(view([1, k]).product_rows(&a, None, &mut c), Some(()));
        // SAFETY: written whole by product_rows
        let c = unsafe { sgemm::assume_init(c) };
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k)
                    .map(|p| x[i * k + p] as f64 * w[j * k + p] as f64)
                    .sum();
                assert!(
                    (c[i * n + j] as f64 - want).abs() < 1e-4,
                    "C[{i}, {j}] {} vs {want}",
                    c[i * n + j]
                );
            }
        }
        let mut other = sgemm::uninit(m * n);
        assert_eq!(view([n, 1]).product_rows(&a, None, &mut other), None);
    }
}
