//! The kernel-tune stage kind: one search of a kernel's parameter space for one format
//! signature, shape and batch size on one backend. Keyed on the structure, never the weights,
//! so that every pruned model with the same layer structure shares one tuning; requested by the
//! prunes whose layers take that format, or a root of a kernel-only study. A CPU tuning reads
//! its family's calibration on the device ([`Calibrate`]), which its key covers.

use super::calibrate::{Calibrate, CalibrateTrial};
use super::layer_study::LayerStudy;
use super::prune::{describe_pattern, pattern_label, LayerFormat, Prune};
use crate::experiment::limits;
use crate::fields::{FieldValue, Fields, Tag};
use crate::key::{CanonValue, Key};
use crate::plan::{PlanError, Planner};
use crate::stage::{StageKind, Trial};
use kernels::Pattern;
use results::Value;
use stages::kernel_tune::{Backend, Strategy};

/// The kernel-tune stage.
pub enum KernelTune {}

impl StageKind for KernelTune {
    const NAME: &'static str = "kernel_tune";
    type Trial = TuneTrial;
    type Parents = Option<Key<Calibrate>>;
    const REQUESTED_BY: &'static [&'static str] = &[Prune::NAME, LayerStudy::NAME];
}

/// The device a backend runs on, as found at planning time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceState {
    /// Its fingerprint (CPU model and ISA, or GPU name, SM and driver).
    Ready(String),
    /// Why the backend cannot run here (its trials fail with this reason).
    Unavailable(String),
}

impl DeviceState {
    /// What keys and the `device` column record.
    pub fn text(&self) -> String {
        match self {
            DeviceState::Ready(f) => f.clone(),
            DeviceState::Unavailable(why) => format!("unavailable: {why}"),
        }
    }
}

impl FieldValue for DeviceState {
    fn canon(&self) -> CanonValue {
        CanonValue::Str(self.text())
    }
    fn column(&self) -> Value {
        Value::Str(self.text())
    }
}

/// One kernel tuning: a format signature on a shape, a backend and a search.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneTrial {
    /// Pattern of the format.
    pub pattern: Pattern,
    /// Rows of the sparse operand.
    pub rows: u64,
    /// Columns of the sparse operand.
    pub cols: u64,
    /// Batch tokens (columns of the dense operand).
    pub batch_tokens: u64,
    /// Backend.
    pub backend: Backend,
    /// Element type the backend computes this format in.
    pub dtype: String,
    /// Search strategy (with its budget and seed).
    pub strategy: Strategy,
    /// The device.
    pub device: DeviceState,
    /// Digests of the kernel families the tuning measures (the format's and the dense
    /// baseline's), so that editing one kernel re-tunes only the tunings that measured it.
    pub kernel_version: String,
}

impl Trial for TuneTrial {
    fn describe(&self, f: &mut Fields) {
        let (budget, seed) = match self.strategy {
            Strategy::Exhaustive => (None, 0),
            Strategy::Random { budget, seed } => (Some(budget as u64), seed),
            Strategy::Model { budget } | Strategy::Guided { budget } => (Some(budget as u64), 0),
        };
        describe_pattern(f, &self.pattern, "format.", "format.");
        f.both("rows", "format.rows", &self.rows);
        f.both("cols", "format.cols", &self.cols);
        f.both(
            "batch_tokens",
            "kernel_tune.batch_tokens",
            &self.batch_tokens,
        );
        f.both("backend", "kernel_tune.backend", &Tag(self.backend));
        f.both("dtype", "kernel_tune.dtype", &self.dtype);
        f.both(
            "strategy",
            "kernel_tune.strategy",
            &Tag(self.strategy.kind()),
        );
        // Exhaustive search has no budget: 0 in the key, null in the column.
        f.key_only("budget", || CanonValue::U64(budget.unwrap_or(0)));
        f.column_only("kernel_tune.budget", || budget.column());
        f.key_only("seed", || CanonValue::U64(seed));
        f.both("device", "device", &self.device);
        f.key_only("kernel_digest", || {
            CanonValue::Str(self.kernel_version.clone())
        });
    }

    fn label(&self) -> String {
        format!(
            "{} {}x{} n={} {}",
            pattern_label(&self.pattern),
            self.rows,
            self.cols,
            self.batch_tokens,
            self.backend
        )
    }
}

/// What a kernel-tune implementation tells the planner about this build and machine.
pub trait TuneFacts {
    /// The device a backend runs on.
    fn device(&self, backend: Backend) -> DeviceState;
    /// The element type a backend computes a format in (`f32` unless it says otherwise).
    fn dtype(&self, backend: Backend, pattern: &Pattern, rows: u64, cols: u64) -> String;
    /// The version of the kernels a tuning of this format measures.
    fn kernel_version(&self, backend: Backend, pattern: &Pattern, rows: u64, cols: u64) -> String;
    /// The calibration a tuning of this format ranks with, if its backend calibrates the
    /// format's family.
    fn calibration(
        &self,
        backend: Backend,
        pattern: &Pattern,
        rows: u64,
        cols: u64,
    ) -> Option<CalibrateTrial>;
}

/// A planned tuning and the calibration it reads.
type PlannedTune = (TuneTrial, Option<CalibrateTrial>);

