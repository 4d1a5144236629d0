//! Test-only stages for the engine's end-to-end tests (the product never ships them), and
//! helpers shared by the tests.
//!
//! [`TestStages`] is deterministic: every metric is a function of the instance's config, so a
//! run, an incremental re-run and a fresh run can be compared value by value. Each computation
//! appends a line `stage key` to the file named by `COTUNE_TEST_LOG` (when set), so tests can
//! count what was really computed, across processes; `COTUNE_TEST_SLEEP_MS` slows every stage
//! down (for kill -9 tests); a training with `lr = 0.0666` fails on purpose.
#![forbid(unsafe_code)]
#![forbid(missing_docs)]

pub mod harness;

use pipeline::experiment::schema::{Backend, PatternKind};
use pipeline::stage::{Ctx, Input, Outcome, StageError, StageSet, TunedLayer};
use pipeline::trial::*;
use results::{Row, Value};
use std::io::Write;

/// Deterministic stages for engine tests.
#[derive(Debug, Default)]
pub struct TestStages;

fn unit(parts: &[&[u8]]) -> f64 {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(p);
    }
    let b = h.finalize();
    u64::from_le_bytes(b.as_bytes()[..8].try_into().expect("8 bytes")) as f64 / u64::MAX as f64
}

fn log(stage: &str, what: &str) {
    if let Ok(path) = std::env::var("COTUNE_TEST_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{stage} {what}");
        }
    }
    if let Some(ms) = std::env::var("COTUNE_TEST_SLEEP_MS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

fn row(pairs: &[(&str, Value)]) -> Row {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn write(ctx: &Ctx, name: &str, bytes: &[u8]) -> Result<(), StageError> {
    std::fs::write(ctx.out_dir.join(name), bytes).map_err(StageError::new)
}

fn f(row: &Row, col: &str) -> f64 {
    row.get(col).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

impl StageSet for TestStages {
    fn version(&self, _stage: &str) -> u32 {
        1
    }
    fn device(&self, backend: Backend) -> Result<String, StageError> {
        match backend {
            Backend::Cpu => Ok("test-cpu avx512".into()),
            Backend::Cuda => Err(StageError::new("built without CUDA support")),
        }
    }
    fn kernel_digest(&self, _backend: Backend) -> String {
        "test-kernels-v1".into()
    }
    fn dataset_dims(&self, d: &DatasetTrial) -> Result<(u64, u64), StageError> {
        Ok(d.synthetic.map_or((64, 10), |(_, f, c)| (f, c)))
    }
    fn layer_formats(
        &self,
        model: &ModelTrial,
        dims: (u64, u64),
        pattern: &PatternTrial,
    ) -> Vec<LayerFormat> {
        let mut widths = vec![dims.0];
        widths.extend(&model.hidden);
        widths.push(dims.1);
        widths
            .windows(2)
            .enumerate()
            .map(|(i, w)| {
                let (rows, cols) = (w[1], w[0]);
                let fits = match pattern.kind {
                    PatternKind::Vnm | PatternKind::Vector => {
                        pattern.v.is_some_and(|v| rows % v == 0)
                    }
                    PatternKind::Nm => pattern.nm.is_some_and(|(_, m)| cols >= m),
                    _ => true,
                };
                LayerFormat {
                    layer: format!("fc{i}"),
                    pattern: if fits {
                        pattern.clone()
                    } else {
                        PatternTrial::dense()
                    },
                    rows,
                    cols,
                    skipped: (!fits)
                        .then(|| format!("{rows}x{cols} cannot take {}", pattern.label())),
                }
            })
            .collect()
    }
    fn run_dataset(&self, ctx: &Ctx, d: &DatasetTrial) -> Result<Outcome, StageError> {
        log("dataset", &format!("{:?}", d.source));
        write(ctx, "stats.txt", b"ok")?;
        Ok(Outcome {
            metrics: row(&[("n_train", Value::I64(100))]),
            rows: vec![],
        })
    }
    fn run_train(
        &self,
        ctx: &Ctx,
        t: &TrainTrial,
        _d: &DatasetTrial,
    ) -> Result<Outcome, StageError> {
        log("train", &format!("lr={}", t.lr));
        if (t.lr - 0.0666).abs() < 1e-12 {
            return Err(StageError::new("injected failure: lr 0.0666 diverges"));
        }
        let acc = 0.9 + 0.09 * unit(&[&t.lr.to_bits().to_le_bytes(), &t.epochs.to_le_bytes()]);
        write(ctx, "weights.bin", &acc.to_le_bytes())?;
        Ok(Outcome {
            metrics: row(&[
                ("accuracy", Value::F64(acc)),
                ("loss", Value::F64(1.0 - acc)),
            ]),
            rows: vec![],
        })
    }
    fn run_prune(
        &self,
        ctx: &Ctx,
        p: &PruneTrial,
        _t: &TrainTrial,
        trained: &Input,
        _d: &DatasetTrial,
    ) -> Result<Outcome, StageError> {
        log("prune", &p.pattern.label());
        let w = std::fs::read(trained.dir.join("weights.bin")).map_err(StageError::new)?;
        let base = f64::from_le_bytes(w.as_slice().try_into().map_err(StageError::new)?);
        let s = p.pattern.nominal_sparsity();
        let penalty = s
            * s
            * 0.1
            * if p.method == Some(pipeline::experiment::schema::Method::Obs) {
                0.5
            } else {
                1.0
            };
        let acc = base - penalty;
        write(ctx, "pruned.bin", &acc.to_le_bytes())?;
        Ok(Outcome {
            metrics: row(&[
                ("accuracy", Value::F64(acc)),
                ("sparsity", Value::F64(s)),
                ("retained_l1", Value::F64(1.0 - s / 2.0)),
            ]),
            rows: vec![],
        })
    }
    fn run_kernel_tune(&self, ctx: &Ctx, t: &TuneTrial) -> Result<Outcome, StageError> {
        log(
            "kernel_tune",
            &format!(
                "{} {}x{} n={}",
                t.pattern.label(),
                t.rows,
                t.cols,
                t.batch_tokens
            ),
        );
        if t.device.starts_with("unavailable") {
            return Err(StageError::new(t.device.clone()));
        }
        let flops =
            2.0 * (t.rows * t.cols * t.batch_tokens) as f64 * (1.0 - t.pattern.nominal_sparsity());
        let dense_us = 2.0 * (t.rows * t.cols * t.batch_tokens) as f64 / 1e5;
        let mut rows = vec![];
        for i in 0..t.budget.min(4) {
            let jitter = unit(&[
                t.pattern.label().as_bytes(),
                &t.rows.to_le_bytes(),
                &i.to_le_bytes(),
            ]);
            let lat = flops / 1e5 * (1.0 + jitter);
            rows.push(row(&[
                ("point", Value::I64(i as i64)),
                ("params", Value::Str(format!("rows_together={}", 1 << i))),
                ("latency_us_median", Value::F64(lat)),
                ("predicted_us", Value::F64(flops / 1e5)),
                ("speedup_vs_dense", Value::F64(dense_us / lat)),
            ]));
        }
        let best = rows
            .iter()
            .min_by(|a, b| f(a, "latency_us_median").total_cmp(&f(b, "latency_us_median")))
            .cloned()
            .unwrap_or_default();
        write(ctx, "best.txt", format!("{best:?}").as_bytes())?;
        Ok(Outcome {
            metrics: best,
            rows,
        })
    }
    fn run_evaluate(
        &self,
        ctx: &Ctx,
        _e: &EvalTrial,
        p: &PruneTrial,
        _t: &TrainTrial,
        pruned: &Input,
        _d: &DatasetTrial,
        tunings: &[TunedLayer],
    ) -> Result<Outcome, StageError> {
        log("evaluate", &p.pattern.label());
        let latency: f64 = tunings
            .iter()
            .map(|t| f(t.input.metrics, "latency_us_median"))
            .sum();
        let bytes: f64 = tunings
            .iter()
            .map(|t| {
                (t.trial.rows * t.trial.cols) as f64
                    * 4.0
                    * (1.0 - t.trial.pattern.nominal_sparsity())
            })
            .sum();
        write(ctx, "eval.txt", b"ok")?;
        Ok(Outcome {
            metrics: row(&[
                ("accuracy", Value::F64(f(pruned.metrics, "accuracy"))),
                ("latency_us_median", Value::F64(latency)),
                ("weight_bytes", Value::F64(bytes)),
            ]),
            rows: vec![],
        })
    }
}
