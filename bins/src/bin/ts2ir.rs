fn main() -> std::process::ExitCode {
    pt2kit_cli::ts2ir::main()
}