/// Adds a tuning and its calibration to the plan.
fn add(
    p: &mut Planner,
    (trial, calibration): PlannedTune,
) -> (Key<KernelTune>, Option<Key<Calibrate>>) {
    let cal = calibration.map(|c| p.add::<Calibrate>(c, ()));
    (p.add::<KernelTune>(trial, cal), cal)
}

/// The tunings a requester's layers need: per backend, layer and batch-token count, in that
/// order.
fn layer_tunings(
    layers: &[LayerFormat],
    backends: &[Backend],
    batch_tokens: &[u64],
    tune: &dyn Fn(&Pattern, u64, u64, u64, Backend) -> PlannedTune,
) -> Vec<PlannedTune> {
    let mut out = vec![];
    for &backend in backends {
        for layer in layers {
            for &bt in batch_tokens {
                let n = bt * layer.tokens.max(1);
                out.push(tune(&layer.pattern, layer.rows, layer.cols, n, backend));
            }
        }
    }
    out
}

/// Plans the tunings `by`'s layers need (see [`layer_tunings`]) and records that `by` requests
/// them and their calibrations.
fn request_tunings<R: StageKind>(
    p: &mut Planner,
    by: Key<R>,
    layers: &[LayerFormat],
    tune: &dyn Fn(&Pattern, u64, u64, u64, Backend) -> PlannedTune,
) {
    let exp = p.experiment();
    for t in layer_tunings(layers, &exp.backends, &exp.tuned_batches(), tune) {
        let (key, cal) = add(p, t);
        p.request(by, key);
        if let Some(cal) = cal {
            p.request(by, cal);
        }
    }
}

/// Plans the tunings: in a kernel-only study every (pattern, shape, batch tokens, backend) as
/// a root; otherwise every layer format of every prune, per tuned batch size
/// ([`crate::experiment::Experiment::tuned_batches`]: the batch tokens, and the evaluated
/// batch sizes none of them guides) and backend, requested by that prune. Each with its
/// calibration, unless `[kernel_tune] calibrate = false`.
pub fn plan(p: &mut Planner, facts: &impl TuneFacts) -> Result<(), PlanError> {
    let exp = p.experiment();
    let tune = |pattern: &Pattern, rows: u64, cols: u64, batch_tokens: u64, backend| {
        let trial = TuneTrial {
            pattern: pattern.clone(),
            rows,
            cols,
            batch_tokens,
            backend,
            dtype: facts.dtype(backend, pattern, rows, cols),
            strategy: exp.strategy.clone(),
            device: facts.device(backend),
            kernel_version: facts.kernel_version(backend, pattern, rows, cols),
        };
        let cal = exp
            .calibrate
            .then(|| facts.calibration(backend, pattern, rows, cols))
            .flatten();
        (trial, cal)
    };
    if exp.model_part.is_none() && exp.study.is_none() {
        for point in &exp.prune_points {
            for &(rows, cols) in &exp.shapes {
                for &bt in &exp.batch_tokens {
                    for &backend in &exp.backends {
                        add(p, tune(&point.pattern, rows, cols, bt, backend));
                    }
                }
            }
        }
        return Ok(());
    }
    // Every layer format of every prune and layer study, at its real GEMM widths: in a model,
    // `batch_tokens` counts samples and a layer's GEMM has `tokens` columns per sample (a
    // study's tensors have 1).
    for (study, planned) in p.instances::<LayerStudy>() {
        check_columns(p, &planned.trial.layers)?;
        request_tunings(p, study, &planned.trial.layers, &tune);
    }
    for (prune, planned) in p.instances::<Prune>() {
        check_columns(p, &planned.trial.layers)?;
        request_tunings(p, prune, &planned.trial.layers, &tune);
    }
    Ok(())
}

/// Every layer's inputs and outputs at every tuned and evaluated batch must fit one matrix of a
/// run ([`limits::ELEMENTS_MAX`]): a batch of `b` samples gives a layer `b · tokens` columns (a
/// convolution's output positions, a transformer's tokens), which the file's own checks,
/// blind to the data set's image size, could not count. An error names the layer and the
/// batch, at the table that gives it. (A training batch is left out: it takes at most the data
/// set's samples, which a `batch_size` above them, for full-batch steps, does not change.)
fn check_columns(p: &Planner, layers: &[LayerFormat]) -> Result<(), PlanError> {
    let exp = p.experiment();
    // Each batch with the table that gives it: the tunings', and a model's evaluations'.
    let mut batches: Vec<(u64, &str)> = exp
        .batch_tokens
        .iter()
        .map(|&b| (b, "kernel_tune"))
        .collect();
    if exp.model_part.is_some() {
        batches.extend(exp.batch_sizes.iter().map(|&b| (b, "evaluate")));
    }
    for layer in layers {
        for &(b, section) in &batches {
            let columns = b.saturating_mul(layer.tokens.max(1));
            let values = columns.saturating_mul(layer.rows.max(layer.cols));
            if values > limits::ELEMENTS_MAX {
                return Err(p.section_error(
                    section,
                    format!(
                        "batch {b} gives layer `{}` ({} × {}) {columns} columns ({b} samples × {} \
                         per sample), {values} values in one matrix, more than {} (4 GiB of \
                         f32); use a smaller batch",
                        layer.layer,
                        layer.rows,
                        layer.cols,
                        layer.tokens.max(1),
                        limits::ELEMENTS_MAX
                    ),
                ));
            }
        }
    }
    Ok(())
}
