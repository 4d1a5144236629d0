//! The transformer encoder's host operations between its products (LayerNorm, the residual
//! adds; GELU is fused into the up-projection's epilogue, `kernels::Activation`), cut into
//! parts that run on the kernels' threads ([`kernels::run_host_parts`]), each at the kernels'
//! ISA. On the ViT shape at batch 256 this host work took 4.2–5.0 ms of a pass on one thread
//! while the products ran on two (Intel Xeon), and 8.7–10.7 ms, half the pass, on a Zen 3
//! core; on two threads 6.1–8.1 ms there, and 2.7–3.3 ms since the attention runs in blocks
//! of samples (`examples/model_pass`, kernels/BENCH.md 2026-12-02 and 2026-12-02 (night)).
//! In f32 the LayerNorm is the kernels' (`kernels::layer_norm_columns`, explicit vectors, the
//! same bits as [`norm_columns`], which the f64 reference pass runs). Every output element is
//! computed by the same operations in the same order whatever the thread count, so the results
//! are the same bit for bit.

use std::ops::Range;
use std::sync::Mutex;

use kernels::HostParts;

use super::graph::Real;
use crate::model::{Weights, LAYER_NORM_EPS};
use crate::StageError;

/// `0..n` cut into at most `threads` ranges at multiples of 64 columns (several cache lines of
/// a row each, so that the threads share at most the line at each boundary).
fn column_ranges(n: usize, threads: usize) -> Vec<Range<usize>> {
    let per = n.div_ceil(threads.max(1)).next_multiple_of(64);
    (0..n)
        .step_by(per.max(1))
        .map(|c| c..(c + per).min(n))
        .collect()
}

/// Locks a part's slot (a part that panicked leaves its slot usable: the pool reports it).
pub(super) fn slot<'s, X>(m: &'s Mutex<X>) -> std::sync::MutexGuard<'s, X> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// LayerNorm of every column of `x` (`d × n`) with the parameters at `at` (weight, then bias)
/// into `out` (as long as `x`, every value overwritten), on up to `threads` threads, each over
/// its own columns.
#[inline(always)]
pub(super) fn layer_norm<T: Real>(
    w: &Weights,
    at: usize,
    x: &[T],
    (d, n): (usize, usize),
    mut out: Vec<T>,
    threads: usize,
) -> Result<Vec<T>, StageError> {
    let (gain, shift) = (&w.params[at].values, &w.params[at + 1].values);
    debug_assert_eq!((out.len(), x.len()), (d * n, d * n));
    let ranges = column_ranges(n, threads);
    // Each part's pieces of every output row: its columns, row by row.
    let mut pieces: Vec<Vec<&mut [T]>> = ranges.iter().map(|_| Vec::with_capacity(d)).collect();
    for row in out.chunks_mut(n.max(1)) {
        let mut rest = row;
        for (mine, r) in pieces.iter_mut().zip(&ranges) {
            let (piece, tail) = rest.split_at_mut(r.len());
            mine.push(piece);
            rest = tail;
        }
    }
    let parts = Norms {
        x,
        n,
        gain,
        shift,
        ranges,
        outs: pieces
            .into_iter()
            .map(|p| Mutex::new((p, Ok(()))))
            .collect(),
    };
    kernels::run_host_parts(&parts, parts.ranges.len(), threads);
    for part in parts.outs {
        part.into_inner().unwrap_or_else(|e| e.into_inner()).1?;
    }
    Ok(out)
}

/// [`layer_norm`]'s parts: part `i` normalises the columns `ranges[i]` into `outs[i]`, with
/// its result beside them.
struct Norms<'a, T> {
    x: &'a [T],
    n: usize,
    gain: &'a [f32],
    shift: &'a [f32],
    ranges: Vec<Range<usize>>,
    #[allow(clippy::type_complexity)] // a part's output rows and its result
    outs: Vec<Mutex<(Vec<&'a mut [T]>, Result<(), kernels::KernelError>)>>,
}

