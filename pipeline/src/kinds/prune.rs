//! The prune stage kind: one pruning (and fine-tuning) of one trained model into a pattern.

use super::dataset::Dataset;
use super::train::Train;
use crate::fields::{canon_u64s, FieldValue, Fields, Tag};
use crate::key::{CanonValue, Key};
use crate::plan::{PlanError, Planner};
use crate::stage::{StageKind, Trial};
use kernels::Pattern;
use keytag::Tagged;
use results::Value;
use stages::{Method, ModelSpec, PruneSpec, Schedule};

/// The prune stage.
pub enum Prune {}

impl StageKind for Prune {
    const NAME: &'static str = "prune";
    type Trial = PruneTrial;
    type Parents = Key<Train>;
}

/// One point of the prune space: a pattern and how to reach it.
#[derive(Clone, Debug, PartialEq)]
pub struct PrunePoint {
    /// The pattern.
    pub pattern: Pattern,
    /// How weights are scored (`None` exactly for the dense pattern: nothing is removed).
    pub method: Option<Method>,
    /// How the target is reached (`None` exactly for the dense pattern).
    pub schedule: Option<Schedule>,
    /// Fine-tuning epochs after pruning (0 for the dense pattern).
    pub finetune_epochs: u64,
    /// Per-layer points: the named layers take their own pattern (empty: every layer takes
    /// `pattern`). Set by the unified search only.
    pub layers: Vec<(String, Pattern)>,
    /// Why the unified search planned this point (`None` in a grid).
    pub note: Option<SearchNote>,
}

impl PrunePoint {
    /// The dense point: the trained model as it is.
    pub fn dense() -> Self {
        PrunePoint {
            pattern: Pattern::Dense,
            method: None,
            schedule: None,
            finetune_epochs: 0,
            layers: vec![],
            note: None,
        }
    }
}

/// What the unified search says about a pruning it planned: result columns, never key fields
/// (the same pruning planned by a grid has the same key and measurements).
#[derive(Clone, Debug, PartialEq)]
pub struct SearchNote {
    /// The round that chose it (0: the performance table, the proxies and the references).
    pub round: u64,
    /// A cheap accuracy proxy (one layer pruned, no fine-tuning): not evaluated.
    pub proxy: bool,
    /// The accuracy the predictor gave it when it was chosen.
    pub predicted_accuracy: Option<f64>,
    /// The latency (µs at the search's batch size) the predictor gave it when it was chosen.
    pub predicted_latency_us: Option<f64>,
    /// Why it was chosen, in words.
    pub reason: String,
}

/// The structure of one layer's weights under a pruning: what kernel tuning is keyed on
/// (never the values).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerFormat {
    /// Layer name.
    pub layer: String,
    /// Pattern applied (dense when the layer cannot take the trial's pattern).
    pub pattern: Pattern,
    /// Output rows.
    pub rows: u64,
    /// Input columns.
    pub cols: u64,
    /// Columns of the layer's GEMM per sample (1 for an MLP's layers, the output positions of
    /// a convolution, the tokens of a transformer block): a batch of `b` samples multiplies
    /// `b · tokens` columns.
    pub tokens: u64,
    /// Why the trial's pattern was not applied, if it was not.
    pub skipped: Option<String>,
}

/// One pruning of one trained model.
#[derive(Clone, Debug, PartialEq)]
pub struct PruneTrial {
    /// What the prune stage runs: the point's pattern, method, schedule and fine-tuning epochs;
    /// the fine-tuning learning rate (the file's `finetune_lr`, else the training's); and the
    /// training's batch size and optimiser, which the key covers through the training.
    pub spec: PruneSpec,
    /// The format each layer takes. Derived at planning time from the model and the pattern,
    /// which the key covers (through the training and the pattern), so it is not a key field.
    pub layers: Vec<LayerFormat>,
    /// The unified search's note on it (columns only).
    pub note: Option<SearchNote>,
}

/// (sparsity, N:M, V) of a pattern as the key records them: each only where it applies.
fn pattern_parts(p: &Pattern) -> (Option<f64>, Option<(u64, u64)>, Option<u64>) {
    match *p {
        Pattern::Dense => (None, None, None),
        Pattern::Unstructured { sparsity } => (Some(sparsity), None, None),
        Pattern::Nm { n, m } => (None, Some((n as u64, m as u64)), None),
        Pattern::Vnm { v, m } => (None, Some((2, m as u64)), Some(v as u64)),
        Pattern::Vector { v, sparsity } => (Some(sparsity), None, Some(v as u64)),
    }
}

