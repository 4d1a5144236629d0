//! A pass cut by samples: the batch in slices of consecutive samples, each run through the
//! whole model on one thread, all at once. The other way to use the threads is the pass of
//! [`run_cpu`], whose every product is shared by them; [`super::passes::paired_passes`] times
//! both and keeps the one whose dense pass was faster.
//!
//! Why both: when the threads share every product, each layer reads an input that both threads
//! have just written, and fetching the other core's lines is not free. On the quickstart's
//! 64→256→256→10 MLP at batch 256 (Intel Xeon, AVX-512, 2 cores) the three products took 150 µs
//! inside the dense pass against 118 µs alone (kernels/BENCH.md, fortieth session); cut into
//! two slices of 128 samples, the dense pass took 149–150 µs against 171–177 µs whole and a 2:8
//! one 79 µs against 109–112 µs (forty-first session). A slice's activations never leave the
//! core that computes them, and the threads meet once per pass instead of once per product.
//! Where the layers are large (a ViT at DeiT-tiny widths) cutting gained less: 3 % on the dense
//! pass, 7–9 % on sparse ones.
//!
//! Every slice runs each layer at the point the whole batch's pass runs it, on one thread (a
//! point whose parameters do not fit a slice's columns rules the way out). The slices' inputs
//! are cut from the batch before the timing: a deployment hands each thread its own samples.

use std::sync::Mutex;

use super::passes::{run_cpu, Buffers};
use crate::model::Weights;
use crate::StageError;
use kernels::{ParamPoint, SparseMatrix};

/// How many slices a pass of `b` samples is cut into: one per thread that the points use (the
/// most any one uses: the threads the tuning allowed), at most `b`. One means no cut.
pub(super) fn slice_count(points: &[&[ParamPoint]], b: usize) -> usize {
    let threads = points
        .iter()
        .flat_map(|p| p.iter())
        .filter_map(|p| p.get("threads").ok())
        .max()
        .unwrap_or(1)
        .max(1) as usize;
    threads.min(b)
}

/// The samples of each of `slices` slices of a batch of `b`: consecutive, as equal as can be.
fn slice_sizes(b: usize, slices: usize) -> Vec<usize> {
    (0..slices)
        .map(|i| b / slices + usize::from(i < b % slices))
        .collect()
}

/// `points` on one thread, if every one of them is a point of its layer's space at every
/// slice's columns.
fn one_thread(
    model: &Weights,
    matrices: &[&SparseMatrix],
    points: &[ParamPoint],
    b: usize,
    slices: usize,
) -> Option<Vec<ParamPoint>> {
    let tokens = model.layer_tokens();
    let one: Vec<ParamPoint> = points
        .iter()
        .map(|p| {
            let mut q = p.clone();
            if q.0.contains_key("threads") {
                q.0.insert("threads".into(), 1);
            }
            q
        })
        .collect();
    let fits = slice_sizes(b, slices).iter().all(|&s| {
        matrices.iter().zip(&one).zip(&tokens).all(|((m, p), &t)| {
            kernels::cpu_space(&m.signature(), s * t)
                .contains(p)
                .is_ok()
        })
    });
    fits.then_some(one)
}

/// Whether a pass of `b` samples through `matrices` at `points` can be cut into `slices`.
pub(super) fn fits(
    model: &Weights,
    (matrices, points): (&[&SparseMatrix], &[ParamPoint]),
    b: usize,
    slices: usize,
) -> bool {
    slices > 1 && one_thread(model, matrices, points, b, slices).is_some()
}

/// One slice's state, kept from round to round: its buffers, its last output, and what its
/// last pass timed or failed with.
struct Slice {
    samples: usize,
    /// Its samples' input, features × samples.
    x: Vec<f32>,
    buffers: Buffers,
    out: Vec<f32>,
    gemm_us: Vec<f64>,
    error: Option<StageError>,
}

/// A pass of `b` samples cut into slices that run at once, each on one of the kernels' threads.
pub(super) struct SlicedPass<'a> {
    model: &'a Weights,
    matrices: &'a [&'a SparseMatrix],
    /// The points on one thread.
    points: Vec<ParamPoint>,
    slices: Vec<Mutex<Slice>>,
}

