//! `[dataset]`: the data source, its files (read once here for their digests) and split,
//! validated into the data set trial.

use super::error::{ExperimentError, SourceMap};
use super::limits;
use super::schema::*;
use super::validate::check;
use crate::kinds::DatasetTrial;
use datasets::DatasetError;
use std::ops::Range;
use std::path::PathBuf;
use toml::Spanned;

/// Where `[dataset]`'s keys are in the experiment file, for the errors that only loading the
/// data finds (a file that is not a data set, a missing label column, a split that leaves a
/// part empty): they point at the key at fault rather than at the table.
#[derive(Clone, Debug, Default)]
pub struct DatasetSpans {
    /// The `[dataset]` header.
    header: Range<usize>,
    /// `test_fraction`, if given.
    test_fraction: Option<Range<usize>>,
    /// `label`, if given: the column's name and the span of its key.
    label: Option<(String, Range<usize>)>,
    /// Each data file, resolved, and the span of the key that names it.
    files: Vec<(PathBuf, Range<usize>)>,
}

impl DatasetSpans {
    /// The span of the key that `e` is about (the table's header when no key is).
    pub fn of(&self, e: &DatasetError) -> Range<usize> {
        let file = |path: &PathBuf| {
            self.files
                .iter()
                .find(|(p, _)| p == path)
                .map(|(_, span)| span.clone())
        };
        let at = match e {
            DatasetError::MissingColumn { path, column, .. } => match &self.label {
                Some((label, span)) if label == column => Some(span.clone()),
                _ => file(path),
            },
            DatasetError::EmptySplit { .. } => self.test_fraction.clone(),
            DatasetError::Io { path, .. } | DatasetError::BadData { path, .. } => file(path),
            _ => None,
        };
        at.unwrap_or_else(|| self.header.clone())
    }
}