/// Declares a pattern's fields: key fields `{key}kind`, `{key}sparsity`, `{key}nm`, `{key}v`;
/// columns `{column}pattern`, `{column}sparsity` (nominal), `{column}n`, `{column}m`,
/// `{column}v`.
pub(crate) fn describe_pattern(f: &mut Fields, p: &Pattern, key: &str, column: &str) {
    describe_pattern_as(f, p, Some(p), key, column);
}

/// [`describe_pattern`] with the key fields of `p` and the columns of `shown`; `None` shows a
/// per-layer pruning: `{column}pattern` is [`PER_LAYER`] and the other columns are empty.
fn describe_pattern_as(
    f: &mut Fields,
    p: &Pattern,
    shown: Option<&Pattern>,
    key: &str,
    column: &str,
) {
    let (sparsity, nm, v) = pattern_parts(p);
    f.key_only(&format!("{key}kind"), || Tag(p.kind()).canon());
    f.column_only(&format!("{column}pattern"), || match shown {
        Some(s) => Tag(s.kind()).column(),
        None => Value::Str(PER_LAYER.into()),
    });
    f.key_only(&format!("{key}sparsity"), || {
        CanonValue::List(sparsity.into_iter().map(CanonValue::f64).collect())
    });
    f.key_only(&format!("{key}nm"), || {
        canon_u64s(nm.into_iter().flat_map(|(n, m)| [n, m]))
    });
    f.key_only(&format!("{key}v"), || v.canon());
    let (_, shown_nm, shown_v) = shown.map_or((None, None, None), pattern_parts);
    let int = |x: Option<u64>| x.map_or(Value::Null, |x| Value::I64(x as i64));
    f.column_only(&format!("{column}sparsity"), || {
        shown.map_or(Value::Null, |s| Value::F64(s.sparsity()))
    });
    f.column_only(&format!("{column}n"), || int(shown_nm.map(|x| x.0)));
    f.column_only(&format!("{column}m"), || int(shown_nm.map(|x| x.1)));
    f.column_only(&format!("{column}v"), || int(shown_v));
}

/// What `prune.pattern` says of a pruning whose layers take different patterns (a unified
/// search's per-layer points; `prune.layer_patterns` names each layer's).
pub(crate) const PER_LAYER: &str = "per-layer";

/// Declares a method's parameters: key fields `obs` (always), `sparsegpt` and `wanda` (only for
/// those methods, so that the other methods' keys stay as they were before them); columns
/// `prune.calibration_samples` and `prune.calibration`.
pub(crate) fn describe_method_parameters(f: &mut Fields, method: Option<&Method>) {
    f.key_only("obs", || match method {
        Some(&Method::Obs { grads, block, damp }) => CanonValue::List(vec![
            CanonValue::U64(grads as u64),
            CanonValue::U64(block as u64),
            CanonValue::f64(damp),
        ]),
        _ => CanonValue::List(vec![]),
    });
    // The one-shot methods' parameters are key fields only for them: the keys of the other
    // methods stay as they were before these methods existed.
    if let Some(&Method::SparseGpt {
        calibration,
        damp,
        block,
        scope,
    }) = method
    {
        f.key_only("sparsegpt", || {
            CanonValue::List(vec![
                CanonValue::U64(calibration.samples as u64),
                CanonValue::Str(calibration.inputs.tag().into()),
                CanonValue::f64(damp),
                CanonValue::U64(block as u64),
                CanonValue::Str(scope.tag().into()),
            ])
        });
    }
    if let Some(&Method::Wanda { calibration, scope }) = method {
        f.key_only("wanda", || {
            CanonValue::List(vec![
                CanonValue::U64(calibration.samples as u64),
                CanonValue::Str(calibration.inputs.tag().into()),
                CanonValue::Str(scope.tag().into()),
            ])
        });
    }
    let calibration = method.and_then(Method::calibration);
    f.column_only("prune.calibration_samples", || {
        calibration.map_or(Value::Null, |c| Value::I64(c.samples as i64))
    });
    f.column_only("prune.calibration", || {
        calibration.map_or(Value::Null, |c| Value::Str(c.inputs.tag().into()))
    });
}

/// Whether a pruning reaches a V:2:M layer in more than one masking step, which goes down
/// V:2:M's nested structure: OBS's recomputation steps (from M > 4) and gradual schedules.
fn nested_vnm_steps(pt: &PruneSpec) -> bool {
    let gradual = matches!(pt.schedule, Some(Schedule::Gradual { steps }) if steps > 1);
    let obs = matches!(pt.method, Some(Method::Obs { .. }));
    std::iter::once(&pt.pattern)
        .chain(pt.layer_patterns.iter().map(|(_, p)| p))
        .any(|p| matches!(*p, Pattern::Vnm { m, .. } if gradual || (obs && m > 4)))
}

