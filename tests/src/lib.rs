//! Test-only stages for the engine's end-to-end tests (the product never ships them), and
//! helpers shared by the tests.
//!
//! The [`table`] of test stages is deterministic: every metric is a function of the instance's config, so a
//! run, an incremental re-run and a fresh run can be compared value by value. Each computation
//! appends a line `stage key` to the file named by `COTUNE_TEST_LOG` (when set), so tests can
//! count what was really computed, across processes; `COTUNE_TEST_SLEEP_MS` slows every stage
//! down (for kill -9 tests); a training with `lr = 0.0666` fails on purpose, and so does an
//! unstructured prune at sparsity 0.666.
#![forbid(unsafe_code)]
#![forbid(missing_docs)]

pub mod harness;
pub mod oracle;
pub mod safetensors_io;
pub mod summary;

use kernels::Pattern;
use pipeline::kinds::*;
use pipeline::plan::{PlanError, Planner};
use pipeline::stage::{Done, Outcome, RunCtx, Stage, StageError, StageTable};
use results::{Row, Value};
use stages::kernel_tune::calibrate::CalibrationPlan;
use stages::kernel_tune::{Backend, Strategy};
use stages::{MethodKind, ModelSpec};
use std::io::Write;

/// The test stages in pipeline order.
pub fn table() -> StageTable {
    StageTable::new()
        .with(TestDataset)
        .with(TestTrain)
        .with(TestPrune)
        .with(TestCalibrate)
        .with(TestTune)
        .with(TestEvaluate)
}

/// The test stages and the [`summary`] stage after them.
pub fn table_with_summary() -> StageTable {
    table().with(summary::SummaryStage)
}

fn unit(parts: &[&[u8]]) -> f64 {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(p);
    }
    let b = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&b.as_bytes()[..8]);
    u64::from_le_bytes(first) as f64 / u64::MAX as f64
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

fn write(ctx: &RunCtx, name: &str, bytes: &[u8]) -> Result<(), StageError> {
    let path = ctx.out_dir.join(name);
    std::fs::write(&path, bytes).map_err(StageError::io(path))
}

fn read_f64(path: std::path::PathBuf) -> Result<f64, StageError> {
    let bytes = std::fs::read(&path).map_err(StageError::io(&path))?;
    let b: [u8; 8] = bytes
        .as_slice()
        .try_into()
        .map_err(|_| StageError::Artifact {
            path,
            what: "not one f64".into(),
        })?;
    Ok(f64::from_le_bytes(b))
}

fn f(row: &Row, col: &str) -> f64 {
    row.get(col).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

fn one(metrics: Row) -> Result<Outcome, StageError> {
    Ok(Outcome {
        metrics,
        rows: vec![],
    })
}

/// The test dataset stage: records a fixed size.
pub struct TestDataset;

impl Stage for TestDataset {
    type Kind = Dataset;
    fn version(&self) -> u32 {
        1
    }
    fn plan(&self, p: &mut Planner) -> Result<(), PlanError> {
        dataset::plan(p)
    }
    fn run(&self, ctx: &RunCtx, d: &DatasetTrial, (): ()) -> Result<Outcome, StageError> {
        log("dataset", &d.spec.source().to_string());
        write(ctx, "stats.txt", b"ok")?;
        one(row(&[("n_train", Value::I64(100))]))
    }
}

/// The test train stage: accuracy is a hash of the config; `lr = 0.0666` fails on purpose.
pub struct TestTrain;

impl Stage for TestTrain {
    type Kind = Train;
    fn version(&self) -> u32 {
        1
    }
    fn plan(&self, p: &mut Planner) -> Result<(), PlanError> {
        train::plan(p)
    }
    fn run(&self, ctx: &RunCtx, t: &TrainTrial, _: Done<Dataset>) -> Result<Outcome, StageError> {
        let lr = t.train.lr;
        log("train", &format!("lr={lr}"));
        if (lr - 0.0666).abs() < 1e-12 {
            return Err(StageError::Failed(
                "injected failure: lr 0.0666 diverges".into(),
            ));
        }
        let epochs = t.train.epochs as u64;
        let acc = 0.9 + 0.09 * unit(&[&lr.to_bits().to_le_bytes(), &epochs.to_le_bytes()]);
        write(ctx, "weights.bin", &acc.to_le_bytes())?;
        one(row(&[
            ("accuracy", Value::F64(acc)),
            ("loss", Value::F64(1.0 - acc)),
        ]))
    }
}

/// The test prune stage: accuracy drops with the square of the sparsity (half as much for OBS);
/// under a per-layer point, each layer's share of that drop is weighted by its sensitivity
/// (halving from the first layer on), and fine-tuning wins back a fifth of it per epoch, up
/// to half.
pub struct TestPrune;

/// Layers of an MLP on (features, classes): `fc0..`, each taking its pattern (a per-layer
/// point's, else the trial's), kept dense where the pattern does not fit (V must divide the
/// rows, M must not exceed the columns).
fn layer_formats(
    d: &DatasetTrial,
    model: &ModelSpec,
    spec: &stages::PruneSpec,
) -> Vec<LayerFormat> {
    let (features, classes) = match d.spec {
        datasets::DatasetSpec::Synthetic {
            n_features,
            n_classes,
            ..
        } => (n_features as u64, n_classes as u64),
        _ => (64, 10),
    };
    // The test stages model every network as its fully connected widths.
    let hidden = match model {
        ModelSpec::Mlp { hidden } | ModelSpec::Cnn { hidden, .. } => hidden.clone(),
        ModelSpec::Transformer { d_model, .. } => vec![*d_model],
    };
    let mut widths = vec![features];
    widths.extend(hidden.iter().map(|&h| h as u64));
    widths.push(classes);
    widths
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            let (rows, cols) = (w[1], w[0]);
            let layer = format!("fc{i}");
            let pattern = spec.pattern_of(&layer);
            let fits = match *pattern {
                Pattern::Vnm { v, .. } | Pattern::Vector { v, .. } => rows % v as u64 == 0,
                Pattern::Nm { m, .. } => cols >= m as u64,
                _ => true,
            };
            LayerFormat {
                layer,
                pattern: if fits {
                    pattern.clone()
                } else {
                    Pattern::Dense
                },
                rows,
                cols,
                tokens: 1,
                skipped: (!fits)
                    .then(|| format!("{rows}x{cols} cannot take {}", pattern_label(pattern))),
            }
        })
        .collect()
}

