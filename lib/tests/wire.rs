//! The IR stream refuses what it cannot trust: truncation, a newer major
//! version, and text or archives handed to a tool that reads binary IR.

mod common;

use common::*;
use pt2kit::import::pt2::{read_pt2, ImportOptions};
use pt2kit::{text, wire, ErrorKind};

fn mlp_stream() -> Vec<u8> {
    let p = read_pt2(
        &repo().join("golden/models/mlp.pt2"),
        &ImportOptions::default(),
    )
    .unwrap();
    wire::encode_program(&p).unwrap()
}

fn read_err(bytes: &[u8]) -> pt2kit::Error {
    wire::read_program(&mut &bytes[..], "in.ir").unwrap_err()
}

#[test]
fn truncated_streams_are_refused_at_every_cut() {
    let full = mlp_stream();
    for cut in [0, 5, 8, 9, 20, full.len() / 2, full.len() - 1] {
        let e = read_err(&full[..cut]);
        assert_eq!(e.kind, ErrorKind::BadInput, "cut {cut}: {e}");
        assert!(e.to_string().starts_with("in.ir: "), "{e}");
    }
}

#[test]
fn a_newer_major_version_is_refused() {
    let mut bytes = mlp_stream();
    // header record: length byte, then field 1 (format_major) = 1
    assert_eq!(&bytes[9..11], &[0x08, 0x01]);
    bytes[10] = 2;
    let e = read_err(&bytes);
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert!(e.to_string().contains("IR format 2.2"), "{e}");
}

#[test]
fn text_yaml_and_archives_are_named_when_refused() {
    let p = read_pt2(
        &repo().join("golden/models/mlp.pt2"),
        &ImportOptions::default(),
    )
    .unwrap();
    let e = read_err(text::listing(&p).as_bytes());
    assert!(e.to_string().contains("a text listing"), "{e}");
    let e = read_err(text::yaml(&p).unwrap().as_bytes());
    assert!(e.to_string().contains("YAML"), "{e}");
    let e = read_err(&std::fs::read(repo().join("golden/models/mlp.pt2")).unwrap());
    assert!(e.to_string().contains("convert it with pt2ir first"), "{e}");
}

#[test]
fn corrupt_value_ids_fail_validation() {
    let mut p = read_pt2(
        &repo().join("golden/models/mlp.pt2"),
        &ImportOptions::default(),
    )
    .unwrap();
    p.graph.nodes[0].inputs[0].arg = pt2kit::ir::Argument::Tensor(pt2kit::ir::ValueId(9999));
    let bytes = wire::encode_program(&p).unwrap();
    let e = read_err(&bytes);
    assert_eq!(e.kind, ErrorKind::BadInput);
    assert!(e.to_string().contains("out of range"), "{e}");
}

fn read_file_bytes(bytes: &[u8]) -> pt2kit::Result<pt2kit::ir::Program> {
    let mut tmp = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut tmp, bytes).unwrap();
    let file = std::fs::File::open(tmp.path()).unwrap();
    wire::read_program_file(file, None, "in.ir")
}

/// Chunks of 16 MiB (the writer's own are 1 GiB: tests split storages
/// without gigabytes of them).
const TEST_CHUNK: usize = 16 << 20;

fn encode_chunked(p: &pt2kit::ir::Program) -> Vec<u8> {
    let mut out = Vec::new();
    wire::write_program_chunked(p, &mut out, wire::Weights::Inline, TEST_CHUNK).unwrap();
    out
}

/// A stream whose first storage spans several chunks (> 16 MiB), so the
/// file reader takes both paths: windows and the copying fallback.
fn multi_chunk_stream() -> Vec<u8> {
    let mut p = read_pt2(
        &repo().join("golden/models/mlp.pt2"),
        &ImportOptions::default(),
    )
    .unwrap();
    let mut big: Vec<u8> = (0..(17usize << 20) + 3)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    big[..p.storages[0].len()].copy_from_slice(&p.storages[0]);
    p.storages[0] = pt2kit::blob::Blob::owned(big);
    encode_chunked(&p)
}

