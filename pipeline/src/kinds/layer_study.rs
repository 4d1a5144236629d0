//! The layer-study stage kind: every studied tensor of a checkpoint pruned alone to one point
//! of the prune space (pattern and method), one-shot, with its retained L1 and output error.
//! Its tensors' formats request kernel tunings at their real shapes, as a prune's layers do.

use super::checkpoint::Checkpoint;
use super::prune::{describe_method_parameters, describe_pattern, pattern_label, LayerFormat};
use crate::fields::{Fields, Tag};
use crate::key::Key;
use crate::plan::{PlanError, Planner};
use crate::stage::{StageKind, Trial};
use kernels::Pattern;
use stages::Method;

/// The layer-study stage.
pub enum LayerStudy {}

impl StageKind for LayerStudy {
    const NAME: &'static str = "layer_study";
    type Trial = StudyTrial;
    type Parents = Key<Checkpoint>;
}

/// One point of the prune space applied to every studied tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct StudyTrial {
    /// The pattern.
    pub pattern: Pattern,
    /// The method (`None` for the dense point).
    pub method: Option<Method>,
    /// The format each tensor takes (derived from the checkpoint and the pattern; not a key
    /// field).
    pub layers: Vec<LayerFormat>,
}

impl Trial for StudyTrial {
    fn describe(&self, f: &mut Fields) {
        describe_pattern(f, &self.pattern, "pattern.", "prune.");
        f.both(
            "method",
            "prune.method",
            &self.method.as_ref().map(|m| Tag(m.kind())),
        );
        describe_method_parameters(f, self.method.as_ref());
    }

    fn label(&self) -> String {
        match &self.method {
            Some(m) => format!("{} {}", pattern_label(&self.pattern), m.kind()),
            None => pattern_label(&self.pattern),
        }
    }
}

/// Plans one study per (checkpoint, prune point): each tensor takes the pattern where its shape
/// can, and stays dense with the reason where it cannot.
pub fn plan(p: &mut Planner) -> Result<(), PlanError> {
    let exp = p.experiment();
    for (checkpoint, planned) in p.instances::<Checkpoint>() {
        for point in &exp.prune_points {
            let layers = planned
                .trial
                .tensors
                .iter()
                .map(|t| {
                    let fits = point.pattern.validate_for(t.rows as usize, t.cols as usize);
                    let (pattern, skipped) = match fits {
                        Ok(()) => (point.pattern.clone(), None),
                        Err(e) => (Pattern::Dense, Some(e.to_string())),
                    };
                    LayerFormat {
                        layer: t.name.clone(),
                        pattern,
                        rows: t.rows,
                        cols: t.cols,
                        tokens: 1,
                        skipped,
                    }
                })
                .collect();
            let trial = StudyTrial {
                pattern: point.pattern.clone(),
                method: point.method.clone(),
                layers,
            };
            p.add::<LayerStudy>(trial, checkpoint);
        }
    }
    Ok(())
}