impl Stage for TestPrune {
    type Kind = Prune;
    fn version(&self) -> u32 {
        1
    }
    fn plan(&self, p: &mut Planner) -> Result<(), PlanError> {
        prune::plan(p, |d, model, spec| Ok(layer_formats(d, model, spec)))
    }
    fn run(
        &self,
        ctx: &RunCtx,
        p: &PruneTrial,
        trained: Done<Train>,
    ) -> Result<Outcome, StageError> {
        let pattern = &p.spec.pattern;
        log("prune", &pattern_label(pattern));
        if *pattern == (Pattern::Unstructured { sparsity: 0.666 }) {
            return Err(StageError::Failed(
                "injected failure: unstructured 0.666".into(),
            ));
        }
        let base = read_f64(trained.artifact("weights.bin"))?;
        let s = pattern.sparsity();
        let obs = p.spec.method.as_ref().map(|m| m.kind()) == Some(MethodKind::Obs);
        let scale = 0.1 * if obs { 0.5 } else { 1.0 };
        let penalty = if p.spec.layer_patterns.is_empty() {
            s * s * scale
        } else {
            let weights: Vec<f64> = (0..p.layers.len()).map(|i| 0.5f64.powi(i as i32)).collect();
            let total: f64 = weights.iter().sum();
            let raw: f64 = p
                .layers
                .iter()
                .zip(&weights)
                .map(|(l, w)| w / total * l.pattern.sparsity().powi(2) * scale)
                .sum();
            raw * (1.0 - (0.2 * p.spec.finetune_epochs as f64).min(0.5))
        };
        let acc = base - penalty;
        write(ctx, "pruned.bin", &acc.to_le_bytes())?;
        one(row(&[
            ("accuracy", Value::F64(acc)),
            ("sparsity", Value::F64(s)),
            ("retained_l1", Value::F64(1.0 - s / 2.0)),
        ]))
    }
}

/// The test calibrate stage: a CPU sparse family's "calibration" is a scale that is a function
/// of the family; the test tunings record it.
pub struct TestCalibrate;

impl Stage for TestCalibrate {
    type Kind = Calibrate;
    fn version(&self) -> u32 {
        1
    }
    fn plan(&self, _p: &mut Planner) -> Result<(), PlanError> {
        Ok(())
    }
    fn run(&self, ctx: &RunCtx, t: &CalibrateTrial, (): ()) -> Result<Outcome, StageError> {
        let family = t.plan.family.to_string();
        log("calibrate", &family);
        let scale = 1.0 + unit(&[family.as_bytes()]);
        write(ctx, "scale.bin", &scale.to_le_bytes())?;
        one(row(&[("scale", Value::F64(scale))]))
    }
}

