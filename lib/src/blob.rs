//! Byte buffers that are either owned or a window into a memory-mapped
//! file, so weights flow from a `.pt2` archive to the output without a copy.

use std::ops::{Deref, Range};
use std::sync::Arc;

#[derive(Clone)]
pub struct Blob {
    source: Source,
    range: Range<usize>,
}

#[derive(Clone)]
enum Source {
    Owned(Arc<Vec<u8>>),
    Mapped(Arc<memmap2::Mmap>),
}

impl Blob {
    pub fn owned(bytes: Vec<u8>) -> Blob {
        let len = bytes.len();
        Blob {
            source: Source::Owned(Arc::new(bytes)),
            range: 0..len,
        }
    }

    pub fn mapped(map: Arc<memmap2::Mmap>, range: Range<usize>) -> Blob {
        Blob {
            source: Source::Mapped(map),
            range,
        }
    }

    /// A sub-window of this blob.
    pub fn slice(&self, range: Range<usize>) -> Blob {
        let start = self.range.start + range.start;
        Blob {
            source: self.source.clone(),
            range: start..start + range.len(),
        }
    }

    /// CRC-32 of the bytes, as listings show it.
    pub fn crc32(&self) -> u32 {
        crc32fast::hash(self)
    }
}

impl Deref for Blob {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.source {
            Source::Owned(v) => &v[self.range.clone()],
            Source::Mapped(m) => &m[self.range.clone()],
        }
    }
}

impl std::fmt::Debug for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Blob({} bytes)", self.len())
    }
}

impl Default for Blob {
    fn default() -> Self {
        Blob::owned(Vec::new())
    }
}
