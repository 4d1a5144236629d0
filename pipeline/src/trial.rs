//! Trials: the validated, fully expanded configs of stage instances.
//!
//! Each trial type knows its canonical config (what its key covers) and its config columns (what
//! its result rows show, flattened and typed as `stage.field`).

use crate::experiment::schema::{
    Backend, DatasetSource, Method, ModelKind, Optimizer, PatternKind, Schedule, Strategy,
};
use crate::key::{CanonConfig, CanonValue as C};
use results::{Row, Value};

fn opt_u(v: Option<u64>) -> C {
    C::List(v.into_iter().map(C::U64).collect())
}

/// Where the data comes from, with the digests of data files.
#[derive(Clone, Debug, PartialEq)]
pub struct DatasetTrial {
    /// Loader.
    pub source: DatasetSource,
    /// synthetic: samples, features, classes.
    pub synthetic: Option<(u64, u64, u64)>,
    /// Data files as written in the experiment (idx: train images, train labels, test images,
    /// test labels; tables: one).
    pub files: Vec<String>,
    /// The same files resolved against the experiment file's folder (not part of the key: the
    /// digests are).
    pub paths: Vec<std::path::PathBuf>,
    /// tables: label column.
    pub label: Option<String>,
    /// Held-out fraction.
    pub test_fraction: f64,
    /// Seed of the split and of synthetic data.
    pub seed: u64,
    /// blake3 of each file in `files` (filled at planning time).
    pub file_digests: Vec<[u8; 32]>,
}

impl DatasetTrial {
    /// Canonical config.
    pub fn canon(&self) -> CanonConfig {
        let (s, f, c) = self.synthetic.unwrap_or((0, 0, 0));
        CanonConfig::new()
            .with(
                "source",
                C::Str(format!("{:?}", self.source).to_lowercase()),
            )
            .with("synthetic", C::List(vec![C::U64(s), C::U64(f), C::U64(c)]))
            .with(
                "files",
                C::List(self.files.iter().map(|p| C::Str(p.clone())).collect()),
            )
            .with(
                "label",
                C::List(self.label.iter().map(|l| C::Str(l.clone())).collect()),
            )
            .with("test_fraction", C::f64(self.test_fraction))
            .with("seed", C::U64(self.seed))
            .with(
                "file_digests",
                C::List(
                    self.file_digests
                        .iter()
                        .map(|d| C::Bytes(d.to_vec()))
                        .collect(),
                ),
            )
    }

    /// Result columns.
    pub fn columns(&self, row: &mut Row) {
        row.insert(
            "dataset.source".into(),
            Value::Str(format!("{:?}", self.source).to_lowercase()),
        );
        row.insert(
            "dataset.test_fraction".into(),
            Value::F64(self.test_fraction),
        );
    }
}

/// The network.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelTrial {
    /// mlp | cnn.
    pub kind: ModelKind,
    /// Hidden widths.
    pub hidden: Vec<u64>,
    /// CNN channels.
    pub channels: Vec<u64>,
}

/// One training run.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainTrial {
    /// The network.
    pub model: ModelTrial,
    /// Epochs.
    pub epochs: u64,
    /// Batch size.
    pub batch_size: u64,
    /// Learning rate.
    pub lr: f64,
    /// Optimiser.
    pub optimizer: Optimizer,
    /// Weight decay.
    pub weight_decay: f64,
    /// Seed.
    pub seed: u64,
}

impl TrainTrial {
    /// Canonical config.
    pub fn canon(&self) -> CanonConfig {
        CanonConfig::new()
            .with(
                "model.kind",
                C::Str(format!("{:?}", self.model.kind).to_lowercase()),
            )
            .with(
                "model.hidden",
                C::List(self.model.hidden.iter().map(|&h| C::U64(h)).collect()),
            )
            .with(
                "model.channels",
                C::List(self.model.channels.iter().map(|&h| C::U64(h)).collect()),
            )
            .with("epochs", C::U64(self.epochs))
            .with("batch_size", C::U64(self.batch_size))
            .with("lr", C::f64(self.lr))
            .with(
                "optimizer",
                C::Str(format!("{:?}", self.optimizer).to_lowercase()),
            )
            .with("weight_decay", C::f64(self.weight_decay))
            .with("seed", C::U64(self.seed))
    }

    /// Result columns.
    pub fn columns(&self, row: &mut Row) {
        row.insert(
            "model.kind".into(),
            Value::Str(format!("{:?}", self.model.kind).to_lowercase()),
        );
        row.insert(
            "model.hidden".into(),
            Value::Str(
                self.model
                    .hidden
                    .iter()
                    .map(|h| h.to_string())
                    .collect::<Vec<_>>()
                    .join("-"),
            ),
        );
        row.insert("train.epochs".into(), Value::I64(self.epochs as i64));
        row.insert(
            "train.batch_size".into(),
            Value::I64(self.batch_size as i64),
        );
        row.insert("train.lr".into(), Value::F64(self.lr));
        row.insert(
            "train.optimizer".into(),
            Value::Str(format!("{:?}", self.optimizer).to_lowercase()),
        );
        row.insert("seed".into(), Value::I64(self.seed as i64));
    }
}

