//! Data sets for cotune: the shipped UCI digits, a seeded synthetic teacher–student problem,
//! MNIST-style IDX files, and Parquet / CSV tables.
//!
//! Every loader yields a [`Dataset`]: row-major `f32` features, `u32` labels, split into a
//! train and a test part by a seeded shuffle recorded in the [`DatasetSpec`]. Loading is a pure
//! function of the spec and the bytes of the files it names ([`file_digests`] gives their blake3,
//! which the engine folds into the dataset key).
#![forbid(missing_docs)]
#![forbid(unsafe_code)]

mod digits;
mod error;
mod idx;
mod spec;
mod split;
mod synthetic;
mod table;

pub use error::DatasetError;
pub use spec::{DatasetSpec, Source, TableSpec};
pub use split::{CLASSES_MAX, VALUES_MAX};

use std::path::PathBuf;

/// A classification data set, split into train and test parts.
///
/// Features are row-major: sample `i` is `train_x[i * n_features..(i + 1) * n_features]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// Short name for logs and result rows (`digits`, `synthetic`, the file stem, …).
    pub name: String,
    /// Number of features per sample.
    pub n_features: usize,
    /// Number of classes; every label is `< n_classes`.
    pub n_classes: usize,
    /// Training features, `n_train × n_features`.
    pub train_x: Vec<f32>,
    /// Training labels.
    pub train_y: Vec<u32>,
    /// Test features, `n_test × n_features`.
    pub test_x: Vec<f32>,
    /// Test labels.
    pub test_y: Vec<u32>,
    /// `(channels, height, width)` when the features are an image (row-major, channel first),
    /// so that a CNN can reshape them; `None` for tables.
    pub image_shape: Option<(usize, usize, usize)>,
}

impl Dataset {
    /// Number of training samples.
    pub fn n_train(&self) -> usize {
        self.train_y.len()
    }

    /// Number of test samples.
    pub fn n_test(&self) -> usize {
        self.test_y.len()
    }
}

/// Loads the data set a spec describes. Reads only local files; never the network.
pub fn load(spec: &DatasetSpec) -> Result<Dataset, DatasetError> {
    spec.validate()?;
    match spec {
        DatasetSpec::Digits {
            test_fraction,
            split_seed,
        } => digits::load(*test_fraction, *split_seed),
        DatasetSpec::Synthetic {
            n_samples,
            n_features,
            n_classes,
            seed,
            test_fraction,
            split_seed,
        } => synthetic::load(
            &synthetic::TeacherSpec {
                n_samples: *n_samples,
                n_features: *n_features,
                n_classes: *n_classes,
                seed: *seed,
            },
            *test_fraction,
            *split_seed,
        ),
        DatasetSpec::Idx { .. } => idx::load(spec),
        DatasetSpec::Parquet(t) => table::load_parquet(t),
        DatasetSpec::Csv(t) => table::load_csv(t),
    }
}

/// The blake3 digest of every file the spec reads, in a fixed order.
///
/// The shipped digits file is listed under the pseudo path `<shipped>/digits.csv.gz`, so that a
/// change of the shipped copy changes the dataset key too; the synthetic source reads no file.
pub fn file_digests(spec: &DatasetSpec) -> Result<Vec<(PathBuf, [u8; 32])>, DatasetError> {
    let digest_file = |path: &PathBuf| -> Result<(PathBuf, [u8; 32]), DatasetError> {
        let bytes = std::fs::read(path).map_err(|source| DatasetError::Io {
            path: path.clone(),
            source,
        })?;
        Ok((path.clone(), *blake3::hash(&bytes).as_bytes()))
    };
    match spec {
        DatasetSpec::Digits { .. } => Ok(vec![(
            PathBuf::from(digits::SHIPPED_PATH),
            *blake3::hash(digits::DIGITS_GZ).as_bytes(),
        )]),
        DatasetSpec::Synthetic { .. } => Ok(Vec::new()),
        DatasetSpec::Idx {
            images,
            labels,
            test_images,
            test_labels,
            ..
        } => [
            Some(images),
            Some(labels),
            test_images.as_ref(),
            test_labels.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(digest_file)
        .collect(),
        DatasetSpec::Parquet(t) | DatasetSpec::Csv(t) => Ok(vec![digest_file(&t.path)?]),
    }
}
