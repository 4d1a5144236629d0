//! Teacher–student data: standard-normal features labelled by the argmax of a seeded random
//! one-hidden-layer ReLU network (the "teacher"). Any size, no files: for scale runs and tests.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::split::{split, Samples};
use crate::{Dataset, DatasetError};

/// The shape and seed of a synthetic problem.
pub(crate) struct TeacherSpec {
    pub n_samples: usize,
    pub n_features: usize,
    pub n_classes: usize,
    pub seed: u64,
}

/// Standard normal by Box–Muller from two uniform draws of the generator (value-stable across
/// `rand` versions, unlike `rand_distr`).
fn normal(rng: &mut ChaCha8Rng) -> f32 {
    let u1 = ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let u2 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}

pub(crate) fn load(
    t: &TeacherSpec,
    test_fraction: f64,
    split_seed: u64,
) -> Result<Dataset, DatasetError> {
    let mut rng = ChaCha8Rng::seed_from_u64(t.seed);
    let (f, k) = (t.n_features, t.n_classes);
    let h = (2 * f).max(16);
    let w1: Vec<f32> = (0..h * f)
        .map(|_| normal(&mut rng) / (f as f32).sqrt())
        .collect();
    let b1: Vec<f32> = (0..h).map(|_| 0.1 * normal(&mut rng)).collect();
    let w2: Vec<f32> = (0..k * h)
        .map(|_| normal(&mut rng) / (h as f32).sqrt())
        .collect();
    let x: Vec<f32> = (0..t.n_samples * f).map(|_| normal(&mut rng)).collect();
    let mut hidden = vec![0f32; h];
    let y = x
        .chunks_exact(f)
        .map(|row| {
            for (j, hj) in hidden.iter_mut().enumerate() {
                let z: f32 = w1[j * f..(j + 1) * f]
                    .iter()
                    .zip(row)
                    .map(|(a, b)| a * b)
                    .sum();
                *hj = (z + b1[j]).max(0.0);
            }
            let logit = |c: usize| -> f32 {
                w2[c * h..(c + 1) * h]
                    .iter()
                    .zip(&hidden)
                    .map(|(a, b)| a * b)
                    .sum()
            };
            // First maximum wins on ties: deterministic.
            (1..k).fold(
                0usize,
                |best, c| if logit(c) > logit(best) { c } else { best },
            ) as u32
        })
        .collect();
    split(
        Samples {
            name: "synthetic".into(),
            n_features: f,
            n_classes: k,
            x,
            y,
            image_shape: None,
        },
        test_fraction,
        split_seed,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(seed: u64) -> TeacherSpec {
        TeacherSpec {
            n_samples: 500,
            n_features: 12,
            n_classes: 4,
            seed,
        }
    }

    #[test]
    fn synthetic_is_seeded_and_uses_several_classes() {
        let a = load(&spec(1), 0.2, 0).unwrap();
        assert_eq!(a, load(&spec(1), 0.2, 0).unwrap());
        assert_ne!(a.train_x, load(&spec(2), 0.2, 0).unwrap().train_x);
        assert_eq!((a.n_train(), a.n_test()), (400, 100));
        let used = (0..4).filter(|c| a.train_y.contains(c)).count();
        assert!(used >= 3, "teacher labels only {used} classes");
        let mean: f32 = a.train_x.iter().sum::<f32>() / a.train_x.len() as f32;
        assert!(mean.abs() < 0.1, "features are not centred: {mean}");
    }
}
