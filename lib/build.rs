//! Generates the wire-format code from `proto/pt2ir.proto` with the
//! pure-Rust protobuf parser, so building needs no `protoc` binary.
fn main() {
    println!("cargo:rerun-if-changed=proto/pt2ir.proto");
    protobuf_codegen::Codegen::new()
        .pure()
        .include("proto")
        .input("proto/pt2ir.proto")
        .cargo_out_dir("proto")
        .run_from_script();
}
