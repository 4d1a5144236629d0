//! A pass cut by samples: the batch in slices of consecutive samples, each run through the
//! whole model on one thread, all at once, each in one piece or in chunks of samples one after
//! the other ([`Cut`]). The other way to use the threads is the pass of [`run_cpu`], whose
//! every product is shared by them; [`super::passes::paired_passes`] times every way and keeps
//! the one whose dense pass was fastest.
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
//! point whose parameters do not fit a chunk's columns rules the way out: a layer of one token
//! a sample, such as a ViT's head, has as many columns as the chunk has samples, and a point
//! tuned with wider column tiles rules out the chunks). The slices' inputs are cut from the
//! batch before the timing: a deployment hands each thread its own samples.
//!
//! Where a slice's activations outgrow the L2 cache, each slice may also run its samples
//! through the model in chunks, one after the other (`super::cut`), in buffers kept from chunk
//! to chunk.

use std::sync::Mutex;

use super::cut::Cut;
use super::passes::{run_cpu, Buffers};
use crate::model::Weights;
use crate::StageError;
use kernels::{ParamPoint, SparseMatrix};

/// `points` on one thread, if every one of them is a point of its layer's space at every
/// chunk's columns.
fn one_thread(
    model: &Weights,
    matrices: &[&SparseMatrix],
    points: &[ParamPoint],
    b: usize,
    cut: Cut,
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
    let fits = cut.chunks(b).iter().flatten().all(|&s| {
        matrices.iter().zip(&one).zip(&tokens).all(|((m, p), &t)| {
            kernels::cpu_space(&m.signature(), s * t)
                .contains(p)
                .is_ok()
        })
    });
    fits.then_some(one)
}

/// Whether a pass of `b` samples through `matrices` at `points` can be cut as `cut` says.
pub(super) fn fits(
    model: &Weights,
    (matrices, points): (&[&SparseMatrix], &[ParamPoint]),
    b: usize,
    cut: Cut,
) -> bool {
    !cut.is_whole(b) && one_thread(model, matrices, points, b, cut).is_some()
}

/// One slice's state, kept from round to round: its chunks' inputs and last outputs, the
/// buffers its chunks share (a set per chunk size), and what its last pass timed or failed
/// with.
struct Slice {
    /// Per chunk, its samples, its input (features × samples) and its last output.
    chunks: Vec<Chunk>,
    /// The buffers of the chunks of each size (a slice's chunks have at most two): a pass asks
    /// for buffers by length, and one set per size keeps both sets, however many each holds.
    pools: Vec<(usize, Buffers)>,
    /// Per layer, its GEMMs' time over the chunks.
    gemm_us: Vec<f64>,
    error: Option<StageError>,
}