#[test]
fn a_mapped_file_reads_as_the_stream_does() {
    for full in [mlp_stream(), multi_chunk_stream()] {
        let from_stream = wire::read_program(&mut &full[..], "in.ir").unwrap();
        let from_file = read_file_bytes(&full).unwrap();
        assert_eq!(from_file.storages.len(), from_stream.storages.len());
        for (a, b) in from_file.storages.iter().zip(&from_stream.storages) {
            assert!(a[..] == b[..], "storage bytes differ");
        }
        assert_eq!(text::listing(&from_file), text::listing(&from_stream));
        assert!(encode_chunked(&from_file) == full);
    }
}

/// A stream above the spool threshold: its storages go to an unlinked
/// temporary file, mapped; the program is the same, byte for byte, and
/// truncation is still refused with the stream's message.
#[test]
fn a_large_stream_is_spooled_and_reads_the_same() {
    let full = multi_chunk_stream();
    let in_memory = wire::read_program(&mut &full[..], "in.ir").unwrap();
    // Only the wire reader reads the variable; another test of this binary
    // reading a stream meanwhile would spool too, to the same result.
    std::env::set_var("PT2KIT_SPOOL_BYTES", "0");
    let spooled = wire::read_program(&mut &full[..], "in.ir");
    let cut = wire::read_program(&mut &full[..full.len() - 1000], "in.ir").unwrap_err();
    std::env::remove_var("PT2KIT_SPOOL_BYTES");
    let spooled = spooled.unwrap();
    for (a, b) in spooled.storages.iter().zip(&in_memory.storages) {
        assert!(a[..] == b[..], "storage bytes differ");
    }
    assert!(encode_chunked(&spooled) == full);
    assert_eq!(
        cut.to_string(),
        read_err(&full[..full.len() - 1000]).to_string()
    );
}

#[test]
fn truncated_files_are_refused_at_every_cut() {
    for full in [mlp_stream(), multi_chunk_stream()] {
        let len = full.len();
        for cut in [0, 5, 8, 9, 20, len / 2, len - 1000, len - 1] {
            let e = read_file_bytes(&full[..cut]).unwrap_err();
            assert_eq!(e.kind, ErrorKind::BadInput, "cut {cut}: {e}");
            assert_eq!(
                e.to_string(),
                read_err(&full[..cut]).to_string(),
                "cut {cut}"
            );
        }
    }
}

fn by_reference(p: &pt2kit::ir::Program) -> Vec<u8> {
    let mut out = Vec::new();
    wire::write_program_with(p, &mut out, wire::Weights::Reference).unwrap();
    out
}

/// Weights stored in a .pt2 can travel by reference: the stream holds the
/// archive's path and each storage's place in it, and the reader maps the
/// archive; the program read back is the same, byte for byte.
#[test]
fn weights_by_reference_read_back_the_same_program() {
    let p = read_pt2(
        &repo().join("golden/models/bert.pt2"),
        &ImportOptions::default(),
    )
    .unwrap();
    let inline = wire::encode_program(&p).unwrap();
    let refs = by_reference(&p);
    let weight_bytes: usize = p.storages.iter().map(|s| s.len()).sum();
    assert!(
        refs.len() + weight_bytes / 2 < inline.len(),
        "{} vs {}",
        refs.len(),
        inline.len()
    );
    let back = wire::read_program(&mut refs.as_slice(), "refs.ir").unwrap();
    for (a, b) in p.storages.iter().zip(&back.storages) {
        assert_eq!(&a[..], &b[..]);
    }
    assert_eq!(text::listing(&p), text::listing(&back));
    assert_eq!(wire::encode_program(&back).unwrap(), inline);
}

