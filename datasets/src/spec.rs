//! [`DatasetSpec`]: the `[dataset]` table of an experiment file, as plain data.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::DatasetError;

fn default_test_fraction() -> f64 {
    0.2
}

fn default_standardize() -> bool {
    true
}

/// Where a data set comes from. Deserialised from TOML with the `source` field as the tag:
///
/// ```
/// let spec: datasets::DatasetSpec = toml::from_str(r#"source = "digits""#).unwrap();
/// assert_eq!(spec, datasets::DatasetSpec::Digits { test_fraction: 0.2, split_seed: 0 });
/// ```
///
/// Every source takes `test_fraction` (default 0.2) and `split_seed` (default 0): the samples
/// are shuffled with a ChaCha8 generator seeded by `split_seed` and the first
/// `round(n · test_fraction)` become the test part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "lowercase", deny_unknown_fields)]
pub enum DatasetSpec {
    /// The shipped UCI optical digits (1,797 8×8 images, 10 classes), pixels scaled to [0, 1].
    Digits {
        /// Fraction of samples held out for test.
        #[serde(default = "default_test_fraction")]
        test_fraction: f64,
        /// Seed of the train/test shuffle.
        #[serde(default)]
        split_seed: u64,
    },
    /// Teacher–student data: standard-normal features labelled by a seeded random ReLU network.
    Synthetic {
        /// Number of samples (train + test).
        n_samples: usize,
        /// Features per sample.
        n_features: usize,
        /// Number of classes (the teacher's outputs).
        n_classes: usize,
        /// Seed of the features and of the teacher.
        #[serde(default)]
        seed: u64,
        /// Fraction of samples held out for test.
        #[serde(default = "default_test_fraction")]
        test_fraction: f64,
        /// Seed of the train/test shuffle.
        #[serde(default)]
        split_seed: u64,
    },
    /// MNIST-style IDX files (optionally gzip-compressed, by a `.gz` suffix); pixels / 255.
    Idx {
        /// Images file (`idx3-ubyte`: magic 0x00000803).
        images: PathBuf,
        /// Labels file (`idx1-ubyte`: magic 0x00000801).
        labels: PathBuf,
        /// A separate test images file; without it the train files are split.
        #[serde(default)]
        test_images: Option<PathBuf>,
        /// A separate test labels file (required with `test_images`).
        #[serde(default)]
        test_labels: Option<PathBuf>,
        /// Number of classes; labels at or above it are an error. Default: max label + 1.
        #[serde(default)]
        n_classes: Option<usize>,
        /// Fraction held out for test when no test files are given.
        #[serde(default = "default_test_fraction")]
        test_fraction: f64,
        /// Seed of the train/test shuffle.
        #[serde(default)]
        split_seed: u64,
    },
    /// A Parquet table: numeric feature columns and an integer label column.
    Parquet(TableSpec),
    /// A CSV table with a header row: numeric feature columns and an integer label column.
    Csv(TableSpec),
}

/// The fields of a table source (`parquet` or `csv`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    /// The file.
    pub path: PathBuf,
    /// Name of the label column.
    pub label: String,
    /// Feature columns, in order. Default: every column but the label, in file order.
    #[serde(default)]
    pub features: Option<Vec<String>>,
    /// Number of classes; labels at or above it are an error. Default: max label + 1.
    #[serde(default)]
    pub n_classes: Option<usize>,
    /// Standardise each feature with the training part's mean and deviation.
    #[serde(default = "default_standardize")]
    pub standardize: bool,
    /// Fraction of samples held out for test.
    #[serde(default = "default_test_fraction")]
    pub test_fraction: f64,
    /// Seed of the train/test shuffle.
    #[serde(default)]
    pub split_seed: u64,
}

impl TableSpec {
    /// A table source with the defaults: every column but `label` a feature, classes from the
    /// labels, standardised, 20 % test, split seed 0.
    pub fn new(path: impl Into<PathBuf>, label: impl Into<String>) -> Self {
        TableSpec {
            path: path.into(),
            label: label.into(),
            features: None,
            n_classes: None,
            standardize: default_standardize(),
            test_fraction: default_test_fraction(),
            split_seed: 0,
        }
    }
}

