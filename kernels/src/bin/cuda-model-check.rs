//! Scores the CUDA cost model against a benchmark table of a device (the `bench.csv` that
//! `kernels/tests/cuda_bench.rs` writes): per measured point, the regret of tuning only the
//! model's first 10 % and of its first choice, and its rank correlation.
//!
//! `cargo run --release -p kernels [--features cuda] --bin cuda-model-check -- [--fit-wgmma]
//! BENCH_CSV [ARCH SMS]`
//!
//! With `--fit-wgmma` it also fits the Hopper kernel's cost model to the table's `wgmma` rows
//! (`kernels::cuda::fit_wgmma`: its constants, the objective against the prior's, each shape
//! held out) and prints the constants to put in `WgmmaConstants::PRIOR`.
//!
//! The GPU the model assumes: ARCH and SMS when given; else, built with `cuda` and a device at
//! hand, that device's limits; else the H200 (sm_90, 132 SMs) the model was fitted on.
//! `scripts/device-check.sh` runs it on each new table.

use kernels::cuda::{check_model, fit_wgmma, CudaDevice, Gpu, GpuModel};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let fit = args.iter().any(|a| a == "--fit-wgmma");
    args.retain(|a| a != "--fit-wgmma");
    let Some(path) = args.first() else {
        eprintln!("usage: cuda-model-check [--fit-wgmma] BENCH_CSV [ARCH SMS]");
        std::process::exit(2);
    };
    let gpu = match (args.get(1), args.get(2).map(|s| s.parse::<usize>())) {
        (Some(arch), Some(Ok(sms))) if sms > 0 => GpuModel {
            multiprocessors: sms,
            ..GpuModel::for_arch(arch)
        },
        (Some(_), _) => {
            eprintln!("ARCH needs SMS, a positive number");
            std::process::exit(2);
        }
        _ => match CudaDevice::new(0) {
            Ok(dev) => GpuModel::for_device(dev.info()),
            Err(_) => GpuModel::h200(),
        },
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    };
    match check_model(&text, &gpu) {
        Ok(check) => println!(
            "cost model on {} ({} SMs) against {path}:\n{check}",
            gpu.arch, gpu.multiprocessors
        ),
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    }
    if fit {
        match fit_wgmma(&text, &gpu) {
            Ok(fit) => print!("{fit}"),
            Err(e) => {
                eprintln!("{path}: {e}");
                std::process::exit(2);
            }
        }
    }
}