impl<'a> SlicedPass<'a> {
    /// The pass of `x` (`features × b`) through `matrices` at `points` cut into `slices`, or an
    /// error if some point does not fit a slice ([`fits`] says beforehand).
    pub(super) fn new(
        model: &'a Weights,
        (matrices, points): (&'a [&'a SparseMatrix], &[ParamPoint]),
        x: &[f32],
        b: usize,
        slices: usize,
    ) -> Result<Self, StageError> {
        let slices = slices.clamp(1, b.max(1));
        let points = one_thread(model, matrices, points, b, slices).ok_or_else(|| {
            StageError::InvalidConfig(format!(
                "a point does not fit a slice of {b} samples cut in {slices}"
            ))
        })?;
        let features = x.len() / b.max(1);
        let mut first = 0;
        let slices = slice_sizes(b, slices)
            .into_iter()
            .map(|samples| {
                let mut xs = Vec::with_capacity(features * samples);
                for row in x.chunks_exact(b.max(1)) {
                    xs.extend_from_slice(&row[first..first + samples]);
                }
                first += samples;
                Mutex::new(Slice {
                    samples,
                    x: xs,
                    buffers: Buffers::default(),
                    out: vec![],
                    gemm_us: Vec::with_capacity(matrices.len()),
                    error: None,
                })
            })
            .collect();
        Ok(SlicedPass {
            model,
            matrices,
            points,
            slices,
        })
    }

    /// Runs the pass (every slice at once); sets `gemm_us` to the slowest slice's time in each
    /// layer's GEMM (the slice with the most time in its GEMMs: its layers' times add up to no
    /// more than the pass's).
    pub(super) fn run(&mut self, gemm_us: &mut Vec<f64>) -> Result<(), StageError> {
        let n = self.slices.len();
        kernels::run_host_parts(&*self, n, n);
        let mut slowest: Option<(f64, usize)> = None;
        let mut error = None;
        for (i, s) in self.slices.iter_mut().enumerate() {
            let s = s.get_mut().unwrap_or_else(|e| e.into_inner());
            // Every slice's error is taken (the first returned), none left for the next run.
            if let Some(e) = s.error.take() {
                error.get_or_insert(e);
                continue;
            }
            let total: f64 = s.gemm_us.iter().sum();
            if slowest.is_none_or(|(t, _)| total > t) {
                slowest = Some((total, i));
            }
        }
        if let Some(e) = error {
            return Err(e);
        }
        if let Some((_, i)) = slowest {
            let s = self.slices[i].get_mut().unwrap_or_else(|e| e.into_inner());
            gemm_us.clear();
            gemm_us.extend_from_slice(&s.gemm_us);
        }
        Ok(())
    }

    /// The last pass's output, `classes × b` (the slices' columns side by side).
    #[cfg(test)]
    pub(super) fn output(&mut self) -> Vec<f32> {
        let parts: Vec<(usize, Vec<f32>)> = self
            .slices
            .iter_mut()
            .map(|s| {
                let s = s.get_mut().unwrap();
                (s.samples, s.out.clone())
            })
            .collect();
        let b: usize = parts.iter().map(|p| p.0).sum();
        let rows = parts[0].1.len() / parts[0].0;
        let mut out = Vec::with_capacity(rows * b);
        for r in 0..rows {
            for (samples, o) in &parts {
                out.extend_from_slice(&o[r * samples..(r + 1) * samples]);
            }
        }
        out
    }
}

