//! Writes the `ptxas -v` resources (registers, spilled bytes) of every V:N:M kernel
//! configuration for sm_80 and sm_90 as CSV on stdout: the table behind the CUDA cost model's
//! register counts (`kernels/cuda/ptxas_resources.csv`).
//!
//! Needs `--features cuda` and libnvrtc on LD_LIBRARY_PATH (NVRTC's ptxas reports them):
//! `cargo run --release -p kernels --features cuda --example cuda_resources > kernels/cuda/ptxas_resources.csv`

#[cfg(feature = "cuda")]
fn main() {
    use kernels::cuda::{all_configs, compile_program, KernelSource, CI_ARCHS};
    let (vnm, _) = all_configs();
    let mut configs = vnm;
    configs.sort();
    configs.dedup();
    println!("arch,bm,bn,bk,wm,wn,mma_k,stages,registers,spill_bytes,estimated_registers");
    for arch in CI_ARCHS {
        for c in &configs {
            let compiled = match compile_program(KernelSource::SpmmVnmF16, &c.defines(), arch) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("{c} {arch}: {e}");
                    std::process::exit(1);
                }
            };
            let Some(r) = compiled.report() else {
                eprintln!("no ptxas report for {c} on {arch} in NVRTC's log");
                std::process::exit(1);
            };
            println!(
                "{arch},{},{},{},{},{},{},{},{},{},{}",
                c.bm,
                c.bn,
                c.bk,
                c.wm,
                c.wn,
                c.mma_k,
                c.stages,
                r.registers,
                r.spill_bytes,
                c.estimated_registers()
            );
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("cuda_resources needs --features cuda");
    std::process::exit(2);
}