/// Validates `[dataset]`: the source's fields, its files, the split.
pub(super) fn dataset_trial(
    ds: &RawDataset,
    map: &SourceMap,
    seed: u64,
) -> Result<(DatasetTrial, DatasetSpans), ExperimentError> {
    let mut spans = DatasetSpans {
        header: map.section("dataset"),
        test_fraction: ds.test_fraction.as_ref().map(|f| f.span()),
        label: ds.label.as_ref().map(|l| (l.get_ref().clone(), l.span())),
        files: vec![],
    };
    use datasets::DatasetSpec as D;
    let source = *ds.source.get_ref();
    let test_fraction = match &ds.test_fraction {
        Some(f) => {
            let x = *f.get_ref();
            check(x > 0.0 && x < 1.0, map, f.span(), || {
                format!("test_fraction must be in (0, 1), found {x}")
            })?;
            x
        }
        None => 0.2,
    };
    // One seed for the split and for synthetic data: the experiment's.
    let split_seed = seed;
    let base = map
        .path()
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_default();
    let need =
        |f: &Option<Spanned<String>>, name: &str| -> Result<Spanned<String>, ExperimentError> {
            f.clone().ok_or_else(|| {
                map.error(
                    ds.source.span(),
                    format!("source = \"{source}\" needs `{name}`"),
                )
            })
        };
    // A key of another source was read and ignored (`train_images` under `source = "digits"`
    // trained on the digits): each key, the sources it applies to.
    let span = |f: &Option<Spanned<u64>>| f.as_ref().map(Spanned::span);
    let text = |f: &Option<Spanned<String>>| f.as_ref().map(Spanned::span);
    let (synthetic, idx, table) = (
        &[DatasetSource::Synthetic][..],
        &[DatasetSource::Idx][..],
        &[DatasetSource::Csv, DatasetSource::Parquet][..],
    );
    for (at, name, sources) in [
        (span(&ds.samples), "samples", synthetic),
        (span(&ds.features), "features", synthetic),
        (span(&ds.classes), "classes", synthetic),
        (text(&ds.train_images), "train_images", idx),
        (text(&ds.train_labels), "train_labels", idx),
        (text(&ds.test_images), "test_images", idx),
        (text(&ds.test_labels), "test_labels", idx),
        (text(&ds.path), "path", table),
        (text(&ds.label), "label", table),
    ] {
        if let Some(at) = at.filter(|_| !sources.contains(&source)) {
            return Err(map.error(
                at,
                format!("`{name}` does not apply to source = \"{source}\""),
            ));
        }
    }
    if let (Some(f), true) = (&ds.test_fraction, ds.test_images.is_some()) {
        return Err(map.error(
            f.span(),
            "`test_fraction` does not apply with `test_images`: the test part is those files",
        ));
    }
    // Each data file as written, its digest, and its path resolved against the file's folder.
    let mut files = Vec::new();
    let mut file_digests = Vec::new();
    let mut file = |f: Spanned<String>| -> Result<std::path::PathBuf, ExperimentError> {
        let p = base.join(f.get_ref());
        let mut h = blake3::Hasher::new();
        let digest = std::fs::File::open(&p)
            .and_then(|file| h.update_reader(file).map(|_| ()))
            .map(|_| *h.finalize().as_bytes())
            .map_err(|e| {
                map.error(
                    f.span(),
                    format!("cannot read data file {}: {e}", p.display()),
                )
            })?;
        spans.files.push((p.clone(), f.span()));
        files.push(f.into_inner());
        file_digests.push(digest);
        Ok(p)
    };
    let spec = match source {
        DatasetSource::Digits => D::Digits {
            test_fraction,
            split_seed,
        },
        DatasetSource::Synthetic => {
            let get = |f: &Option<Spanned<u64>>,
                       name: &str,
                       min: u64|
             -> Result<usize, ExperimentError> {
                let v = f.as_ref().ok_or_else(|| {
                    map.error(
                        ds.source.span(),
                        format!("source = \"synthetic\" needs `{name}`"),
                    )
                })?;
                check(*v.get_ref() >= min, map, v.span(), || {
                    format!("{name} must be ≥ {min}")
                })?;
                Ok(*v.get_ref() as usize)
            };
            let (n_samples, n_features) = (
                get(&ds.samples, "samples", 10)?,
                get(&ds.features, "features", 1)?,
            );
            let n_classes = get(&ds.classes, "classes", 2)?;
            if let (Some(c), Some(f), Some(n)) = (&ds.classes, &ds.features, &ds.samples) {
                let classes_max = datasets::CLASSES_MAX as u64;
                limits::at_most(*c.get_ref(), classes_max, "classes", map, c.span())?;
                limits::at_most(
                    *f.get_ref(),
                    limits::ELEMENTS_MAX,
                    "features",
                    map,
                    f.span(),
                )?;
                limits::matrix(
                    (*n.get_ref(), *f.get_ref()),
                    || "the samples".to_string(),
                    map,
                    n.span(),
                )?;
                // The teacher that labels them: a hidden layer of 2 × features, then classes.
                let (h, k) = (f.get_ref().saturating_mul(2).max(16), *c.get_ref());
                let teacher = || "the synthetic data's teacher network".to_string();
                limits::matrix((h, *f.get_ref()), teacher, map, f.span())?;
                limits::matrix((k, h), teacher, map, c.span())?;
            }
            D::Synthetic {
                n_samples,
                n_features,
                n_classes,
                seed,
                test_fraction,
                split_seed,
            }
        }
        DatasetSource::Idx => {
            let images = file(need(&ds.train_images, "train_images")?)?;
            let labels = file(need(&ds.train_labels, "train_labels")?)?;
            let (test_images, test_labels) = match (&ds.test_images, &ds.test_labels) {
                (Some(i), Some(l)) => (Some(file(i.clone())?), Some(file(l.clone())?)),
                (None, None) => (None, None),
                (Some(x), None) | (None, Some(x)) => {
                    return Err(map.error(x.span(), "give both `test_images` and `test_labels`, or neither (then the training files are split)"));
                }
            };
            D::Idx {
                images,
                labels,
                test_images,
                test_labels,
                n_classes: None,
                test_fraction,
                split_seed,
            }
        }
        DatasetSource::Parquet | DatasetSource::Csv => {
            let path = file(need(&ds.path, "path")?)?;
            let label = need(&ds.label, "label")?.into_inner();
            let table = datasets::TableSpec {
                test_fraction,
                split_seed,
                ..datasets::TableSpec::new(path, label)
            };
            if source == DatasetSource::Parquet {
                D::Parquet(table)
            } else {
                D::Csv(table)
            }
        }
    };
    Ok((
        DatasetTrial {
            spec,
            files,
            file_digests,
        },
        spans,
    ))
}
