//! `cotune` with the test-only stages, for tests that need separate processes (clusters,
//! kill -9, concurrent runs on one store).
#![forbid(unsafe_code)]

/// Large buffers on 64-byte lines, so that kernels read B where it lies without split loads
/// (see `kernels::LineAligned`).
#[global_allocator]
static ALLOCATOR: kernels::LineAligned = kernels::LineAligned;

fn main() -> std::process::ExitCode {
    let code = pipeline::cli::main_with(std::env::args(), |_| e2e::table());
    std::process::ExitCode::from(code)
}
