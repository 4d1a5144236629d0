//! `cotune` with the product's stages, for the end-to-end tests of the real models (the
//! `cotune` binary belongs to the `pipeline` package, whose tests cannot reach this crate's
//! harness).
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    let code = pipeline::cli::main_with(std::env::args(), pipeline::real::table);
    std::process::ExitCode::from(code)
}
