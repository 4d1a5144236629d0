//! The `cotune` binary.
#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("cotune: internal error: {info}");
    }));
    ExitCode::from(pipeline::cli::main_with(
        std::env::args(),
        pipeline::real::table,
    ))
}