keytag::tagged_enum! {
    /// Where a data set comes from, without the parameters: the `source` of a [`DatasetSpec`].
    pub enum Source {
        /// [`DatasetSpec::Digits`].
        Digits = "digits",
        /// [`DatasetSpec::Synthetic`].
        Synthetic = "synthetic",
        /// [`DatasetSpec::Idx`].
        Idx = "idx",
        /// [`DatasetSpec::Parquet`].
        Parquet = "parquet",
        /// [`DatasetSpec::Csv`].
        Csv = "csv",
    }
}

impl DatasetSpec {
    /// The source, as written in the file (`digits`, `synthetic`, …).
    pub fn source(&self) -> Source {
        match self {
            DatasetSpec::Digits { .. } => Source::Digits,
            DatasetSpec::Synthetic { .. } => Source::Synthetic,
            DatasetSpec::Idx { .. } => Source::Idx,
            DatasetSpec::Parquet(_) => Source::Parquet,
            DatasetSpec::Csv(_) => Source::Csv,
        }
    }

    /// The fraction held out for test.
    pub fn test_fraction(&self) -> f64 {
        match self {
            DatasetSpec::Digits { test_fraction, .. }
            | DatasetSpec::Synthetic { test_fraction, .. }
            | DatasetSpec::Idx { test_fraction, .. } => *test_fraction,
            DatasetSpec::Parquet(t) | DatasetSpec::Csv(t) => t.test_fraction,
        }
    }

    /// The seed of the train/test shuffle.
    pub fn split_seed(&self) -> u64 {
        match self {
            DatasetSpec::Digits { split_seed, .. }
            | DatasetSpec::Synthetic { split_seed, .. }
            | DatasetSpec::Idx { split_seed, .. } => *split_seed,
            DatasetSpec::Parquet(t) | DatasetSpec::Csv(t) => t.split_seed,
        }
    }

    /// Checks the values that no file can fix: fractions, sizes, paired test files.
    pub fn validate(&self) -> Result<(), DatasetError> {
        let fraction = self.test_fraction();
        if !(fraction > 0.0 && fraction < 1.0) {
            return Err(DatasetError::InvalidSpec(format!(
                "test_fraction must be in (0, 1), got {fraction}"
            )));
        }
        match self {
            DatasetSpec::Synthetic {
                n_samples,
                n_features,
                n_classes,
                ..
            } if *n_samples < 2 || *n_features == 0 || *n_classes < 2 => {
                return Err(DatasetError::InvalidSpec(format!(
                    "synthetic needs n_samples >= 2, n_features >= 1, n_classes >= 2; got \
                     {n_samples}, {n_features}, {n_classes}"
                )));
            }
            DatasetSpec::Idx {
                test_images,
                test_labels,
                ..
            } if test_images.is_some() != test_labels.is_some() => {
                return Err(DatasetError::InvalidSpec(
                    "idx: test_images and test_labels go together".into(),
                ));
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_tables_parse_with_defaults_and_reject_unknown_fields() {
        let s: DatasetSpec =
            toml::from_str("source = \"csv\"\npath = \"a.csv\"\nlabel = \"y\"").unwrap();
        assert_eq!(s, DatasetSpec::Csv(TableSpec::new("a.csv", "y")));
        assert!(toml::from_str::<DatasetSpec>(
            "source = \"csv\"\npath = \"a\"\nlabel = \"y\"\nx = 1"
        )
        .is_err());
        assert!(toml::from_str::<DatasetSpec>("source = \"digits\"\ntest_fractio = 0.3").is_err());
        assert!(toml::from_str::<DatasetSpec>("source = \"mnist\"").is_err());
        let bad = DatasetSpec::Digits {
            test_fraction: 1.0,
            split_seed: 0,
        };
        assert!(crate::load(&bad)
            .unwrap_err()
            .to_string()
            .contains("test_fraction"));
        let one_sided: DatasetSpec =
            toml::from_str("source = \"idx\"\nimages = \"i\"\nlabels = \"l\"\ntest_images = \"t\"")
                .unwrap();
        assert!(one_sided.validate().is_err());
    }
}
