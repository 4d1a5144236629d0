//! B's columns laid out one after the other (`out[c · stride + k] = b[k · n + c]`), for the
//! kernels that read a column of B as a contiguous vector (`few_columns`): 8×8 blocks
//! transposed in AVX registers, the edges one float at a time.
//!
//! Element by element the copy of a 768×17 B took a quarter of a 2:4 192×768×17 product's
//! time on Zen 4.

use crate::{isa, Isa};

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Writes `out[c · stride + k] = b[k · n + c]` for `k < rows`, `c < n`; `out` is not touched
/// elsewhere.
///
/// # Panics
/// If `b` holds fewer than `rows · n` floats, or `out` fewer than `(n − 1) · stride + rows`
/// (with `stride ≥ rows`).
pub(crate) fn transpose(b: &[f32], n: usize, rows: usize, out: &mut [f32], stride: usize) {
    if n == 0 || rows == 0 {
        return;
    }
    assert!(b.len() >= rows * n && stride >= rows && out.len() >= (n - 1) * stride + rows);
    let (rows8, cols8) = match isa() {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 => {
            // SAFETY: `isa()` reports AVX2 (so AVX) only where the CPU has it; the bounds were
            // asserted above.
            unsafe { blocks_avx(b, n, rows, out, stride) };
            (rows - rows % 8, n - n % 8)
        }
        _ => (0, 0),
    };
    // The edges: rows past the last whole block of 8 (every column), and columns past the last
    // whole block of 8 (the blocked rows).
    for k in 0..rows {
        let from = if k < rows8 { cols8 } else { 0 };
        for c in from..n {
            out[c * stride + k] = b[k * n + c];
        }
    }
}

/// The whole 8×8 blocks of [`transpose`].
///
/// # Safety
/// AVX is available, and the bounds asserted by [`transpose`] hold.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn blocks_avx(b: &[f32], n: usize, rows: usize, out: &mut [f32], stride: usize) {
    let (src, dst) = (b.as_ptr(), out.as_mut_ptr());
    for k in (0..rows - rows % 8).step_by(8) {
        for c in (0..n - n % 8).step_by(8) {
            // SAFETY: rows k..k + 8 of b hold columns c..c + 8 (k + 8 ≤ rows, c + 8 ≤ n), and
            // out's columns c..c + 8 hold rows k..k + 8 (asserted by the caller).
            unsafe {
                let r: [__m256; 8] =
                    std::array::from_fn(|i| _mm256_loadu_ps(src.add((k + i) * n + c)));
                let t = transpose8(r);
                for (j, v) in t.into_iter().enumerate() {
                    _mm256_storeu_ps(dst.add((c + j) * stride + k), v);
                }
            }
        }
    }
}

/// The 8×8 transpose of `r` (row `i` in `r[i]`): unpacks, shuffles, then 128-bit lane swaps.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    // SAFETY: register operations only; the caller runs with AVX.
    unsafe {
        let t0 = _mm256_unpacklo_ps(r[0], r[1]);
        let t1 = _mm256_unpackhi_ps(r[0], r[1]);
        let t2 = _mm256_unpacklo_ps(r[2], r[3]);
        let t3 = _mm256_unpackhi_ps(r[2], r[3]);
        let t4 = _mm256_unpacklo_ps(r[4], r[5]);
        let t5 = _mm256_unpackhi_ps(r[4], r[5]);
        let t6 = _mm256_unpacklo_ps(r[6], r[7]);
        let t7 = _mm256_unpackhi_ps(r[6], r[7]);
        let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        [
            _mm256_permute2f128_ps::<0x20>(s0, s4),
            _mm256_permute2f128_ps::<0x20>(s1, s5),
            _mm256_permute2f128_ps::<0x20>(s2, s6),
            _mm256_permute2f128_ps::<0x20>(s3, s7),
            _mm256_permute2f128_ps::<0x31>(s0, s4),
            _mm256_permute2f128_ps::<0x31>(s1, s5),
            _mm256_permute2f128_ps::<0x31>(s2, s6),
            _mm256_permute2f128_ps::<0x31>(s3, s7),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::transpose;

    #[test]
    fn transposes_every_shape_with_edges_and_leaves_the_rest() {
        for (rows, n) in [
            (1, 1),
            (8, 8),
            (17, 9),
            (768, 17),
            (5, 24),
            (23, 2),
            (16, 31),
        ] {
            let b: Vec<f32> = (0..rows * n).map(|i| i as f32).collect();
            let stride = rows + 3;
            let mut out = vec![-1.0f32; n * stride];
            transpose(&b, n, rows, &mut out, stride);
            for c in 0..n {
                for k in 0..stride {
                    let want = if k < rows { b[k * n + c] } else { -1.0 };
                    assert_eq!(out[c * stride + k], want, "{rows}x{n}: column {c}, row {k}");
                }
            }
        }
    }
}
