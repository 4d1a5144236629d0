//! `cotune` with the test-only stages, for tests that need separate processes (clusters,
//! kill -9, concurrent runs on one store).
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    let code = pipeline::cli::main_with(std::env::args(), |_| e2e::table());
    std::process::ExitCode::from(code)
}