impl<T: Real> HostParts for Norms<'_, T> {
    #[inline(always)]
    fn part(&self, i: usize) {
        let mut part = slot(&self.outs[i]);
        let (out, result) = &mut *part;
        let cols = self.ranges[i].clone();
        // f32 through the kernels' explicit vectors (the same bits as `norm_columns`).
        if let Some(x) = T::f32s(self.x) {
            let rows: Option<Vec<&mut [f32]>> = out.iter_mut().map(|r| T::f32s_mut(r)).collect();
            if let Some(mut rows) = rows {
                let params = (self.gain, self.shift, LAYER_NORM_EPS as f32);
                *result = kernels::layer_norm_columns(x, self.n, cols, params, &mut rows);
                return;
            }
        }
        norm_columns(self.x, self.n, cols, self.gain, self.shift, out);
    }
}

/// Columns per step of [`norm_columns`] (the f64 reference pass's LayerNorm; the f32 pass's,
/// in the kernels, takes 4 vectors of columns a step for the same reason): a step's 64 columns
/// of the ViT's 64 rows are 16 KiB,
/// so its three passes (mean, variance, output) read them from L1; over a part's whole range
/// (half of 4,352 columns at batch 256) each pass streamed the activations through L3.
const NORM_STEP: usize = 64;

/// LayerNorm of the columns `cols` of `x` (`d × n`) into `out` (a slice per row, those
/// columns), [`NORM_STEP`] columns at a time, row by row so that every pass reads the
/// activations contiguously. Each column's sums run over the rows in order, so the result does
/// not depend on how the columns are cut.
#[inline(always)]
fn norm_columns<T: Real>(
    x: &[T],
    n: usize,
    cols: Range<usize>,
    gain: &[f32],
    shift: &[f32],
    out: &mut [&mut [T]],
) {
    let d = out.len();
    let inv_d = T::of(1.0 / d as f64);
    for start in cols.clone().step_by(NORM_STEP) {
        let step = start..(start + NORM_STEP).min(cols.end);
        let width = step.len();
        let rows = || x.chunks(n.max(1)).map(|row| &row[step.clone()]);
        let mut mean = [T::default(); NORM_STEP];
        for row in rows() {
            mean.iter_mut().zip(row).for_each(|(m, &v)| *m += v);
        }
        mean.iter_mut().for_each(|m| *m = *m * inv_d);
        let mut inv = [T::default(); NORM_STEP];
        for row in rows() {
            for ((s, &v), &m) in inv.iter_mut().zip(row).zip(&mean) {
                let c = v - m;
                *s += c * c;
            }
        }
        inv.iter_mut()
            .for_each(|s| *s = T::of(1.0) / (*s * inv_d + T::of(LAYER_NORM_EPS)).sqrt());
        let at = start - cols.start..start - cols.start + width;
        for (r, (o, row)) in out.iter_mut().zip(rows()).enumerate() {
            let (g, b) = (T::of(gain[r] as f64), T::of(shift[r] as f64));
            for (((o, &v), &m), &i) in o[at.clone()].iter_mut().zip(row).zip(&mean).zip(&inv) {
                *o = (v - m) * i * g + b;
            }
        }
    }
}

/// Values per band when the rows of `len` values, `n` per row, are cut into at most `threads`
/// bands of whole rows (at least one row each).
fn band_len(len: usize, n: usize, threads: usize) -> usize {
    let rows = len / n.max(1);
    rows.div_ceil(threads.max(1)).max(1) * n.max(1)
}

/// The residual stream's `h += r` (both `rows × n`, row-major) on up to `threads` threads, each
/// over a band of rows, in the first `cols` columns of each row only (the rest of `h` left as
/// it was: after the last block only the class tokens' columns are read). On one thread the
/// four adds of a ViT pass at batch 256 took 200–280 µs (Zen 4); one add of 64×4,352 in cache
/// takes 33 µs on one thread, 18 µs on two, and 1.5 µs over the class tokens' columns.
#[inline(always)]
pub(super) fn add_residual<T: Real>(
    h: &mut [T],
    r: &[T],
    (n, cols): (usize, usize),
    threads: usize,
) {
    debug_assert!(h.len() == r.len() && cols <= n);
    let per = band_len(h.len(), n, threads);
    let parts = Residual {
        bands: h.chunks_mut(per).map(Mutex::new).collect(),
        r,
        per,
        n: n.max(1),
        cols,
    };
    kernels::run_host_parts(&parts, parts.bands.len(), threads);
}

