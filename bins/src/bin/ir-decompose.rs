fn main() -> std::process::ExitCode {
    pt2kit_cli::ir_decompose::main()
}