/// A sparsity pattern with its parameters (only those that apply are set).
#[derive(Clone, Debug, PartialEq, PartialOrd)]
pub struct PatternTrial {
    /// Pattern.
    pub kind: PatternKind,
    /// Target sparsity (unstructured, vector).
    pub sparsity: Option<f64>,
    /// N and M (nm, vnm).
    pub nm: Option<(u64, u64)>,
    /// V (vnm, vector).
    pub v: Option<u64>,
}

impl PatternTrial {
    /// The dense pattern.
    pub fn dense() -> Self {
        PatternTrial {
            kind: PatternKind::Dense,
            sparsity: None,
            nm: None,
            v: None,
        }
    }

    /// The sparsity this pattern reaches on a layer that takes it.
    pub fn nominal_sparsity(&self) -> f64 {
        match (self.kind, self.nm, self.sparsity) {
            (PatternKind::Dense, _, _) => 0.0,
            (_, Some((n, m)), _) => 1.0 - n as f64 / m as f64,
            (_, None, Some(s)) => s,
            _ => 0.0,
        }
    }

    /// Short label such as `vnm 64:2:8`, `nm 2:4`, `unstructured 0.75`, `vector 16 0.5`.
    pub fn label(&self) -> String {
        let kind = format!("{:?}", self.kind).to_lowercase();
        match (self.kind, self.nm, self.v, self.sparsity) {
            (PatternKind::Vnm, Some((n, m)), Some(v), _) => format!("{kind} {v}:{n}:{m}"),
            (PatternKind::Nm, Some((n, m)), _, _) => format!("{kind} {n}:{m}"),
            (PatternKind::Vector, _, Some(v), Some(s)) => format!("{kind} {v}x1 {s}"),
            (PatternKind::Unstructured, _, _, Some(s)) => format!("{kind} {s}"),
            _ => kind,
        }
    }

    fn canon_into(&self, cfg: &mut CanonConfig, prefix: &str) {
        cfg.push(
            &format!("{prefix}kind"),
            C::Str(format!("{:?}", self.kind).to_lowercase()),
        );
        cfg.push(
            &format!("{prefix}sparsity"),
            C::List(self.sparsity.iter().map(|&s| C::f64(s)).collect()),
        );
        cfg.push(
            &format!("{prefix}nm"),
            C::List(
                self.nm
                    .iter()
                    .flat_map(|&(n, m)| [C::U64(n), C::U64(m)])
                    .collect(),
            ),
        );
        cfg.push(&format!("{prefix}v"), opt_u(self.v));
    }

    fn columns(&self, row: &mut Row, prefix: &str) {
        row.insert(
            format!("{prefix}pattern"),
            Value::Str(format!("{:?}", self.kind).to_lowercase()),
        );
        row.insert(
            format!("{prefix}sparsity"),
            Value::F64(self.nominal_sparsity()),
        );
        let (n, m) = match self.nm {
            Some((n, m)) => (Value::I64(n as i64), Value::I64(m as i64)),
            None => (Value::Null, Value::Null),
        };
        row.insert(format!("{prefix}n"), n);
        row.insert(format!("{prefix}m"), m);
        row.insert(
            format!("{prefix}v"),
            self.v.map_or(Value::Null, |v| Value::I64(v as i64)),
        );
    }
}

/// OBS parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct ObsParams {
    /// Gradients for the empirical Fisher.
    pub gradients: u64,
    /// Fisher block size.
    pub block: u64,
    /// Dampening.
    pub damp: f64,
}

/// One pruning of one trained model.
#[derive(Clone, Debug, PartialEq)]
pub struct PruneTrial {
    /// Pattern.
    pub pattern: PatternTrial,
    /// Method (None for dense).
    pub method: Option<Method>,
    /// Schedule (None for dense).
    pub schedule: Option<Schedule>,
    /// OBS parameters (only for method obs).
    pub obs: Option<ObsParams>,
    /// Gradual steps (only for the gradual schedule).
    pub gradual_steps: Option<u64>,
    /// Fine-tuning epochs.
    pub finetune_epochs: u64,
    /// Fine-tuning learning rate.
    pub finetune_lr: f64,
}

impl PruneTrial {
    /// Canonical config.
    pub fn canon(&self) -> CanonConfig {
        let mut cfg = CanonConfig::new();
        self.pattern.canon_into(&mut cfg, "pattern.");
        cfg.push(
            "method",
            C::List(
                self.method
                    .iter()
                    .map(|m| C::Str(format!("{m:?}").to_lowercase()))
                    .collect(),
            ),
        );
        cfg.push(
            "schedule",
            C::List(
                self.schedule
                    .iter()
                    .map(|s| C::Str(format!("{s:?}").to_lowercase()))
                    .collect(),
            ),
        );
        cfg.push(
            "obs",
            C::List(
                self.obs
                    .iter()
                    .flat_map(|o| [C::U64(o.gradients), C::U64(o.block), C::f64(o.damp)])
                    .collect(),
            ),
        );
        cfg.push("gradual_steps", opt_u(self.gradual_steps));
        cfg.push("finetune_epochs", C::U64(self.finetune_epochs));
        cfg.push("finetune_lr", C::f64(self.finetune_lr));
        cfg
    }

