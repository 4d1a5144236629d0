//! The `cotune` binary.
#![forbid(unsafe_code)]

/// Large buffers on 64-byte lines, so that kernels read B where it lies without split loads
/// (see `kernels::LineAligned`).
#[global_allocator]
static ALLOCATOR: kernels::LineAligned = kernels::LineAligned;

use std::process::ExitCode;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        // Not eprintln!: a panic while stderr is closed (`cotune run … 2>&1 | head`) would
        // panic again inside the hook and abort the process.
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), "cotune: internal error: {info}");
    }));
    ExitCode::from(pipeline::cli::main_with(
        std::env::args(),
        pipeline::real::table,
    ))
}
