//! `cotune` with the product's stages, for the end-to-end tests of the real models (the
//! `cotune` binary belongs to the `pipeline` package, whose tests cannot reach this crate's
//! harness).
#![forbid(unsafe_code)]

/// Large buffers on 64-byte lines, so that kernels read B where it lies without split loads
/// (see `kernels::LineAligned`).
#[global_allocator]
static ALLOCATOR: kernels::LineAligned = kernels::LineAligned;

fn main() -> std::process::ExitCode {
    let code = pipeline::cli::main_with(std::env::args(), pipeline::real::table);
    std::process::ExitCode::from(code)
}
