//! Random operands for the CUDA tests and benchmarks: V:N:M structures drawn directly (a random
//! 4-column choice per V×M block, 2 of those per row — no magnitude search, so large shapes and
//! large M are instant) and values that fp16 represents exactly, so that device results can be
//! held to the CPU reference tightly.

use super::CudaError;
use crate::{CsrMatrix, Mask, VnmMatrix};

/// SplitMix64, seeded.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// `k` distinct values of `0..n`, ascending (all of them when n ≤ k).
    fn choose(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        for i in 0..k.min(n) {
            let j = i + self.below(n - i);
            all.swap(i, j);
        }
        all.truncate(k.min(n));
        all.sort_unstable();
        all
    }
}

/// Nonzero multiples of 1/8 in [-2, 2]: exact in fp16, and their products and sums (for K up
/// to tens of thousands) exact in f32.
pub fn exact_values(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..len)
        .map(|_| {
            let k = rng.below(32) as f32 + 1.0; // 1..=32
            let sign = if rng.next() & 1 == 0 { 1.0 } else { -1.0 };
            sign * k / 16.0
        })
        .collect()
}

/// A random V:2:M keep-mask: per V×M block 4 random columns (fewer in a last block narrower
/// than 4), per row 2 random ones of those.
pub fn vnm_mask(
    rows: usize,
    cols: usize,
    v: usize,
    m: usize,
    seed: u64,
) -> Result<Mask, CudaError> {
    if v == 0 || !rows.is_multiple_of(v) || m < 4 {
        return Err(CudaError::Shape(format!(
            "V={v}, M={m} do not fit {rows} rows"
        )));
    }
    let mut rng = Rng(seed);
    let mut keep = vec![false; rows * cols];
    for b in 0..rows / v {
        for g in 0..cols.div_ceil(m) {
            let width = m.min(cols - g * m);
            let quad = rng.choose(width, 4);
            for r in b * v..(b + 1) * v {
                for i in rng.choose(quad.len(), 2) {
                    keep[r * cols + g * m + quad[i]] = true;
                }
            }
        }
    }
    Mask::new(rows, cols, keep).map_err(|e| CudaError::Shape(e.to_string()))
}

/// A random V:2:M matrix with [`exact_values`].
pub fn random_vnm(
    rows: usize,
    cols: usize,
    v: usize,
    m: usize,
    seed: u64,
) -> Result<VnmMatrix, CudaError> {
    let mask = vnm_mask(rows, cols, v, m, seed)?;
    let values = exact_values(rows * cols, seed ^ 0x5EED);
    VnmMatrix::from_masked(&values, &mask, v, m).map_err(|e| CudaError::Shape(e.to_string()))
}

/// A random CSR matrix keeping about `density` of the entries, with [`exact_values`].
pub fn random_csr(
    rows: usize,
    cols: usize,
    density: f64,
    seed: u64,
) -> Result<CsrMatrix, CudaError> {
    let mut rng = Rng(seed);
    let threshold = (density.clamp(0.0, 1.0) * (1u64 << 32) as f64) as u64;
    let keep: Vec<bool> = (0..rows * cols)
        .map(|_| rng.next() >> 32 < threshold)
        .collect();
    let mask = Mask::new(rows, cols, keep).map_err(|e| CudaError::Shape(e.to_string()))?;
    let values = exact_values(rows * cols, seed ^ 0xC5A);
    CsrMatrix::from_masked(&values, &mask).map_err(|e| CudaError::Shape(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_vnm_has_the_structure() {
        let (rows, cols, v, m) = (32, 37, 16, 8);
        let a = random_vnm(rows, cols, v, m, 3).unwrap();
        let d = a.to_dense();
        for r in 0..rows {
            for g in 0..cols.div_ceil(m) {
                let kept = (g * m..(g * m + m).min(cols))
                    .filter(|&c| d[r * cols + c] != 0.0)
                    .count();
                assert!((1..=2).contains(&kept), "row {r} group {g} keeps {kept}");
            }
        }
        for b in 0..rows / v {
            for g in 0..cols.div_ceil(m) {
                let used = (g * m..(g * m + m).min(cols))
                    .filter(|&c| (b * v..(b + 1) * v).any(|r| d[r * cols + c] != 0.0))
                    .count();
                assert!(used <= 4);
            }
        }
    }

    #[test]
    fn exact_values_are_fp16_exact_and_nonzero() {
        for x in exact_values(1000, 9) {
            assert_ne!(x, 0.0);
            assert_eq!(half::f16::from_f32(x).to_f32(), x);
        }
    }
}
