//! The `cuda` backend through the real `cotune` binary (real stages, a tiny synthetic model).
//!
//! Without a device (built without feature `cuda`, no NVIDIA driver, or its devices hidden by
//! `CUDA_VISIBLE_DEVICES=""`, as the first test runs it) a cuda experiment fails its cuda
//! kernel-tune rows with the reason, completes with exit code 1, and leaves the CPU trials
//! exactly as a CPU-only run computes them. With a device (`--features cuda` on a GPU machine)
//! it tunes a V:N:M shape with random(budget 3) and evaluates the model end to end: that test is
//! `#[ignore]`d, and the device script runs the same path through `experiments/cuda-smoke.toml`.

use results::{Row, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The `cotune` built with these tests, or `$COTUNE_BIN` (the device check runs this test's
/// binary on another machine, beside a `cotune` built with `--features cuda`).
fn cotune() -> String {
    std::env::var("COTUNE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_cotune").to_owned())
}

/// A 16-32-4 MLP pruned to 2:4 (N:M and 16:2:4 V:N:M), tuned with random(budget 3).
fn experiment(backends: &str) -> String {
    format!(
        r#"
name = "cuda-backend"
seed = 3
[dataset]
source = "synthetic"
samples = 120
features = 16
classes = 4
[model]
kind = "mlp"
hidden = [32]
[train]
epochs = 1
batch_size = 16
lr = [1e-2]
[prune]
pattern = ["nm", "vnm"]
nm = ["2:4"]
v = [16]
method = ["magnitude"]
finetune_epochs = 1
[kernel_tune]
backend = {backends}
strategy = "random"
budget = 3
batch_tokens = [8]
[evaluate]
batch_sizes = [1, 8]
"#
    )
}

/// Runs `cotune run` on `text` with a store and output folder under `dir`; returns the exit
/// code and the experiment's tables.
fn run(dir: &Path, name: &str, text: &str) -> (i32, Vec<(String, Vec<Row>)>) {
    run_with(dir, name, text, &[])
}

/// [`run`] with extra environment variables for `cotune`.
fn run_with(
    dir: &Path,
    name: &str,
    text: &str,
    env: &[(&str, &str)],
) -> (i32, Vec<(String, Vec<Row>)>) {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, text).expect("write experiment");
    let out = dir.join(format!("{name}-out"));
    let output = Command::new(cotune())
        .arg("run")
        .arg(&file)
        .arg("--store")
        .arg(dir.join("store"))
        .arg("--out")
        .arg(&out)
        .arg("-q")
        .env_remove("COTUNE_STORE")
        .envs(env.iter().copied())
        .output()
        .expect("run cotune");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    let tables = ["train", "prune", "kernel_tune", "evaluate"]
        .iter()
        .map(|s| {
            let rows = results::read_table(&out.join("cuda-backend").join(s)).expect("table");
            (s.to_string(), rows)
        })
        .collect();
    (output.status.code().unwrap_or(-1), tables)
}

fn text(row: &Row, col: &str) -> String {
    match row.get(col) {
        Some(Value::Str(s)) => s.clone(),
        _ => String::new(),
    }
}