    /// Result columns.
    pub fn columns(&self, row: &mut Row) {
        self.pattern.columns(row, "prune.");
        let s = |x: Option<String>| x.map_or(Value::Null, Value::Str);
        row.insert(
            "prune.method".into(),
            s(self.method.map(|m| format!("{m:?}").to_lowercase())),
        );
        row.insert(
            "prune.schedule".into(),
            s(self.schedule.map(|m| format!("{m:?}").to_lowercase())),
        );
        row.insert(
            "prune.finetune_epochs".into(),
            Value::I64(self.finetune_epochs as i64),
        );
    }
}

/// The structure of one layer's weights: what kernel tuning is keyed on (never the values).
#[derive(Clone, Debug, PartialEq, PartialOrd)]
pub struct LayerFormat {
    /// Layer name.
    pub layer: String,
    /// Pattern applied (dense when the layer cannot take the trial's pattern).
    pub pattern: PatternTrial,
    /// Output rows.
    pub rows: u64,
    /// Input columns.
    pub cols: u64,
    /// Why the trial's pattern was not applied, if it was not.
    pub skipped: Option<String>,
}

/// One kernel tuning: a format signature on a shape, a backend and a search.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneTrial {
    /// Pattern of the format.
    pub pattern: PatternTrial,
    /// Rows of the sparse operand.
    pub rows: u64,
    /// Columns of the sparse operand.
    pub cols: u64,
    /// Batch tokens (columns of the dense operand).
    pub batch_tokens: u64,
    /// Backend.
    pub backend: Backend,
    /// Element type.
    pub dtype: String,
    /// Search strategy.
    pub strategy: Strategy,
    /// Measurement budget.
    pub budget: u64,
    /// Seed (random strategy).
    pub seed: u64,
    /// Device fingerprint (CPU model + ISA, or GPU name + SM + driver).
    pub device: String,
    /// Digest of the kernel sources and parameter space.
    pub kernel_digest: String,
}

impl TuneTrial {
    /// Canonical config.
    pub fn canon(&self) -> CanonConfig {
        let mut cfg = CanonConfig::new();
        self.pattern.canon_into(&mut cfg, "format.");
        cfg.push("rows", C::U64(self.rows));
        cfg.push("cols", C::U64(self.cols));
        cfg.push("batch_tokens", C::U64(self.batch_tokens));
        cfg.push(
            "backend",
            C::Str(format!("{:?}", self.backend).to_lowercase()),
        );
        cfg.push("dtype", C::Str(self.dtype.clone()));
        cfg.push(
            "strategy",
            C::Str(format!("{:?}", self.strategy).to_lowercase()),
        );
        cfg.push("budget", C::U64(self.budget));
        cfg.push(
            "seed",
            C::U64(if self.strategy == Strategy::Random {
                self.seed
            } else {
                0
            }),
        );
        cfg.push("device", C::Str(self.device.clone()));
        cfg.push("kernel_digest", C::Str(self.kernel_digest.clone()));
        cfg
    }

    /// Result columns.
    pub fn columns(&self, row: &mut Row) {
        self.pattern.columns(row, "format.");
        row.insert("format.rows".into(), Value::I64(self.rows as i64));
        row.insert("format.cols".into(), Value::I64(self.cols as i64));
        row.insert(
            "kernel_tune.batch_tokens".into(),
            Value::I64(self.batch_tokens as i64),
        );
        row.insert(
            "kernel_tune.backend".into(),
            Value::Str(format!("{:?}", self.backend).to_lowercase()),
        );
        row.insert(
            "kernel_tune.strategy".into(),
            Value::Str(format!("{:?}", self.strategy).to_lowercase()),
        );
        row.insert("kernel_tune.budget".into(), Value::I64(self.budget as i64));
        row.insert("kernel_tune.dtype".into(), Value::Str(self.dtype.clone()));
        row.insert("device".into(), Value::Str(self.device.clone()));
    }
}

/// One evaluation of one pruned model on one backend.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalTrial {
    /// Backend.
    pub backend: Backend,
    /// Batch sizes at which latency is measured.
    pub batch_sizes: Vec<u64>,
    /// Device fingerprint.
    pub device: String,
}

impl EvalTrial {
    /// Canonical config.
    pub fn canon(&self) -> CanonConfig {
        CanonConfig::new()
            .with(
                "backend",
                C::Str(format!("{:?}", self.backend).to_lowercase()),
            )
            .with(
                "batch_sizes",
                C::List(self.batch_sizes.iter().map(|&b| C::U64(b)).collect()),
            )
            .with("device", C::Str(self.device.clone()))
    }

    /// Result columns.
    pub fn columns(&self, row: &mut Row) {
        row.insert(
            "evaluate.backend".into(),
            Value::Str(format!("{:?}", self.backend).to_lowercase()),
        );
        row.insert("device".into(), Value::Str(self.device.clone()));
    }
}
