fn main() -> std::process::ExitCode {
    pt2kit_cli::pt2ir::main()
}
