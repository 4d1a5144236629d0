//! Synthetic matrices of an exact structure, for kernel tuning and benchmarks: the kernel-tune
//! stage is keyed on the format signature, not on weights, so it measures on these.

use crate::{build_mask, FormatSignature, KernelError, Mask, Pattern, SparseMatrix};

/// SplitMix64: a tiny, well-mixed, seedable generator (no dependency for one loop).
pub(crate) struct SplitMix(pub(crate) u64);

impl SplitMix {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub(crate) fn next_f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// Uniform random values in [-1, 1), `len` of them, from `seed`.
pub fn random_values(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix(seed);
    (0..len).map(|_| rng.next_f32()).collect()
}

/// `k` distinct indices of `0..len`, chosen uniformly (partial Fisher–Yates).
fn choose(rng: &mut SplitMix, len: usize, k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..len).collect();
    for i in 0..k.min(len) {
        let j = i + (rng.next_u64() % (len - i) as u64) as usize;
        idx.swap(i, j);
    }
    idx.truncate(k.min(len));
    idx
}

/// A random V:2:M mask: per block a random quadruple, per row a random 2 of it. (The exact
/// magnitude builder is too slow for large M to run for every synthetic matrix, and random
/// choices are what trained weights look like to a kernel.)
fn random_vnm_mask(
    rows: usize,
    cols: usize,
    v: usize,
    m: usize,
    seed: u64,
) -> Result<Mask, KernelError> {
    let mut rng = SplitMix(seed ^ 0x5EED);
    let mut keep = vec![false; rows * cols];
    for b in 0..rows / v {
        for g0 in (0..cols).step_by(m) {
            let quad = choose(&mut rng, m.min(cols - g0), 4);
            for i in 0..v {
                for j in choose(&mut rng, quad.len(), 2) {
                    keep[(b * v + i) * cols + g0 + quad[j]] = true;
                }
            }
        }
    }
    Mask::new(rows, cols, keep)
}

/// A random matrix of signature `sig`: uniform weights in [-1, 1) with the signature's structure
/// (magnitude-pruned, except V:N:M whose block and row choices are drawn at random).
pub fn synthetic(sig: &FormatSignature, seed: u64) -> Result<SparseMatrix, KernelError> {
    let pattern = sig.pattern();
    pattern.validate_for(sig.rows, sig.cols)?;
    let values = random_values(sig.rows * sig.cols, seed);
    let mask = match pattern {
        Pattern::Vnm { v, m } => random_vnm_mask(sig.rows, sig.cols, v, m, seed)?,
        _ => {
            let scores: Vec<f32> = values.iter().map(|v| v.abs()).collect();
            build_mask(&pattern, &scores, sig.rows, sig.cols)?
        }
    };
    SparseMatrix::from_masked(&pattern, &values, &mask)
}