impl kernels::HostParts for SlicedPass<'_> {
    fn part(&self, i: usize) {
        let mut guard = self.slices[i].lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        let last = std::mem::take(&mut s.out);
        s.buffers.give(last);
        s.gemm_us.clear();
        let points = (self.matrices, &self.points[..]);
        match run_cpu(
            self.model,
            points,
            &s.x,
            s.samples,
            &mut s.buffers,
            &mut s.gemm_us,
        ) {
            Ok(out) => s.out = out,
            Err(e) => s.error = Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;
    use super::super::passes::{paired_passes, PairedPasses};
    use super::super::points::points_at;
    use super::*;
    use kernels::Pattern;

    /// The model's layers, the even ones 2:4 where they can be, the others dense.
    fn mixed(w: &Weights) -> Vec<SparseMatrix> {
        (0..w.layers.len())
            .map(|i| {
                let p = if i % 2 == 0 && w.layers[i].cols().is_multiple_of(4) {
                    Pattern::Nm { n: 2, m: 4 }
                } else {
                    Pattern::Dense
                };
                fixtures::pack(w, i, &p)
            })
            .collect()
    }

    /// Two threads where the machine has them (a point of more threads than cores is refused).
    fn threads() -> i64 {
        kernels::available_cores().min(2) as i64
    }

    fn with_threads(points: &[ParamPoint], threads: i64) -> Vec<ParamPoint> {
        points
            .iter()
            .map(|p| {
                let mut q = p.clone();
                q.0.insert("threads".into(), threads);
                q
            })
            .collect()
    }

    /// Cut into 2 or 3 slices of unequal sizes, a pass gives the whole pass's logits (to f32
    /// rounding: a product of fewer columns may take another path for its last ones, whose
    /// sums round differently), the same bits round after round in its recycled buffers: an
    /// MLP, a CNN with pooling and a ViT.
    #[test]
    fn a_pass_cut_into_slices_gives_the_whole_pass_logits() {
        let specs = [
            (
                crate::ModelSpec::Mlp {
                    hidden: vec![32, 16],
                },
                None,
            ),
            (
                crate::ModelSpec::Cnn {
                    channels: vec![4],
                    hidden: vec![16],
                },
                Some((1, 8, 8)),
            ),
            (
                crate::ModelSpec::Transformer {
                    layers: 1,
                    d_model: 16,
                    heads: 2,
                    d_ff: 32,
                    patch: 2,
                },
                Some((1, 8, 8)),
            ),
        ];
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (spec, image) in specs {
            let w = Weights::init(&spec, 64, image, 5, 3).unwrap();
            let packed = mixed(&w);
            let refs: Vec<&SparseMatrix> = packed.iter().collect();
            let samples = 7;
            // The points of the smallest slice (2 samples), valid at every larger batch.
            let runs = fixtures::runs(&w, &packed);
            let (points, _) = points_at(&runs, &w.layer_tokens(), 2, false);
            let points = with_threads(&points, threads());
            let x = kernels::random_values(64 * samples, 2);
            let whole = run_cpu(
                &w,
                (&refs, &points),
                &x,
                samples,
                &mut Buffers::default(),
                &mut vec![],
            )
            .unwrap();
            let scale = whole.iter().fold(0f32, |m, v| m.max(v.abs()));
            for cut in [2, 3] {
                assert!(fits(&w, (&refs, &points), samples, cut), "{spec:?}");
                let mut sliced = SlicedPass::new(&w, (&refs, &points), &x, samples, cut).unwrap();
                let mut first: Option<Vec<f32>> = None;
                let mut allocated: Option<Vec<usize>> = None;
                for round in 0..3 {
                    let mut t = vec![];
                    sliced.run(&mut t).unwrap();
                    assert_eq!(t.len(), packed.len(), "{spec:?}");
                    assert!(t.iter().all(|&us| us > 0.0), "{spec:?}: {t:?}");
                    let out = sliced.output();
                    assert_eq!(out.len(), whole.len(), "{spec:?}");
                    let err = out
                        .iter()
                        .zip(&whole)
                        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                    let at = format!("{spec:?}, {cut} slices, round {round}");
                    assert!(err <= 1e-5 * scale, "{at}: {err} of {scale}");
                    let first = first.get_or_insert_with(|| out.clone());
                    assert_eq!(bits(&out), bits(first), "{at}");
                    // From the second round on every buffer a slice takes is one it gave back.
                    let fresh: Vec<usize> = sliced
                        .slices
                        .iter_mut()
                        .map(|s| s.get_mut().unwrap().buffers.fresh())
                        .collect();
                    let kept = allocated.get_or_insert_with(|| fresh.clone());
                    assert_eq!(&fresh, kept, "{at}: a slice allocated anew");
                }
            }
        }
    }

    /// A slice's failure (here a point its kernels refuse) fails the pass, every time, and the
    /// per-layer times are the slowest slice's.
    #[test]
    fn a_failing_slice_fails_the_pass_and_times_are_the_slowest_slices() {
        let spec = crate::ModelSpec::Mlp { hidden: vec![32] };
        let w = Weights::init(&spec, 16, None, 4, 3).unwrap();
        let packed = mixed(&w);
        let refs: Vec<&SparseMatrix> = packed.iter().collect();
        let (points, _) = points_at(&fixtures::runs(&w, &packed), &w.layer_tokens(), 4, false);
        let x = kernels::random_values(16 * 9, 4);
        let mut sliced = SlicedPass::new(&w, (&refs, &points), &x, 9, 2).unwrap();
        let mut t = vec![];
        sliced.run(&mut t).unwrap();
        let totals: Vec<f64> = sliced
            .slices
            .iter_mut()
            .map(|s| s.get_mut().unwrap().gemm_us.iter().sum())
            .collect();
        let longest = totals.iter().copied().fold(0.0, f64::max);
        assert_eq!(t.iter().sum::<f64>(), longest);
        sliced.points[0].0.insert("tile_n".into(), 7);
        for _ in 0..2 {
            assert!(sliced.run(&mut t).is_err());
        }
    }

    #[test]
    fn a_batch_is_cut_once_per_thread_the_points_use_and_into_no_empty_slice() {
        let p = |threads: i64| {
            let mut q = ParamPoint::default();
            q.0.insert("threads".into(), threads);
            q
        };
        let (one, two, three) = ([p(1), p(1)], [p(1), p(2)], [p(3)]);
        assert_eq!(slice_count(&[&one, &one], 256), 1);
        assert_eq!(slice_count(&[&one, &two], 256), 2);
        assert_eq!(slice_count(&[&three, &one], 256), 3);
        assert_eq!(slice_count(&[&three], 2), 2);
        assert_eq!(slice_count(&[&three], 1), 1);
        assert_eq!(slice_count(&[&[ParamPoint::default()]], 8), 1);
        assert_eq!(slice_sizes(7, 2), vec![4, 3]);
        assert_eq!(slice_sizes(8, 3), vec![3, 3, 2]);
    }

    /// A point whose column tile is wider than a slice's columns allow rules the cut out: the
    /// passes then run whole, and nothing fails.
    #[test]
    fn a_point_too_wide_for_a_slice_keeps_the_pass_whole() {
        let lanes = kernels::isa().lanes();
        let (w, dense, sparse) = fixtures::small_mlp();
        // 12 × lanes columns: the widest tile fits the batch, not half of it.
        let b = 12 * lanes;
        let tokens = w.layer_tokens();
        let (dense_points, _) = points_at(&fixtures::runs(&w, &dense), &tokens, b, true);
        let (points, _) = points_at(&fixtures::runs(&w, &sparse), &tokens, b, false);
        let mut points = with_threads(&points, threads());
        // One row at a time: the widest tile within every ISA's accumulator budget.
        points[0].0.insert("rows".into(), 1);
        points[0].0.insert("tile_n".into(), (12 * lanes) as i64);
        let sig = sparse[0].signature();
        assert!(kernels::cpu_space(&sig, b).contains(&points[0]).is_ok());
        let refs: Vec<&SparseMatrix> = sparse.iter().collect();
        let dense_refs: Vec<&SparseMatrix> = dense.iter().collect();
        assert!(!fits(&w, (&refs, &points), b, 2));
        let x = kernels::random_values(16 * b, 5);
        assert!(SlicedPass::new(&w, (&refs, &points), &x, b, 2).is_err());
        let PairedPasses { slices, e2e, .. } = paired_passes(
            &w,
            (&refs, &points),
            (&dense_refs, &with_threads(&dense_points, threads())),
            &x,
            b,
            0.0,
        )
        .unwrap();
        assert_eq!((slices, e2e.len()), (1, 5));
        // One lane wide, the cut fits.
        points[0].0.insert("tile_n".into(), lanes as i64);
        assert!(fits(&w, (&refs, &points), b, 2));
    }
}
