//! A read-only ZIP reader over a memory map, for `.pt2` archives and the
//! `torch.save` zips nested in them.
//!
//! torch writes stored (uncompressed) members at 64-byte aligned offsets, so
//! a member is a window of the map: weights reach the output without a copy.
//! The local headers carry zero sizes (a data descriptor follows the data),
//! so the central directory is the source of truth. ZIP64 end records and
//! extras are read; deflated members are inflated (other writers use them).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use crate::blob::Blob;
use crate::error::{Error, Result};

#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    pub method: u16,
    pub crc32: u32,
    pub compressed_size: u64,
    pub size: u64,
    pub header_offset: u64,
}

pub struct Archive {
    /// The file name, for messages.
    pub path: String,
    data: Blob,
    entries: Vec<Entry>,
    by_name: BTreeMap<String, usize>,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or([0; 4]))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
}

impl Archive {
    /// Memory-maps and indexes a file.
    pub fn open(path: &Path) -> Result<Archive> {
        let shown = path.display().to_string();
        let file = File::open(path).map_err(|e| Error::io(&shown, e))?;
        let len = file.metadata().map_err(|e| Error::io(&shown, e))?.len();
        let data = if len == 0 {
            Blob::owned(Vec::new())
        } else {
            // Mapped (or read, with --no-mmap); see output::inputs for what
            // happens when the archive changes while mapped.
            match crate::output::inputs::map(&file, Some(path), &shown) {
                Ok(map) => {
                    let n = map.len();
                    let origin = crate::blob::FileOrigin::of(path, &file).map(Arc::new);
                    Blob::mapped_from(map, Some(Arc::new(file)), 0..n, origin)
                }
                Err(_) => {
                    let mut bytes = Vec::new();
                    File::open(path)
                        .and_then(|mut f| f.read_to_end(&mut bytes))
                        .map_err(|e| Error::io(&shown, e))?;
                    Blob::owned(bytes)
                }
            }
        };
        Archive::from_blob(shown, data)
    }