#[test]
fn a_reference_to_a_changed_or_missing_archive_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("cnn.pt2");
    std::fs::copy(repo().join("golden/models/cnn.pt2"), &copy).unwrap();
    let p = read_pt2(&copy, &ImportOptions::default()).unwrap();
    let refs = by_reference(&p);
    drop(p);
    // Rewritten (new modification time): refused, not read as it is now.
    let bytes = std::fs::read(&copy).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&copy, &bytes).unwrap();
    let e = read_err(&refs);
    assert_eq!(e.kind, ErrorKind::BadInput);
    assert!(
        e.to_string()
            .contains("has changed since the stream was written"),
        "{e}"
    );
    std::fs::remove_file(&copy).unwrap();
    let e = read_err(&refs);
    assert!(e.to_string().contains("cannot be read"), "{e}");
    assert!(e.to_string().starts_with("in.ir: storage "), "{e}");
}

/// Only the data of a stored member can be referenced: a stream cannot
/// point a tool at other bytes of a file (headers, directory) or at a file
/// that is not an archive.
#[test]
fn only_stored_member_data_can_be_referenced() {
    let path = repo().join("golden/models/mlp.pt2");
    let archive = pt2kit::zip::Archive::open(&path).unwrap();
    assert!(
        archive.stored_window(0, 30).is_none(),
        "a local header is not member data"
    );
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(
        archive.stored_window(len - 22, 22).is_none(),
        "the end record is not member data"
    );
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("mlp.pt2");
    std::fs::copy(&path, &fake).unwrap();
    let p = read_pt2(&fake, &ImportOptions::default()).unwrap();
    let refs = by_reference(&p);
    drop(p);
    // The same size and time, but not an archive any more.
    let mtime = std::fs::metadata(&fake).unwrap().modified().unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&fake).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(&vec![0u8; len as usize], 0).unwrap();
    f.set_modified(mtime).unwrap();
    drop(f);
    let e = read_err(&refs);
    assert_eq!(e.kind, ErrorKind::BadInput, "{e}");
    assert!(e.to_string().contains("archive it refers to"), "{e}");
}

/// `cond.pt2` with its true branch replaced by the whole program's graph,
/// `depth` times over.
fn nested_cond(depth: usize) -> pt2kit::ir::Program {
    use pt2kit::ir::Argument;
    let p = read_pt2(
        &repo().join("golden/models/cond.pt2"),
        &ImportOptions::default(),
    )
    .unwrap();
    let mut g = p.graph.clone();
    for _ in 0..depth {
        let mut outer = p.graph.clone();
        let slot = outer
            .nodes
            .iter_mut()
            .flat_map(|n| n.inputs.iter_mut())
            .find_map(|a| match &mut a.arg {
                Argument::Graph(sub) => Some(sub),
                _ => None,
            })
            .expect("cond.pt2 has a subgraph");
        *slot.graph = g;
        g = outer;
    }
    pt2kit::ir::Program { graph: g, ..p }
}

#[test]
fn subgraphs_nested_past_the_limit_are_refused() {
    let limit = pt2kit::ir::MAX_GRAPH_DEPTH;
    // the innermost copy's branches are one level below it
    pt2kit::ir::validate(&nested_cond(limit - 1)).unwrap();
    let e = pt2kit::ir::validate(&nested_cond(limit)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::BadInput, "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "graph: subgraphs nested {} deep: at most {limit} levels are accepted",
            limit + 1
        )
    );
    // Read from a stream, protobuf's own limit on nested messages stops a
    // deep program first: an error, never a stack overflow.
    let bytes = wire::encode_program(&nested_cond(200)).unwrap();
    let e = read_err(&bytes);
    assert_eq!(e.kind, ErrorKind::BadInput, "{e}");
}

/// bert's IR written inline to a file in `dir`, and read back through a
/// map (its storages windows of the file, which can go by reference).
fn bert_ir_file(dir: &std::path::Path) -> (std::path::PathBuf, pt2kit::ir::Program) {
    let p = read_pt2(
        &repo().join("golden/models/bert.pt2"),
        &ImportOptions::default(),
    )
    .unwrap();
    let path = dir.join("bert.ir");
    std::fs::write(&path, wire::encode_program(&p).unwrap()).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    let back = wire::read_program_file(f, Some(&path), "bert.ir").unwrap();
    (path, back)
}