/// [`add_residual`]'s parts: band `i` holds rows from `i · per / n`.
struct Residual<'a, T> {
    bands: Vec<Mutex<&'a mut [T]>>,
    r: &'a [T],
    per: usize,
    n: usize,
    cols: usize,
}

impl<T: Real> HostParts for Residual<'_, T> {
    #[inline(always)]
    fn part(&self, i: usize) {
        let mut band = slot(&self.bands[i]);
        let r = &self.r[i * self.per..][..band.len()];
        for (h, r) in band.chunks_mut(self.n).zip(r.chunks(self.n)) {
            h[..self.cols]
                .iter_mut()
                .zip(&r[..self.cols])
                .for_each(|(a, &b)| *a += b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::graph::{forward, naive_gemm, Gemm};
    use super::*;

    /// Each layer's `W · x` (f32, in order), with the host work on `threads` threads.
    struct Threaded<'a>(&'a Weights, usize);

    impl Gemm<f32> for Threaded<'_> {
        fn gemm(
            &mut self,
            i: usize,
            x: &[f32],
            n: usize,
            activation: kernels::Activation,
        ) -> Result<Vec<f32>, StageError> {
            Ok(naive_gemm(self.0, i, x, n, activation))
        }

        fn host_threads(&self) -> usize {
            self.1
        }
    }

    /// The encoder's host work on 2 or 3 threads gives the one-thread pass's logits bit for
    /// bit, on the batched attention path (≥ 8 samples) and at odd sizes (67 columns a row).
    #[test]
    fn a_pass_on_more_threads_equals_the_one_thread_pass_bit_for_bit() {
        let vit = crate::ModelSpec::Transformer {
            layers: 2,
            d_model: 24,
            heads: 3,
            d_ff: 40,
            patch: 2,
        };
        let w = Weights::init(&vit, 64, Some((1, 8, 8)), 5, 3).unwrap();
        for samples in [1, 11, 67] {
            let xt = kernels::random_values(64 * samples, 2);
            let one = forward(&w, &xt, samples, &mut Threaded(&w, 1)).unwrap();
            for threads in [2, 3] {
                let many = forward(&w, &xt, samples, &mut Threaded(&w, threads)).unwrap();
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&one),
                    bits(&many),
                    "{samples} samples, {threads} threads"
                );
            }
        }
    }

    /// The kernels' LayerNorm (the f32 pass's) gives [`norm_columns`]' bits in f32, over
    /// column ranges that start and end anywhere.
    #[test]
    fn the_kernels_layer_norm_gives_norm_columns_bits() {
        let (d, n) = (24, 203);
        let x: Vec<f32> = kernels::random_values(d * n, 7)
            .iter()
            .map(|v| 2.0 * v - 0.3)
            .collect();
        let (gain, shift) = (kernels::random_values(d, 8), kernels::random_values(d, 9));
        for cols in [0..n, 5..n, 64..130, 17..18] {
            let mut want = vec![vec![f32::NAN; cols.len()]; d];
            let mut rows: Vec<&mut [f32]> = want.iter_mut().map(|r| r.as_mut_slice()).collect();
            norm_columns(&x, n, cols.clone(), &gain, &shift, &mut rows);
            let mut got = vec![vec![f32::NAN; cols.len()]; d];
            let mut rows: Vec<&mut [f32]> = got.iter_mut().map(|r| r.as_mut_slice()).collect();
            let params = (&gain[..], &shift[..], LAYER_NORM_EPS as f32);
            kernels::layer_norm_columns(&x, n, cols.clone(), params, &mut rows).unwrap();
            let bits = |v: &[Vec<f32>]| v.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "columns {cols:?}");
        }
    }

    #[test]
    fn column_ranges_cover_every_column_once_in_whole_lines() {
        for (n, threads) in [
            (0, 2),
            (1, 2),
            (63, 2),
            (64, 2),
            (4352, 2),
            (4352, 3),
            (100, 1),
        ] {
            let r = column_ranges(n, threads);
            assert!(r.len() <= threads.max(1), "{n} {threads}: {r:?}");
            let flat: Vec<usize> = r.iter().flat_map(|x| x.clone()).collect();
            assert_eq!(flat, (0..n).collect::<Vec<_>>(), "{n} {threads}");
            assert!(r.iter().all(|x| x.start % 64 == 0), "{n} {threads}: {r:?}");
        }
    }
}
