//! The train stage kind: one training of the experiment's model on its data set.

use super::dataset::Dataset;
use crate::fields::{canon_u64s, Fields, Tag};
use crate::key::Key;
use crate::plan::{PlanError, Planner};
use crate::stage::{StageKind, Trial};
use results::Value;
use stages::{ModelSpec, TrainSpec};

/// The train stage.
pub enum Train {}

impl StageKind for Train {
    const NAME: &'static str = "train";
    type Trial = TrainTrial;
    type Parents = Key<Dataset>;
}

/// One training run.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainTrial {
    /// The network.
    pub model: ModelSpec,
    /// Epochs, batch size, learning rate, optimiser, weight decay.
    pub train: TrainSpec,
    /// Seed of the initial weights and the shuffles.
    pub seed: u64,
}

impl TrainTrial {
    fn widths(&self) -> (&[usize], &[usize]) {
        match &self.model {
            ModelSpec::Mlp { hidden } => (hidden, &[]),
            ModelSpec::Cnn { channels, hidden } => (hidden, channels),
            ModelSpec::Transformer { .. } => (&[], &[]),
        }
    }
}

impl Trial for TrainTrial {
    fn describe(&self, f: &mut Fields) {
        let (hidden, channels) = self.widths();
        let t = &self.train;
        f.both("model.kind", "model.kind", &Tag(self.model.kind()));
        f.key_only("model.hidden", || {
            canon_u64s(hidden.iter().map(|&h| h as u64))
        });
        f.column_only("model.hidden", || {
            let text: Vec<String> = hidden.iter().map(usize::to_string).collect();
            Value::Str(text.join("-"))
        });
        f.key_only("model.channels", || {
            canon_u64s(channels.iter().map(|&c| c as u64))
        });
        // A column for the CNNs only (added 2026-12-07; the key is unchanged).
        if !channels.is_empty() {
            f.column_only("model.channels", || {
                let text: Vec<String> = channels.iter().map(usize::to_string).collect();
                Value::Str(text.join("-"))
            });
        }
        // Key fields only for a transformer: the other models' keys stay as they were.
        if let ModelSpec::Transformer {
            layers,
            d_model,
            heads,
            d_ff,
            patch,
        } = self.model
        {
            for (name, v) in [
                ("layers", layers),
                ("d_model", d_model),
                ("heads", heads),
                ("d_ff", d_ff),
                ("patch", patch),
            ] {
                let field = format!("model.{name}");
                f.both(&field, &field, &(v as u64));
            }
        }
        f.both("epochs", "train.epochs", &t.epochs);
        f.both("batch_size", "train.batch_size", &t.batch_size);
        f.both("lr", "train.lr", &t.lr);
        f.both("optimizer", "train.optimizer", &Tag(t.optimizer));
        f.both("weight_decay", "train.weight_decay", &t.weight_decay);
        f.both("seed", "seed", &self.seed);
    }

    fn label(&self) -> String {
        let t = &self.train;
        format!("lr={} epochs={} batch={}", t.lr, t.epochs, t.batch_size)
    }
}

/// Plans one training per point of the `[train]` grid.
pub fn plan(p: &mut Planner) -> Result<(), PlanError> {
    let Some(mp) = &p.experiment().model_part else {
        return Ok(());
    };
    for (dataset, _) in p.instances::<Dataset>() {
        for t in &mp.trains {
            p.add::<Train>(t.clone(), dataset);
        }
    }
    Ok(())
}