/// A short label such as `vnm 64:2:8`, `nm 2:4`, `unstructured 0.75`, `vector 16x1 0.5`.
pub fn pattern_label(p: &Pattern) -> String {
    let kind = p.kind();
    match *p {
        Pattern::Dense => kind.to_string(),
        Pattern::Unstructured { sparsity } => format!("{kind} {sparsity}"),
        Pattern::Nm { n, m } => format!("{kind} {n}:{m}"),
        Pattern::Vnm { v, m } => format!("{kind} {v}:2:{m}"),
        Pattern::Vector { v, sparsity } => format!("{kind} {v}x1 {sparsity}"),
    }
}

impl Trial for PruneTrial {
    fn describe(&self, f: &mut Fields) {
        let pt = &self.spec;
        // A per-layer point's key names a base pattern and the layers that differ from it
        // (`layer_patterns` below); its columns must not pass it off as that base pattern.
        let shown = pt.layer_patterns.is_empty().then_some(&pt.pattern);
        describe_pattern_as(f, &pt.pattern, shown, "pattern.", "prune.");
        f.both(
            "method",
            "prune.method",
            &pt.method.as_ref().map(|m| Tag(m.kind())),
        );
        f.both(
            "schedule",
            "prune.schedule",
            &pt.schedule.as_ref().map(|s| Tag(s.kind())),
        );
        describe_method_parameters(f, pt.method.as_ref());
        f.key_only("gradual_steps", || match pt.schedule {
            Some(Schedule::Gradual { steps }) => canon_u64s([steps as u64]),
            _ => canon_u64s([]),
        });
        f.both(
            "finetune_epochs",
            "prune.finetune_epochs",
            &pt.finetune_epochs,
        );
        f.both("finetune_lr", "prune.finetune_lr", &pt.finetune_lr);
        // Since prune results of OBS and gradual V:2:M go down its nested structure (the
        // schedule module's `Target::VnmNested`), their keys say so; every other pruning's
        // results, and keys, are as before.
        if nested_vnm_steps(pt) {
            f.key_only("vnm_steps", || CanonValue::Str("nested".into()));
        }
        // A key field only where the file sets it: the keys of the models' defaults stay.
        if let Some(globs) = &pt.keep_dense {
            f.key_only("keep_dense", || {
                CanonValue::List(globs.iter().cloned().map(CanonValue::Str).collect())
            });
        }
        f.column_only("prune.keep_dense", || match &pt.keep_dense {
            Some(globs) => Value::ListStr(globs.clone()),
            None => Value::Null,
        });
        // A key field only where a per-layer point sets it: uniform prunings keep their keys.
        if !pt.layer_patterns.is_empty() {
            f.key_only("layer_patterns", || {
                CanonValue::List(
                    pt.layer_patterns
                        .iter()
                        .map(|(name, p)| {
                            // The pattern's key fields, as `describe_pattern` records them.
                            let (sparsity, nm, v) = pattern_parts(p);
                            CanonValue::List(vec![
                                CanonValue::Str(name.clone()),
                                CanonValue::Str(p.kind().tag().to_owned()),
                                CanonValue::List(
                                    sparsity.into_iter().map(CanonValue::f64).collect(),
                                ),
                                canon_u64s(nm.into_iter().flat_map(|(n, m)| [n, m])),
                                canon_u64s(v),
                            ])
                        })
                        .collect(),
                )
            });
        }
        if let Some(note) = &self.note {
            f.column_only("prune.layer_patterns", || {
                Value::ListStr(
                    self.layers
                        .iter()
                        .map(|l| format!("{}={}", l.layer, pattern_label(&l.pattern)))
                        .collect(),
                )
            });
            f.column_only("search.round", || Value::I64(note.round as i64));
            f.column_only("search.role", || {
                Value::Str(if note.proxy { "proxy" } else { "trial" }.into())
            });
            let opt = |x: Option<f64>| x.map_or(Value::Null, Value::F64);
            f.column_only("search.predicted_accuracy", || opt(note.predicted_accuracy));
            f.column_only("search.predicted_latency_us", || {
                opt(note.predicted_latency_us)
            });
            f.column_only("search.reason", || Value::Str(note.reason.clone()));
        }
    }

    fn label(&self) -> String {
        let pattern = if self.spec.layer_patterns.is_empty() {
            pattern_label(&self.spec.pattern)
        } else {
            let each: Vec<String> = self
                .layers
                .iter()
                .map(|l| pattern_label(&l.pattern))
                .collect();
            format!("per-layer [{}]", each.join(", "))
        };
        match &self.spec.method {
            Some(m) => format!("{pattern} {}", m.kind()),
            None => pattern,
        }
    }
}