    /// Indexes bytes already in memory (a nested zip).
    pub fn from_blob(path: String, data: Blob) -> Result<Archive> {
        let entries = read_central_directory(&data).map_err(|e| e.at(path.clone()))?;
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        Ok(Archive {
            path,
            data,
            entries,
            by_name,
        })
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// The bytes of a member, checked against its CRC.
    pub fn member(&self, name: &str) -> Result<Blob> {
        self.member_checked(name, true)
    }

    /// The bytes of a large member whose CRC is checked later, while it is
    /// streamed out ([`Blob::write_range_to`]) or by [`Blob::verify`]: the
    /// weights are read once, not twice.
    pub fn member_deferred(&self, name: &str) -> Result<Blob> {
        self.member_checked(name, false)
    }

    /// The bytes of a member without any CRC check (sizes still checked).
    pub fn member_unverified(&self, name: &str) -> Result<Blob> {
        let blob = self.member_checked(name, false)?;
        Ok(blob.without_pending_crc())
    }

    fn member_checked(&self, name: &str, check_now: bool) -> Result<Blob> {
        let index = *self.by_name.get(name).ok_or_else(|| {
            Error::bad_input(format!("{}: member '{name}' is missing", self.path))
        })?;
        let place = format!("{}: member '{name}'", self.path);
        let entry = &self.entries[index];
        let blob = self
            .read_entry(entry, check_now || entry.method != 0)
            .map_err(|e| e.at(place.clone()))?;
        Ok(if check_now || entry.method != 0 {
            blob
        } else {
            blob.with_pending_crc(entry.crc32, &place)
        })
    }

    /// The bytes at `offset..offset + len` of the file, when they lie
    /// inside the data of one stored (uncompressed) member; with that
    /// member's CRC pending when they are all of it. Only such windows may
    /// be passed by reference (see `wire`): a stream cannot point a tool
    /// at arbitrary bytes of an arbitrary file.
    pub fn stored_window(&self, offset: u64, len: u64) -> Option<Blob> {
        let d = &self.data;
        for e in self.entries.iter().filter(|e| e.method == 0) {
            let h = usize::try_from(e.header_offset).ok()?;
            if h.checked_add(30).is_none_or(|end| end > d.len()) || u32_at(d, h) != 0x0403_4b50 {
                continue;
            }
            let start = (h + 30 + u16_at(d, h + 26) as usize + u16_at(d, h + 28) as usize) as u64;
            let end = start.saturating_add(e.compressed_size);
            if offset >= start
                && offset.checked_add(len).is_some_and(|o| o <= end)
                && end <= d.len() as u64
            {
                let blob = d.slice(offset as usize..(offset + len) as usize);
                return Some(if offset == start && len == e.size {
                    blob.with_pending_crc(e.crc32, &format!("{}: member '{}'", self.path, e.name))
                } else {
                    blob
                });
            }
        }
        None
    }

    fn read_entry(&self, e: &Entry, check_crc: bool) -> Result<Blob> {
        let d = &self.data;
        let h = usize::try_from(e.header_offset).unwrap_or(usize::MAX);
        if h.checked_add(30).is_none_or(|end| end > d.len()) || u32_at(d, h) != 0x0403_4b50 {
            return Err(Error::bad_input(
                "local header is missing or outside the file (truncated archive?)",
            ));
        }
        let start = h + 30 + u16_at(d, h + 26) as usize + u16_at(d, h + 28) as usize;
        let csize = usize::try_from(e.compressed_size).unwrap_or(usize::MAX);
        let end = start.saturating_add(csize);
        if end > d.len() {
            return Err(Error::bad_input(format!(
                "data runs past the end of the file ({} bytes needed at offset {start}, file is {} bytes): truncated archive",
                csize,
                d.len()
            )));
        }
        let blob = match e.method {
            0 => d.slice(start..end),
            8 => {
                // Deflate expands at most 1032:1; a directory that claims
                // more is lying, and inflation stops one byte past the
                // size claimed (a bomb is refused, not inflated).
                if e.size / 1032 > csize as u64 {
                    return Err(Error::bad_input(format!(
                        "size {} bytes is more than {csize} deflated bytes can hold",
                        e.size
                    )));
                }
                let mut out = Vec::with_capacity(e.size.min(1 << 26) as usize);
                flate2::read::DeflateDecoder::new(&d[start..end])
                    .take(e.size + 1)
                    .read_to_end(&mut out)
                    .map_err(|err| Error::bad_input(format!("cannot inflate: {err}")))?;
                Blob::owned(out)
            }
            m => {
                return Err(Error::unsupported(format!(
                    "compression method {m} (only stored and deflate are read)"
                )))
            }
        };
        if blob.len() as u64 != e.size {
            return Err(Error::bad_input(format!(
                "size is {} bytes, the directory says {}",
                blob.len(),
                e.size
            )));
        }
        let crc = if check_crc { blob.crc32() } else { e.crc32 };
        if crc != e.crc32 {
            return Err(Error::bad_input(format!(
                "CRC mismatch (0x{crc:08x}, the directory says 0x{:08x}): corrupt archive",
                e.crc32
            )));
        }
        Ok(blob)
    }
}

fn read_central_directory(d: &[u8]) -> Result<Vec<Entry>> {
    const EOCD: u32 = 0x0605_4b50;
    if d.len() < 22 {
        return Err(Error::bad_input(
            "not a zip archive (too short for an end-of-directory record)",
        ));
    }
    let lowest = d.len().saturating_sub(22 + 65535);
    let eocd = (lowest..=d.len() - 22)
        .rev()
        .find(|&i| u32_at(d, i) == EOCD)
        .ok_or_else(|| {
            if d.starts_with(b"PK\x03\x04") {
                Error::bad_input("zip end-of-directory record not found: truncated archive")
            } else {
                Error::bad_input("not a zip archive (no end-of-directory record)")
            }
        })?;
    let mut count = u16_at(d, eocd + 10) as u64;
    let mut cd_size = u32_at(d, eocd + 12) as u64;
    let mut cd_offset = u32_at(d, eocd + 16) as u64;
    // Where the directory's end records begin: the classic one, or the
    // ZIP64 one before it.
    let mut end_at = eocd as u64;
    // ZIP64: a locator sits right before the classic end record, and the
    // ZIP64 end record before it (where the locator says, or, as Python's
    // zipfile reads it, right before the locator: the locator's offset is
    // off by any bytes before the zip).
    if eocd >= 20 && u32_at(d, eocd - 20) == 0x0706_4b50 {
        let is_z64 = |at: usize| {
            at.checked_add(56).is_some_and(|end| end <= eocd - 20) && u32_at(d, at) == 0x0606_4b50
        };
        let said = usize::try_from(u64_at(d, eocd - 20 + 8)).unwrap_or(usize::MAX);
        let z64 = if is_z64(said) {
            said
        } else if eocd >= 76 && is_z64(eocd - 76) {
            eocd - 76
        } else {
            return Err(Error::bad_input("ZIP64 end record is missing or corrupt"));
        };
        count = u64_at(d, z64 + 32);
        cd_size = u64_at(d, z64 + 40);
        cd_offset = u64_at(d, z64 + 48);
        end_at = z64 as u64;
    }
    // Bytes before the zip (a self-extracting stub, a header): the
    // directory ends where its end records begin, so every offset it
    // holds is shifted by the difference, as Python's zipfile (and so
    // numpy) reads such a file.
    let shift = end_at
        .checked_sub(cd_size)
        .and_then(|at| at.checked_sub(cd_offset))
        .ok_or_else(|| {
            Error::bad_input(
                "central directory lies outside the file (bad offset or size): truncated or corrupt archive",
            )
        })?;
    let cd_offset = cd_offset + shift;
    let cd_end = cd_offset.saturating_add(cd_size);
    if cd_end > d.len() as u64 {
        return Err(Error::bad_input(
            "central directory lies outside the file: truncated archive",
        ));
    }
    let mut entries = Vec::with_capacity(count.min(1 << 20) as usize);
    let mut p = cd_offset as usize;
    for _ in 0..count {
        if p + 46 > cd_end as usize || u32_at(d, p) != 0x0201_4b50 {
            return Err(Error::bad_input("corrupt central directory entry"));
        }
        let method = u16_at(d, p + 10);
        let crc32 = u32_at(d, p + 16);
        let mut compressed_size = u32_at(d, p + 20) as u64;
        let mut size = u32_at(d, p + 24) as u64;
        let name_len = u16_at(d, p + 28) as usize;
        let extra_len = u16_at(d, p + 30) as usize;
        let comment_len = u16_at(d, p + 32) as usize;
        let mut header_offset = u32_at(d, p + 42) as u64;
        let name_end = p + 46 + name_len;
        let extra_end = name_end + extra_len;
        if extra_end + comment_len > cd_end as usize {
            return Err(Error::bad_input("corrupt central directory entry"));
        }
        let name = String::from_utf8_lossy(&d[p + 46..name_end]).into_owned();
        // ZIP64 extra: the fields that are 0xFFFFFFFF in the entry, in order.
        let mut x = name_end;
        while x + 4 <= extra_end {
            let id = u16_at(d, x);
            let len = u16_at(d, x + 2) as usize;
            let body = x + 4;
            if body + len > extra_end {
                break;
            }
            if id == 0x0001 {
                let mut f = body;
                for field in [&mut size, &mut compressed_size, &mut header_offset] {
                    if *field == 0xFFFF_FFFF && f + 8 <= body + len {
                        *field = u64_at(d, f);
                        f += 8;
                    }
                }
            }
            x = body + len;
        }
        entries.push(Entry {
            name,
            method,
            crc32,
            compressed_size,
            size,
            header_offset: header_offset.saturating_add(shift),
        });
        p = extra_end + comment_len;
    }
    Ok(entries)
}