fn num(row: &Row, col: &str) -> f64 {
    row.get(col).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

fn backend(stage: &str, row: &Row) -> String {
    text(row, &format!("{stage}.backend"))
}

#[test]
fn without_a_device_cuda_trials_fail_with_the_reason_and_cpu_trials_are_unaffected() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (cpu_code, cpu) = run(dir.path(), "cpu", &experiment(r#"["cpu"]"#));
    assert_eq!(cpu_code, 0, "the CPU-only run succeeds");
    let no_gpu = [("CUDA_VISIBLE_DEVICES", "")];
    let (code, both) = run_with(
        dir.path(),
        "both",
        &experiment(r#"["cpu", "cuda"]"#),
        &no_gpu,
    );
    assert_eq!(code, 1, "failed cuda trials make the run exit 1");

    let kt = &both[2].1;
    let cuda_tunes: Vec<&Row> = kt
        .iter()
        .filter(|r| backend("kernel_tune", r) == "cuda")
        .collect();
    assert!(!cuda_tunes.is_empty(), "the cuda tunings have rows");
    let reasons: BTreeSet<String> = cuda_tunes.iter().map(|r| text(r, "error")).collect();
    assert_eq!(
        reasons.len(),
        1,
        "one reason for every cuda row: {reasons:?}"
    );
    // Where this process has no device either, the reason is exactly the one it gets.
    let here = kernels::cuda::CudaDevice::new(0)
        .err()
        .map(|e| e.to_string());
    for r in &cuda_tunes {
        let err = text(r, "error");
        assert_eq!(text(r, "status"), "failed");
        assert!(err.starts_with("cuda backend unavailable: "), "{err}");
        if let Some(reason) = &here {
            assert_eq!(err, format!("cuda backend unavailable: {reason}"));
            if !kernels::cuda::CUDA_ENABLED {
                assert!(err.contains("built without CUDA"), "{err}");
            } else if reason.contains("libcuda") {
                assert!(err.contains("no NVIDIA driver found"), "{err}");
            }
        }
        assert!(text(r, "device").starts_with("unavailable: "));
        // The tensor-core kernels (2:4 and 16:2:4 on rows in multiples of 16) and cuBLAS are
        // fp16; the rest runs on the fp32 CSR kernel.
        let tensor_core = num(r, "format.rows") % 16.0 == 0.0;
        let cublas = text(r, "format.pattern") == "dense";
        let want = if tensor_core || cublas { "f16" } else { "f32" };
        assert_eq!(text(r, "kernel_tune.dtype"), want, "{}", text(r, "key"));
    }
    assert!(kt
        .iter()
        .filter(|r| backend("kernel_tune", r) == "cpu")
        .all(|r| text(r, "kernel_tune.dtype") == "f32"));
    let cuda_evals: Vec<&Row> = both[3]
        .1
        .iter()
        .filter(|r| backend("evaluate", r) == "cuda")
        .collect();
    assert_eq!(cuda_evals.len(), 2, "one cuda evaluation per pruned model");
    assert!(cuda_evals.iter().all(|r| text(r, "status") == "failed"));

    // Every CPU row of the mixed run is a row of the CPU-only run: same keys, all ok.
    for ((stage, alone), (_, mixed)) in cpu.iter().zip(&both) {
        let keys = |rows: &[Row]| -> BTreeSet<String> {
            rows.iter()
                .filter(|r| backend(stage, r) != "cuda")
                .map(|r| text(r, "key"))
                .collect()
        };
        assert!(!alone.is_empty(), "{stage} has rows");
        assert_eq!(keys(alone), keys(mixed), "{stage}: CPU keys");
        assert!(mixed
            .iter()
            .filter(|r| backend(stage, r) != "cuda")
            .all(|r| text(r, "status") == "ok"));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU (--features cuda); scripts/device-check.sh runs it"]
fn on_a_gpu_a_vnm_shape_is_tuned_and_the_model_evaluated_end_to_end() {
    let fingerprint = match kernels::cuda::CudaDevice::new(0) {
        Ok(d) => kernels::cuda::Gpu::info(&d).fingerprint(),
        Err(e) => panic!("this test needs a CUDA device: {e}"),
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let exp =
        experiment(r#"["cuda"]"#).replace(r#"pattern = ["nm", "vnm"]"#, r#"pattern = ["vnm"]"#);
    let (code, tables) = run(dir.path(), "gpu", &exp);
    let kt = &tables[2].1;
    for r in kt {
        eprintln!(
            "{} {} {} {} {}",
            text(r, "kernel"),
            text(r, "params"),
            num(r, "latency_us_median"),
            text(r, "point_error"),
            text(r, "error")
        );
    }
    assert_eq!(code, 0, "the cuda run succeeds");
    // The 32x16 layer is 16:2:4 V:N:M; the 4x32 classifier stays dense (V = 16 > 4 rows).
    let vnm: Vec<&Row> = kt
        .iter()
        .filter(|r| text(r, "kernel") == "cuda-vnm")
        .collect();
    assert_eq!(vnm.len(), 3, "random(budget 3) measures 3 points");
    assert!(vnm.iter().any(|r| num(r, "latency_us_median") > 0.0));
    assert!(kt.iter().any(|r| text(r, "kernel") == "cublas-f16"));
    assert!(kt
        .iter()
        .all(|r| text(r, "device") == fingerprint && text(r, "status") == "ok"));
    let ev = &tables[3].1;
    assert_eq!(ev.len(), 1);
    let e = &ev[0];
    assert_eq!(text(e, "status"), "ok", "{}", text(e, "error"));
    assert!(num(e, "max_rel_error") <= stages::evaluate::cuda::CUDA_TOLERANCE);
    assert!((0.0..=1.0).contains(&num(e, "accuracy")));
    assert!(num(e, "latency_us_b8") > 0.0 && num(e, "speedup_vs_dense") > 0.0);
    // The compiled programs are cached in the store, by digest: each PTX with NVRTC's cubin
    // of it for this device's architecture (what the device loaded).
    let cached: Vec<std::path::PathBuf> = std::fs::read_dir(dir.path().join("store").join("ptx"))
        .expect("store/ptx")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    let ptx: Vec<_> = cached
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
        .collect();
    assert!(!ptx.is_empty(), "{cached:?}");
    assert!(
        ptx.iter().all(|p| p.with_extension("cubin").exists()),
        "{cached:?}"
    );
}

#[test]
fn the_cuda_smoke_experiment_plans_its_twelve_cuda_tunings() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../experiments/cuda-smoke.toml"
    );
    let output = Command::new(cotune())
        .arg("plan")
        .arg(file)
        .arg("--verbose")
        .arg("--store")
        .arg(dir.path().join("store"))
        .env_remove("COTUNE_STORE")
        .output()
        .expect("run cotune plan");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    // 2:4 and 64:2:8 of a 64-256-256-10 MLP: three layer formats each, tuned at the batch
    // tokens (256) and at the evaluated batch size none of them is within 4x of (1).
    assert_eq!(stdout.matches("n=256 cuda]").count(), 6, "{stdout}");
    assert_eq!(stdout.matches("n=1 cuda]").count(), 6, "{stdout}");
}