/// Plans one pruning per (training, prune point). `layers` gives the format each layer of the
/// model takes under a pattern (it knows the model's shapes; an error names the table of the
/// file at fault, `dataset`, `model` or `prune`, and what is wrong).
pub fn plan(
    p: &mut Planner,
    layers: impl Fn(
        &super::DatasetTrial,
        &ModelSpec,
        &PruneSpec,
    ) -> Result<Vec<LayerFormat>, (&'static str, String)>,
) -> Result<(), PlanError> {
    let exp = p.experiment();
    let Some(mp) = &exp.model_part else {
        return Ok(());
    };
    for (train, planned) in p.instances::<Train>() {
        let dataset = p
            .planned::<Dataset>(planned.parents)
            .map(|d| d.trial.clone())
            .ok_or_else(|| p.error(0..0, "a training was planned without its data set"))?;
        for point in &exp.prune_points {
            let train_spec = &planned.trial.train;
            let spec = PruneSpec {
                pattern: point.pattern.clone(),
                method: point.method.clone(),
                schedule: point.schedule.clone(),
                finetune_epochs: point.finetune_epochs as usize,
                finetune_lr: mp.finetune_lr.unwrap_or(train_spec.lr),
                batch_size: train_spec.batch_size,
                optimizer: train_spec.optimizer,
                keep_dense: mp.keep_dense.clone(),
                layer_patterns: point.layers.clone(),
            };
            let formats = layers(&dataset, &planned.trial.model, &spec)
                .map_err(|(section, e)| p.section_error(section, e))?;
            let trial = PruneTrial {
                spec,
                layers: formats,
                note: point.note.clone(),
            };
            // A sparse point that prunes no layer would run as the dense model under its
            // pattern's name (a CNN whose layers V divides none of, an MLP without hidden
            // layers, `keep_dense` over every layer that fits).
            if trial.spec.pattern != Pattern::Dense
                && trial.spec.layer_patterns.is_empty()
                && trial.layers.iter().all(|l| l.pattern == Pattern::Dense)
            {
                let why: Vec<String> = trial
                    .layers
                    .iter()
                    .map(|l| match &l.skipped {
                        Some(why) => format!("{}: {why}", l.layer),
                        None => format!("{}: kept dense", l.layer),
                    })
                    .collect();
                return Err(p.section_error(
                    "prune",
                    format!(
                        "the point `{}` prunes no layer of the model ({}): leave it out, or give \
                         a pattern one of its layers can take",
                        trial.label(),
                        why.join("; ")
                    ),
                ));
            }
            p.add::<Prune>(trial, train);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the prunings whose results the nested V:2:M steps changed carry `vnm_steps`: OBS to
    /// V:2:M with M > 4 (at M = 4 it takes one step, as before) and gradual V:2:M; one-shot
    /// magnitude, SparseGPT and Wanda take one step to V:2:M and keep their keys.
    #[test]
    fn only_multi_step_vnm_prunings_take_nested_steps() {
        let obs = Method::Obs {
            grads: 8,
            block: 8,
            damp: 0.01,
        };
        let spec = |pattern: Pattern, method: Method, schedule: Schedule| PruneSpec {
            pattern,
            method: Some(method),
            schedule: Some(schedule),
            finetune_epochs: 1,
            finetune_lr: 1e-3,
            batch_size: 8,
            optimizer: Default::default(),
            keep_dense: None,
            layer_patterns: vec![],
        };
        let vnm = |m| Pattern::Vnm { v: 64, m };
        let gradual = Schedule::Gradual { steps: 3 };
        assert!(nested_vnm_steps(&spec(
            vnm(8),
            obs.clone(),
            Schedule::Oneshot
        )));
        assert!(!nested_vnm_steps(&spec(
            vnm(4),
            obs.clone(),
            Schedule::Oneshot
        )));
        assert!(nested_vnm_steps(&spec(
            vnm(4),
            Method::Magnitude,
            gradual.clone()
        )));
        assert!(!nested_vnm_steps(&spec(
            vnm(8),
            Method::Magnitude,
            Schedule::Oneshot
        )));
        assert!(!nested_vnm_steps(&spec(
            vnm(8),
            Method::Magnitude,
            Schedule::Gradual { steps: 1 }
        )));
        let nm = Pattern::Nm { n: 2, m: 8 };
        assert!(!nested_vnm_steps(&spec(nm.clone(), obs.clone(), gradual)));
        // A per-layer point with one V:2:M layer.
        let mut per_layer = spec(nm, obs, Schedule::Oneshot);
        per_layer.layer_patterns = vec![("fc0".into(), vnm(8))];
        assert!(nested_vnm_steps(&per_layer));
    }
}