/// One chunk of a [`Slice`].
struct Chunk {
    samples: usize,
    x: Vec<f32>,
    out: Vec<f32>,
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
    /// The pass of `x` (`features × b`) through `matrices` at `points` cut as `cut` says, or
    /// an error if some point does not fit a chunk ([`fits`] says beforehand).
    pub(super) fn new(
        model: &'a Weights,
        (matrices, points): (&'a [&'a SparseMatrix], &[ParamPoint]),
        x: &[f32],
        b: usize,
        cut: Cut,
    ) -> Result<Self, StageError> {
        let points = one_thread(model, matrices, points, b, cut).ok_or_else(|| {
            StageError::InvalidConfig(format!(
                "a point does not fit a chunk of a batch of {b} samples cut as {cut:?}"
            ))
        })?;
        let features = x.len() / b.max(1);
        let mut first = 0;
        let mut chunk = |samples: usize| {
            let mut xs = Vec::with_capacity(features * samples);
            for row in x.chunks_exact(b.max(1)) {
                xs.extend_from_slice(&row[first..first + samples]);
            }
            first += samples;
            Chunk {
                samples,
                x: xs,
                out: vec![],
            }
        };
        let slices = cut
            .chunks(b)
            .into_iter()
            .map(|sizes| {
                let mut pools: Vec<(usize, Buffers)> = vec![];
                for &s in &sizes {
                    if !pools.iter().any(|p| p.0 == s) {
                        pools.push((s, Buffers::default()));
                    }
                }
                Mutex::new(Slice {
                    chunks: sizes.into_iter().map(&mut chunk).collect(),
                    pools,
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

    /// The last pass's output, `classes × b` (the chunks' columns side by side).
    #[cfg(test)]
    pub(super) fn output(&mut self) -> Vec<f32> {
        let parts: Vec<(usize, Vec<f32>)> = self
            .slices
            .iter_mut()
            .flat_map(|s| {
                let s = s.get_mut().unwrap();
                s.chunks
                    .iter()
                    .map(|c| (c.samples, c.out.clone()))
                    .collect::<Vec<_>>()
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
        // `run_cpu` adds each layer's time to it: summed over the chunks.
        s.gemm_us.clear();
        let points = (self.matrices, &self.points[..]);
        for c in &mut s.chunks {
            let Some((_, buffers)) = s.pools.iter_mut().find(|p| p.0 == c.samples) else {
                let e = format!("no buffers for a chunk of {} samples", c.samples);
                s.error = Some(StageError::InvalidConfig(e));
                return;
            };
            // The chunk's last output goes back first: the next products write into it.
            buffers.give(std::mem::take(&mut c.out));
            match run_cpu(self.model, points, &c.x, c.samples, buffers, &mut s.gemm_us) {
                Ok(out) => c.out = out,
                Err(e) => {
                    s.error = Some(e);
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::cut::chunk_for;
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
            // The points of the smallest chunk (1 sample), valid at every larger batch.
            let runs = fixtures::runs(&w, &packed);
            let (points, _) = points_at(&runs, &w.layer_tokens(), 1, false);
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
            let cuts = [
                Cut::sliced(samples, 2),
                Cut::sliced(samples, 3),
                // Slices of 4 and 3 samples, in chunks of 3, 1 and of 3.
                Cut {
                    slices: 2,
                    chunk: 3,
                },
                // One slice in chunks of 3, 3 and 1.
                Cut {
                    slices: 1,
                    chunk: 3,
                },
            ];
            for cut in cuts {
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
                    let at = format!("{spec:?}, {cut:?}, round {round}");
                    assert!(err <= 1e-5 * scale, "{at}: {err} of {scale}");
                    let first = first.get_or_insert_with(|| out.clone());
                    assert_eq!(bits(&out), bits(first), "{at}");
                    // From the second round on every buffer a slice takes is one it gave back.
                    let fresh: Vec<usize> = sliced
                        .slices
                        .iter_mut()
                        .map(|s| {
                            let s = s.get_mut().unwrap();
                            s.pools.iter().map(|p| p.1.fresh()).sum::<usize>()
                        })
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
        let (points, _) = points_at(&fixtures::runs(&w, &packed), &w.layer_tokens(), 1, false);
        let x = kernels::random_values(16 * 9, 4);
        // Whole slices, and slices of 5 and 4 samples in chunks of 2, 2, 1 and 2, 2.
        let chunked = Cut {
            slices: 2,
            chunk: 2,
        };
        for cut in [Cut::sliced(9, 2), chunked] {
            let mut sliced = SlicedPass::new(&w, (&refs, &points), &x, 9, cut).unwrap();
            let mut t = vec![];
            sliced.run(&mut t).unwrap();
            let totals: Vec<f64> = sliced
                .slices
                .iter_mut()
                .map(|s| s.get_mut().unwrap().gemm_us.iter().sum())
                .collect();
            let longest = totals.iter().copied().fold(0.0, f64::max);
            assert_eq!(t.iter().sum::<f64>(), longest, "{cut:?}");
            assert_eq!(
                t.len(),
                packed.len(),
                "{cut:?}: a time per layer, summed over chunks"
            );
            sliced.points[0].0.insert("tile_n".into(), 7);
            for _ in 0..2 {
                assert!(sliced.run(&mut t).is_err(), "{cut:?}");
            }
        }
    }

    /// Where a slice's activations outgrow the L2 (a 512-wide layer over slices of 32,768
    /// samples, on any L2 under 400 MB), the ways include the slices run in chunks.
    #[test]
    fn the_ways_include_slices_in_chunks_where_a_slice_outgrows_the_l2() {
        let spec = crate::ModelSpec::Mlp { hidden: vec![512] };
        let wide = Weights::init(&spec, 16, None, 4, 3).unwrap();
        let dense: Vec<SparseMatrix> = (0..2)
            .map(|i| fixtures::pack(&wide, i, &Pattern::Dense))
            .collect();
        let refs: Vec<&SparseMatrix> = dense.iter().collect();
        let b: usize = 1 << 16;
        let slices = threads() as usize;
        let chunk = chunk_for(&wide, b.div_ceil(slices)).expect("an L2 under 400 MB");
        let tokens = wide.layer_tokens();
        let (points, _) = points_at(&fixtures::runs(&wide, &dense), &tokens, b, true);
        let points = with_threads(&points, threads());
        let ways = super::super::ways::pass_ways(&wide, (&refs, &points), (&refs, &points), b);
        let cuts: Vec<Cut> = ways.ways.iter().map(|w| w.2).collect();
        assert!(cuts.contains(&Cut { slices, chunk }), "{cuts:?}");
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
        assert!(!fits(&w, (&refs, &points), b, Cut::sliced(b, 2)));
        let x = kernels::random_values(16 * b, 5);
        assert!(SlicedPass::new(&w, (&refs, &points), &x, b, Cut::sliced(b, 2)).is_err());
        let PairedPasses { cut, e2e, .. } = paired_passes(
            &w,
            (&refs, &points),
            (&dense_refs, &with_threads(&dense_points, threads())),
            &x,
            b,
            0.0,
        )
        .unwrap();
        assert_eq!((cut, e2e.len()), (Cut::whole(b), 5));
        // One lane wide, the cut fits.
        points[0].0.insert("tile_n".into(), lanes as i64);
        assert!(fits(&w, (&refs, &points), b, Cut::sliced(b, 2)));
    }
}