/// The test kernel-tune stage: latencies are a function of the format, a point per budget unit
/// (at most 4), and each row carries its calibration's scale; cuda is unavailable.
pub struct TestTune;

impl TuneFacts for TestTune {
    fn device(&self, backend: Backend) -> DeviceState {
        match backend {
            Backend::Cpu => DeviceState::Ready("test-cpu avx512".into()),
            Backend::Cuda => DeviceState::Unavailable("built without CUDA support".into()),
        }
    }
    fn dtype(&self, _backend: Backend, _pattern: &Pattern, _rows: u64, _cols: u64) -> String {
        "f32".into()
    }
    fn kernel_version(&self, _b: Backend, _p: &Pattern, _rows: u64, _cols: u64) -> String {
        "test-kernels-v1".into()
    }
    fn calibration(
        &self,
        backend: Backend,
        pattern: &Pattern,
        rows: u64,
        cols: u64,
    ) -> Option<CalibrateTrial> {
        // The product's rule: a format calibrates when its family has a CPU sample.
        let families =
            stages::kernel_tune::families(backend, pattern, rows as usize, cols as usize);
        Some(CalibrateTrial {
            plan: CalibrationPlan::cpu(*families.first()?)?,
            device: self.device(backend),
            kernel_version: "test-kernels-v1".into(),
        })
    }
}

impl Stage for TestTune {
    type Kind = KernelTune;
    fn version(&self) -> u32 {
        1
    }
    fn plan(&self, p: &mut Planner) -> Result<(), PlanError> {
        kernel_tune::plan(p, self)
    }
    fn run(
        &self,
        ctx: &RunCtx,
        t: &TuneTrial,
        cal: Option<Done<Calibrate>>,
    ) -> Result<Outcome, StageError> {
        let scale = match &cal {
            Some(c) => Value::F64(f(&c.metrics, "scale")),
            None => Value::Null,
        };
        let label = pattern_label(&t.pattern);
        log(
            "kernel_tune",
            &format!("{label} {}x{} n={}", t.rows, t.cols, t.batch_tokens),
        );
        if let DeviceState::Unavailable(_) = t.device {
            return Err(StageError::Failed(t.device.text()));
        }
        let budget = match t.strategy {
            Strategy::Exhaustive => 4,
            Strategy::Random { budget, .. }
            | Strategy::Model { budget }
            | Strategy::Guided { budget } => budget as u64,
        };
        let size = (t.rows * t.cols * t.batch_tokens) as f64;
        let flops = 2.0 * size * (1.0 - t.pattern.sparsity());
        let dense_us = 2.0 * size / 1e5;
        let mut rows = vec![];
        for i in 0..budget.min(4) {
            let jitter = unit(&[label.as_bytes(), &t.rows.to_le_bytes(), &i.to_le_bytes()]);
            let lat = flops / 1e5 * (1.0 + jitter);
            rows.push(row(&[
                ("point", Value::I64(i as i64)),
                ("params", Value::Str(format!("rows_together={}", 1 << i))),
                ("latency_us_median", Value::F64(lat)),
                ("predicted_us", Value::F64(flops / 1e5)),
                ("speedup_vs_dense", Value::F64(dense_us / lat)),
                ("calibration_scale", scale.clone()),
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
}

/// The test evaluate stage: latency is the sum of the layers' best tunings.
pub struct TestEvaluate;

impl Stage for TestEvaluate {
    type Kind = Evaluate;
    fn version(&self) -> u32 {
        1
    }
    fn plan(&self, p: &mut Planner) -> Result<(), PlanError> {
        evaluate::plan(p, |b| TestTune.device(b))
    }
    fn run(
        &self,
        ctx: &RunCtx,
        _e: &EvalTrial,
        (pruned, tunings): (Done<Prune>, Vec<Done<KernelTune>>),
    ) -> Result<Outcome, StageError> {
        log("evaluate", &pattern_label(&pruned.trial().spec.pattern));
        let latency: f64 = tunings
            .iter()
            .map(|t| f(&t.metrics, "latency_us_median"))
            .sum();
        let bytes: f64 = tunings
            .iter()
            .map(|t| {
                let t = t.trial();
                (t.rows * t.cols) as f64 * 4.0 * (1.0 - t.pattern.sparsity())
            })
            .sum();
        write(ctx, "eval.txt", b"ok")?;
        one(row(&[
            ("accuracy", Value::F64(f(&pruned.metrics, "accuracy"))),
            ("latency_us_median", Value::F64(latency)),
            ("weight_bytes", Value::F64(bytes)),
        ]))
    }
}
