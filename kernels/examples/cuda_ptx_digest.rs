//! Prints a digest of the PTX of every V:N:M kernel configuration for sm_80 and sm_90, compiled
//! from the current `spmm_vnm_f16.cu` or from a source file given as argument. Diffing two
//! runs shows whether an edit of the source changes any PTX (then the register table,
//! `ptxas_resources.csv`, must be regenerated, and timings measured before the edit no longer
//! hold); a refactor that leaves all of them equal changes nothing a device could see.
//!
//! Needs `--features cuda` and libnvrtc on LD_LIBRARY_PATH (no GPU); about 5 minutes per
//! source on one core:
//! `git show main:kernels/cuda/spmm_vnm_f16.cu > /tmp/old.cu`
//! `cargo run --release -p kernels --features cuda --example cuda_ptx_digest -- /tmp/old.cu > old.txt`
//! `cargo run --release -p kernels --features cuda --example cuda_ptx_digest > new.txt && diff old.txt new.txt`

#[cfg(feature = "cuda")]
fn main() {
    use kernels::cuda::{all_configs, compile_ptx_from, KernelSource, CI_ARCHS};
    let kernel = KernelSource::SpmmVnmF16;
    let text = match std::env::args().nth(1) {
        Some(path) => std::fs::read_to_string(&path).unwrap_or_else(|e| {
            eprintln!("{path}: {e}");
            std::process::exit(2)
        }),
        None => kernel.text().to_string(),
    };
    let (vnm, _) = all_configs();
    for arch in CI_ARCHS {
        for c in &vnm {
            match compile_ptx_from(kernel, &text, &c.defines(), arch) {
                Ok(ptx) => println!("{arch} {c} {}", blake3::hash(ptx.as_bytes()).to_hex()),
                Err(e) => {
                    eprintln!("{c} {arch}: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("cuda_ptx_digest needs --features cuda");
    std::process::exit(2);
}