/// A program read from an IR file passes its weights on by reference
/// into that file: the stream is small, reads back the same, and is
/// refused once the file changes.
#[test]
fn weights_by_reference_into_an_ir_file_read_back_the_same_program() {
    let dir = tempfile::tempdir().unwrap();
    let (path, p) = bert_ir_file(dir.path());
    let inline = wire::encode_program(&p).unwrap();
    let refs = by_reference(&p);
    let weight_bytes: usize = p.storages.iter().map(|s| s.len()).sum();
    assert!(
        refs.len() + weight_bytes / 2 < inline.len(),
        "{} vs {}",
        refs.len(),
        inline.len()
    );
    let back = wire::read_program(&mut refs.as_slice(), "refs.ir").unwrap();
    for (a, b) in p.storages.iter().zip(&back.storages) {
        assert_eq!(&a[..], &b[..]);
    }
    assert_eq!(text::listing(&p), text::listing(&back));
    // passed on again, the references still point into bert.ir
    assert_eq!(by_reference(&back), refs);
    drop((p, back));
    let bytes = std::fs::read(&path).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&path, &bytes).unwrap();
    let e = read_err(&refs);
    assert!(e.to_string().contains("has changed"), "{e}");
}

/// A reference into an IR file must lie in the data of one storage
/// chunk: not its header, nor its program record, nor across chunks.
#[test]
fn only_storage_chunk_data_of_an_ir_file_can_be_referenced() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut p) = bert_ir_file(dir.path());
    let whole = {
        let f = std::fs::File::open(&path).unwrap();
        let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
        let origin = pt2kit::blob::FileOrigin::of_kind(&path, &f, pt2kit::blob::OriginKind::IrFile);
        let n = map.len();
        pt2kit::blob::Blob::mapped_from(
            std::sync::Arc::new(map),
            Some(std::sync::Arc::new(f)),
            0..n,
            origin.map(std::sync::Arc::new),
        )
    };
    let first = p.storages[0].len();
    for at in [0, 8, whole.len() - first] {
        p.storages[0] = whole.slice(at..at + first);
        let e = read_err(&by_reference(&p));
        assert_eq!(e.kind, ErrorKind::BadInput, "{e}");
        assert!(
            e.to_string().contains("nor of a storage chunk"),
            "at {at}: {e}"
        );
    }
}

/// A reference that names another process's open file as a spool is
/// refused unless that file is a pt2kit spool (here: a regular file this
/// test holds open).
#[test]
fn a_spool_reference_must_name_a_spool() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.bin");
    std::fs::write(&secret, vec![1u8; 64]).unwrap();
    let f = std::fs::File::open(&secret).unwrap();
    let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
    let origin = pt2kit::blob::FileOrigin::spool(&f).map(std::sync::Arc::new);
    let blob = pt2kit::blob::Blob::mapped_from(
        std::sync::Arc::new(map),
        Some(std::sync::Arc::new(f)),
        0..64,
        origin,
    );
    let mut p = read_pt2(
        &repo().join("golden/models/mlp.pt2"),
        &ImportOptions::default(),
    )
    .unwrap();
    p.storages.push(blob);
    let mut out = Vec::new();
    let handed =
        wire::write_program_unwaited(&p, &mut out, wire::Weights::Handover, 1 << 20).unwrap();
    assert_eq!(handed.len(), 1);
    let e = read_err(&out);
    assert!(e.to_string().contains("no spool of a pt2kit tool"), "{e}");
    // Without a hand-over (a file, or a reader that takes none) the same
    // storage goes inline.
    let mut out = Vec::new();
    let handed =
        wire::write_program_unwaited(&p, &mut out, wire::Weights::Reference, 1 << 20).unwrap();
    assert!(handed.is_empty());
    let back = wire::read_program(&mut out.as_slice(), "in.ir").unwrap();
    assert_eq!(&back.storages.last().unwrap()[..], &[1u8; 64][..]);
}
