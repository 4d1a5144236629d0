//! The dataset stage kind: where an experiment's data comes from.

use crate::fields::{canon_u64s, Fields, Tag};
use crate::key::CanonValue;
use crate::plan::{PlanError, Planner};
use crate::stage::{StageKind, Trial};
use datasets::DatasetSpec;

/// The dataset stage.
pub enum Dataset {}

impl StageKind for Dataset {
    const NAME: &'static str = "dataset";
    type Trial = DatasetTrial;
    type Parents = ();
}

/// A data set as the experiment names it.
#[derive(Clone, Debug, PartialEq)]
pub struct DatasetTrial {
    /// The loader's spec, its paths resolved against the experiment file's folder.
    pub spec: DatasetSpec,
    /// The data files as written in the experiment file: the key covers these and their
    /// digests, never the resolved paths, so moving a checkout changes no key.
    pub files: Vec<String>,
    /// blake3 of each file in `files`, read at planning time.
    pub file_digests: Vec<[u8; 32]>,
}

impl Trial for DatasetTrial {
    fn describe(&self, f: &mut Fields) {
        let spec = &self.spec;
        f.both("source", "dataset.source", &Tag(spec.source()));
        f.key_only("synthetic", || {
            let (s, n, c) = match *spec {
                DatasetSpec::Synthetic {
                    n_samples,
                    n_features,
                    n_classes,
                    ..
                } => (n_samples, n_features, n_classes),
                _ => (0, 0, 0),
            };
            canon_u64s([s as u64, n as u64, c as u64])
        });
        f.key_only("files", || {
            CanonValue::List(self.files.iter().cloned().map(CanonValue::Str).collect())
        });
        f.key_only("label", || {
            let label = match spec {
                DatasetSpec::Parquet(t) | DatasetSpec::Csv(t) => Some(t.label.clone()),
                _ => None,
            };
            CanonValue::List(label.into_iter().map(CanonValue::Str).collect())
        });
        f.both(
            "test_fraction",
            "dataset.test_fraction",
            &spec.test_fraction(),
        );
        f.key_only("seed", || CanonValue::U64(spec.split_seed()));
        f.key_only("file_digests", || {
            CanonValue::List(
                self.file_digests
                    .iter()
                    .map(|d| CanonValue::Bytes(d.to_vec()))
                    .collect(),
            )
        });
    }

    fn label(&self) -> String {
        self.spec.source().to_string()
    }
}

/// Plans the experiment's data set (none in a kernel-only study).
pub fn plan(p: &mut Planner) -> Result<(), PlanError> {
    if let Some(mp) = &p.experiment().model_part {
        p.add::<Dataset>(mp.dataset.clone(), ());
    }
    Ok(())
}
