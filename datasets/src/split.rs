//! The seeded train/test split and the assembly of a [`Dataset`] from all its samples.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{Dataset, DatasetError};

/// All samples of a source before the split.
pub(crate) struct Samples {
    pub name: String,
    pub n_features: usize,
    pub n_classes: usize,
    pub x: Vec<f32>,
    pub y: Vec<u32>,
    pub image_shape: Option<(usize, usize, usize)>,
}

/// A permutation of `0..n` from a ChaCha8 generator: Fisher–Yates written out here (rather than
/// `SliceRandom::shuffle`) so that the split cannot change with a `rand` upgrade.
pub(crate) fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

fn gather(x: &[f32], y: &[u32], n_features: usize, rows: &[usize]) -> (Vec<f32>, Vec<u32>) {
    let mut gx = Vec::with_capacity(rows.len() * n_features);
    let mut gy = Vec::with_capacity(rows.len());
    for &r in rows {
        gx.extend_from_slice(&x[r * n_features..(r + 1) * n_features]);
        gy.push(y[r]);
    }
    (gx, gy)
}

/// Splits by a seeded shuffle: the first `round(n · test_fraction)` shuffled samples are the test
/// part. Both parts must end up non-empty.
pub(crate) fn split(s: Samples, test_fraction: f64, seed: u64) -> Result<Dataset, DatasetError> {
    let n = s.y.len();
    let n_test = (n as f64 * test_fraction).round() as usize;
    if n_test == 0 || n_test >= n {
        return Err(DatasetError::EmptySplit {
            name: s.name,
            samples: n,
            test_fraction,
        });
    }
    let order = permutation(n, seed);
    let (test_x, test_y) = gather(&s.x, &s.y, s.n_features, &order[..n_test]);
    let (train_x, train_y) = gather(&s.x, &s.y, s.n_features, &order[n_test..]);
    Ok(Dataset {
        name: s.name,
        n_features: s.n_features,
        n_classes: s.n_classes,
        train_x,
        train_y,
        test_x,
        test_y,
        image_shape: s.image_shape,
    })
}

/// Standardises each feature in place with the training part's mean and standard deviation
/// (a constant feature is only centred).
pub(crate) fn standardize(d: &mut Dataset) {
    let f = d.n_features;
    let n = d.n_train().max(1) as f64;
    let mut mean = vec![0f64; f];
    let mut var = vec![0f64; f];
    for row in d.train_x.chunks_exact(f) {
        for (m, &v) in mean.iter_mut().zip(row) {
            *m += v as f64;
        }
    }
    mean.iter_mut().for_each(|m| *m /= n);
    for row in d.train_x.chunks_exact(f) {
        for ((s, &v), m) in var.iter_mut().zip(row).zip(&mean) {
            *s += (v as f64 - m).powi(2);
        }
    }
    let scale: Vec<f64> = var
        .iter()
        .map(|s| {
            let sd = (s / n).sqrt();
            if sd > 1e-12 {
                1.0 / sd
            } else {
                1.0
            }
        })
        .collect();
    for x in [&mut d.train_x, &mut d.test_x] {
        for row in x.chunks_exact_mut(f) {
            for ((v, m), s) in row.iter_mut().zip(&mean).zip(&scale) {
                *v = ((*v as f64 - m) * s) as f32;
            }
        }
    }
}

/// The most values (samples × features) one file of a data set may hold: 2²⁸, 1 GiB as f32
/// (an IDX file of 17 images of 8192² pixels asked for 4 GiB twice over and aborted the run).
pub const VALUES_MAX: usize = 1 << 28;

/// The most classes a data set may have (the classifier's rows; a label of 10⁹ in an ID column
/// read as labels asked for a 64 GB layer and aborted the run).
pub const CLASSES_MAX: usize = 1 << 16;

/// Checks labels against a declared class count (or infers it as max + 1), at most
/// [`CLASSES_MAX`].
pub(crate) fn class_count(
    path: &std::path::Path,
    labels: &[u32],
    declared: Option<usize>,
) -> Result<usize, DatasetError> {
    let max = labels.iter().copied().max().unwrap_or(0) as usize;
    if declared.is_none() && max >= CLASSES_MAX {
        let i = labels.iter().position(|&l| l as usize == max).unwrap_or(0);
        return Err(DatasetError::bad(
            path,
            format!(
                "label {max} of sample {i} would make {} classes (labels are 0..classes-1, at most {CLASSES_MAX} classes): is the label column the right one?",
                max + 1
            ),
        ));
    }
    match declared {
        Some(k) => match labels.iter().position(|&l| l as usize >= k) {
            Some(i) => Err(DatasetError::bad(
                path,
                format!(
                    "label {} of sample {i} is out of range for n_classes = {k}",
                    labels[i]
                ),
            )),
            None => Ok(k),
        },
        None => Ok(max + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_past_the_class_limit_is_an_error_naming_it() {
        let p = std::path::Path::new("d.csv");
        assert_eq!(class_count(p, &[0, 3, 1], None).unwrap(), 4);
        let e = class_count(p, &[0, 1_000_000_000, 1], None).unwrap_err();
        assert!(
            e.to_string().contains("label 1000000000 of sample 1"),
            "{e}"
        );
        assert_eq!(class_count(p, &[0, 1], Some(2)).unwrap(), 2);
    }

    #[test]
    fn permutation_is_a_seeded_permutation() {
        let p = permutation(100, 3);
        let mut sorted = p.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        assert_eq!(p, permutation(100, 3));
        assert_ne!(p, permutation(100, 4));
    }

    #[test]
    fn standardize_uses_train_statistics() {
        let mut d = Dataset {
            name: "t".into(),
            n_features: 2,
            n_classes: 2,
            train_x: vec![1.0, 5.0, 3.0, 5.0],
            train_y: vec![0, 1],
            test_x: vec![2.0, 6.0],
            test_y: vec![0],
            image_shape: None,
        };
        standardize(&mut d);
        // Feature 0: mean 2, sd 1; feature 1 constant 5: only centred.
        assert_eq!(d.train_x, vec![-1.0, 0.0, 1.0, 0.0]);
        assert_eq!(d.test_x, vec![0.0, 1.0]);
    }
}
