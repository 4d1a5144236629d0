//! The product's stages: adapters from the engine's trials to the pure stage functions of the
//! `stages` crate (train, prune, kernel_tune, evaluate) and the loaders of `datasets`.
//!
//! Artifacts per stage: train → `weights.safetensors`; prune → `weights.safetensors` (dense
//! with exact zeros) and `masks.bin` (from which evaluate re-packs each layer exactly);
//! kernel_tune → `tuned.txt` (best sparse and dense points). Timed stages hold the per-host
//! measurement lock exclusively.
//!
//! Backend `cuda` runs kernel_tune and evaluate on the process's one CUDA device
//! ([`stages::kernel_tune::cuda::shared_device`]); its trials carry the device's fingerprint,
//! or `unavailable: <why>` when there is none, and then fail with "cuda backend unavailable".

mod convert;
mod masks;
mod rows;

use crate::experiment::schema::Backend;
use crate::stage::{Ctx, Input, Outcome, StageError, StageSet, TunedLayer};
use crate::trial::*;
use convert::{dataset_spec, model_spec, pattern, prune_spec, train_spec};
use results::{Row, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Versions of the real stages: bump when a stage's results change meaning.
const VERSIONS: [(&str, u32); 5] = [
    ("dataset", 1),
    ("train", 1),
    ("prune", 1),
    ("kernel_tune", 2),
    ("evaluate", 2),
];

/// Digest of the CPU kernel sources this binary was built from (see build.rs).
const KERNEL_SOURCES: &str = env!("COTUNE_KERNEL_SOURCES_DIGEST");

/// Seconds spent measuring each kernel configuration in a tuning.
const SECONDS_PER_POINT: f64 = 0.05;
/// Seconds spent measuring each batch size in an evaluation.
const SECONDS_PER_BATCH: f64 = 0.25;

/// The real stage implementations.
#[derive(Default)]
pub struct RealStages {
    datasets: Mutex<HashMap<String, Arc<datasets::Dataset>>>,
}

impl RealStages {
    /// The stages of this build.
    pub fn new() -> Self {
        stages::tune_malloc();
        RealStages::default()
    }

    fn load(&self, d: &DatasetTrial) -> Result<Arc<datasets::Dataset>, StageError> {
        let spec = dataset_spec(d);
        let id = format!("{spec:?}");
        if let Some(ds) = self.datasets.lock().map_err(err)?.get(&id) {
            return Ok(ds.clone());
        }
        let ds = Arc::new(datasets::load(&spec).map_err(err)?);
        self.datasets.lock().map_err(err)?.insert(id, ds.clone());
        Ok(ds)
    }
}

fn err(e: impl std::fmt::Display) -> StageError {
    StageError::new(e)
}

fn measure_lock(ctx: &Ctx) -> Result<crate::store::MeasureGuard, StageError> {
    ctx.measure
        .exclusive()
        .map_err(|e| StageError::new(format!("measurement lock: {e}")))
}

fn strategy(t: &TuneTrial) -> stages::kernel_tune::Strategy {
    use crate::experiment::schema::Strategy as S;
    use stages::kernel_tune::Strategy;
    match t.strategy {
        S::Exhaustive => Strategy::Exhaustive,
        S::Random => Strategy::Random {
            budget: t.budget as usize,
            seed: t.seed,
        },
        S::Model => Strategy::Model {
            budget: t.budget as usize,
        },
    }
}

/// The error of a trial whose backend could not be opened at planning time, if so.
fn unavailable(backend: Backend, device: &str) -> Result<(), StageError> {
    match (backend, device.strip_prefix("unavailable: ")) {
        (Backend::Cuda, Some(why)) => {
            Err(StageError::new(format!("cuda backend unavailable: {why}")))
        }
        _ => Ok(()),
    }
}

/// The `isa` column of a backend's rows: the CPU's SIMD level, or the CUDA target (`sm_90`).
fn isa(backend: Backend) -> Result<String, StageError> {
    match backend {
        Backend::Cpu => Ok(kernels::isa().to_string()),
        Backend::Cuda => stages::kernel_tune::cuda::shared_device()
            .map(|d| d.info().arch.to_owned())
            .map_err(err),
    }
}

/// The tunings among `tunings` that match a layer's packed format.
fn layer_tunings(
    want: &kernels::FormatSignature,
    tunings: &[TunedLayer],
) -> Result<Vec<stages::evaluate::LayerTuning>, StageError> {
    let mut out = vec![];
    for tl in tunings {
        let t = tl.trial;
        let Ok(s) = kernels::FormatSignature::for_pattern(
            &pattern(&t.pattern),
            t.rows as usize,
            t.cols as usize,
        ) else {
            continue;
        };
        let same = s.kind == want.kind
            && s.rows == want.rows
            && s.cols == want.cols
            && s.v == want.v
            && s.m == want.m
            && s.n == want.n;
        if !same {
            continue;
        }
        let get = |c: &str| match tl.input.metrics.get(c) {
            Some(Value::Str(s)) => stages::kernel_tune::parse_params(s).map_err(err),
            _ => Err(StageError::new(format!(
                "tuning of {} has no {c}",
                t.pattern.label()
            ))),
        };
        out.push(stages::evaluate::LayerTuning {
            batch_tokens: t.batch_tokens as usize,
            params: get("best_params")?,
            dense_params: get("dense_params")?,
        });
    }
    Ok(out)
}

impl StageSet for RealStages {
    fn version(&self, stage: &str) -> u32 {
        VERSIONS
            .iter()
            .find(|(s, _)| *s == stage)
            .map_or(0, |(_, v)| *v)
    }

    fn device(&self, backend: Backend) -> Result<String, StageError> {
        match backend {
            Backend::Cpu => Ok(kernels::cpu_fingerprint()),
            Backend::Cuda => stages::kernel_tune::cuda::shared_device()
                .map(|d| d.info().fingerprint())
                .map_err(err),
        }
    }

    fn kernel_digest(&self, backend: Backend) -> String {
        format!("{}:{KERNEL_SOURCES}", format!("{backend:?}").to_lowercase())
    }

    fn use_store(&self, root: &std::path::Path) {
        stages::kernel_tune::cuda::use_ptx_cache_in(root.join("ptx"));
    }

    fn dtype(&self, backend: Backend, p: &PatternTrial, rows: u64, cols: u64) -> String {
        match backend {
            Backend::Cpu => "f32".into(),
            Backend::Cuda => {
                stages::kernel_tune::cuda::dtype(&pattern(p), rows as usize, cols as usize).into()
            }
        }
    }

    fn dataset_dims(&self, d: &DatasetTrial) -> Result<(u64, u64), StageError> {
        let ds = self.load(d)?;
        Ok((ds.n_features as u64, ds.n_classes as u64))
    }

    fn layer_formats(
        &self,
        model: &ModelTrial,
        dims: (u64, u64),
        p: &PatternTrial,
    ) -> Vec<LayerFormat> {
        let image = match model.kind {
            crate::experiment::schema::ModelKind::Cnn => {
                let side = (dims.0 as f64).sqrt() as usize;
                Some((1, side, side))
            }
            _ => None,
        };
        let Ok(w) = stages::Weights::init(
            &model_spec(model),
            dims.0 as usize,
            image,
            dims.1 as usize,
            0,
        ) else {
            return vec![];
        };
        let kp = pattern(p);
        w.layers
            .iter()
            .map(|l| {
                let (rows, cols) = (l.rows() as u64, l.cols() as u64);
                match kp.validate_for(l.rows(), l.cols()) {
                    Ok(()) => LayerFormat {
                        layer: l.name.clone(),
                        pattern: p.clone(),
                        rows,
                        cols,
                        skipped: None,
                    },
                    Err(e) => LayerFormat {
                        layer: l.name.clone(),
                        pattern: PatternTrial::dense(),
                        rows,
                        cols,
                        skipped: Some(e.to_string()),
                    },
                }
            })
            .collect()
    }

    fn run_dataset(&self, ctx: &Ctx, d: &DatasetTrial) -> Result<Outcome, StageError> {
        let ds = self.load(d)?;
        let summary = format!(
            "{} train {} test {} features {} classes {}\n",
            ds.name,
            ds.train_y.len(),
            ds.test_y.len(),
            ds.n_features,
            ds.n_classes
        );
        std::fs::write(ctx.out_dir.join("dataset.txt"), summary).map_err(err)?;
        let metrics: Row = [
            ("n_train", Value::I64(ds.train_y.len() as i64)),
            ("n_test", Value::I64(ds.test_y.len() as i64)),
            ("n_features", Value::I64(ds.n_features as i64)),
            ("n_classes", Value::I64(ds.n_classes as i64)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        Ok(Outcome {
            metrics,
            rows: vec![],
        })
    }

    fn run_train(
        &self,
        ctx: &Ctx,
        t: &TrainTrial,
        d: &DatasetTrial,
    ) -> Result<Outcome, StageError> {
        let ds = self.load(d)?;
        let trained =
            stages::train(&ds, &model_spec(&t.model), &train_spec(t), t.seed).map_err(err)?;
        trained
            .weights
            .save(&ctx.out_dir.join("weights.safetensors"))
            .map_err(err)?;
        Ok(Outcome {
            metrics: rows::train(&trained),
            rows: vec![],
        })
    }

    fn run_prune(
        &self,
        ctx: &Ctx,
        p: &PruneTrial,
        t: &TrainTrial,
        trained: &Input,
        d: &DatasetTrial,
    ) -> Result<Outcome, StageError> {
        let ds = self.load(d)?;
        let weights =
            stages::Weights::load(&trained.dir.join("weights.safetensors")).map_err(err)?;
        let pruned = stages::prune(&ds, &weights, &prune_spec(p, t), t.seed).map_err(err)?;
        pruned
            .weights
            .save(&ctx.out_dir.join("weights.safetensors"))
            .map_err(err)?;
        masks::save(&ctx.out_dir.join("masks.bin"), &pruned.masks)?;
        Ok(Outcome {
            metrics: rows::prune(&pruned),
            rows: vec![],
        })
    }

    fn run_kernel_tune(&self, ctx: &Ctx, t: &TuneTrial) -> Result<Outcome, StageError> {
        unavailable(t.backend, &t.device)?;
        let kp = pattern(&t.pattern);
        let sig = kernels::FormatSignature::for_pattern(&kp, t.rows as usize, t.cols as usize)
            .map_err(err)?;
        let n = t.batch_tokens as usize;
        let spec = stages::kernel_tune::TuneSpec {
            sig,
            n,
            strategy: strategy(t),
            seconds_per_point: SECONDS_PER_POINT,
            backend: match t.backend {
                Backend::Cpu => stages::kernel_tune::Backend::Cpu,
                Backend::Cuda => stages::kernel_tune::Backend::Cuda,
            },
        };
        let tuned = {
            let _lock = measure_lock(ctx)?;
            stages::kernel_tune::tune(&spec).map_err(err)?
        };
        let (metrics, points) = rows::tune(&tuned, &sig, n, &isa(t.backend)?);
        let text = format!(
            "{}\n{}\n",
            stages::kernel_tune::format_params(&tuned.best().params),
            stages::kernel_tune::format_params(&tuned.dense_best().params)
        );
        std::fs::write(ctx.out_dir.join("tuned.txt"), text).map_err(err)?;
        Ok(Outcome {
            metrics,
            rows: points,
        })
    }

    fn run_evaluate(
        &self,
        ctx: &Ctx,
        e: &EvalTrial,
        p: &PruneTrial,
        _t: &TrainTrial,
        pruned: &Input,
        d: &DatasetTrial,
        tunings: &[TunedLayer],
    ) -> Result<Outcome, StageError> {
        unavailable(e.backend, &e.device)?;
        let ds = self.load(d)?;
        let weights =
            stages::Weights::load(&pruned.dir.join("weights.safetensors")).map_err(err)?;
        let masks = masks::load(&pruned.dir.join("masks.bin"))?;
        if masks.len() != weights.layers.len() {
            return Err(StageError::new(
                "masks.bin does not match the pruned weights",
            ));
        }
        if let Some(l) = weights
            .layers
            .iter()
            .find(|l| l.kind != stages::LayerKind::Linear)
        {
            return Err(StageError::new(format!(
                "evaluate runs fully connected layers through the sparse kernels; layer {} is a convolution (im2col is not built yet)",
                l.name
            )));
        }
        let kp = pattern(&p.pattern);
        let mut layers = vec![];
        for (l, m) in weights.layers.iter().zip(masks) {
            let (lp, mask) = match m {
                Some(mask) => (kp.clone(), mask),
                None => (
                    kernels::Pattern::Dense,
                    kernels::Mask::full(l.rows(), l.cols()),
                ),
            };
            let matrix = kernels::SparseMatrix::from_masked(&lp, &l.weight, &mask).map_err(err)?;
            let want = matrix.signature();
            let tunings = layer_tunings(&want, tunings)?;
            if tunings.is_empty() {
                return Err(StageError::new(format!(
                    "no kernel tuning for layer {} ({want:?})",
                    l.name
                )));
            }
            layers.push(stages::evaluate::LayerRun {
                name: l.name.clone(),
                matrix,
                bias: l.bias.clone(),
                tunings,
            });
        }
        let batch_sizes: Vec<usize> = e.batch_sizes.iter().map(|&b| b as usize).collect();
        let ev = {
            let _lock = measure_lock(ctx)?;
            match e.backend {
                Backend::Cpu => {
                    stages::evaluate::evaluate(&ds, &layers, &batch_sizes, SECONDS_PER_BATCH)
                }
                Backend::Cuda => stages::kernel_tune::cuda::shared_device()
                    .map_err(|e| stages::StageError::Cuda(e.to_string()))
                    .and_then(|dev| {
                        stages::evaluate::cuda::evaluate_cuda(&ds, &layers, &batch_sizes, dev)
                    }),
            }
            .map_err(err)?
        };
        std::fs::write(ctx.out_dir.join("evaluation.txt"), format!("{ev:?}\n")).map_err(err)?;
        let mut metrics = rows::evaluate(&ev, &isa(e.backend)?);
        if e.backend == Backend::Cuda {
            rows::cuda_evaluate_notes(&mut metrics);
        }
        Ok(Outcome {
            metrics,
            rows: vec![],
        })
    }
}
