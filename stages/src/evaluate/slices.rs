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
//! Where a slice's activations outgrow the L2 cache ([`chunk_for`]), each slice may also run
//! its samples through the model in chunks, one after the other, in buffers kept from chunk to
//! chunk ([`Cut`]): a chunk's activations then stay in the core's L2 from one layer to the
//! next, where a whole slice's went out to L3 between them. On the vit-digits ViT at batch 256 (Intel Xeon,
//! AVX-512, 2 MiB of L2 a core) two slices of 128 samples in chunks of 32 took the 2:8 pass
//! from 2.37–2.56 ms to 1.94–2.03 ms and its speedup from 1.37–1.47× to 1.71–1.75×; the dense
//! pass stayed within the machine's noise (`examples/model_pass`, kernels/BENCH.md,
//! forty-third session). The sparse kernels gain: their products take less time beside the
//! same traffic. Since the way is chosen by the dense pass's median, where the dense pass runs
//! about as fast either way the sparse pass's speedup may read either way's from one
//! evaluation to the next.

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

/// How a pass runs a batch of `b` samples: cut into `slices` slices of consecutive samples
/// that run at once, one per thread, each run through the whole model in consecutive chunks of
/// `chunk` samples (the last one the rest), one after the other. One slice of one chunk is the
/// pass run whole, each product shared by the threads the points use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    /// Slices run at once, one per thread.
    pub slices: usize,
    /// The most samples a slice runs through the model at a time.
    pub chunk: usize,
}

impl Cut {
    /// The pass of `b` samples run whole.
    pub(super) fn whole(b: usize) -> Cut {
        Cut {
            slices: 1,
            chunk: b.max(1),
        }
    }

    /// The pass of `b` samples cut into `slices`, each run at once.
    pub(super) fn sliced(b: usize, slices: usize) -> Cut {
        Cut {
            slices,
            chunk: b.max(1),
        }
    }

    /// Whether a pass of `b` samples runs whole (one slice of one chunk).
    pub(super) fn is_whole(self, b: usize) -> bool {
        matches!(&self.chunks(b)[..], [one] if one.len() <= 1)
    }

    /// The most samples of a batch of `b` that go through the model at a time.
    pub(super) fn samples_at_once(self, b: usize) -> usize {
        self.chunks(b).iter().flatten().copied().max().unwrap_or(0)
    }

    /// The samples of each chunk of each slice of a batch of `b`: per slice, chunks of
    /// `chunk` samples (at least one) and the rest, so that every chunk but a slice's last
    /// keeps the size [`chunk_for`] chose (a multiple of the vector lanes).
    fn chunks(self, b: usize) -> Vec<Vec<usize>> {
        let chunk = self.chunk.max(1);
        slice_sizes(b, self.slices.clamp(1, b.max(1)))
            .into_iter()
            .map(|s| {
                let mut sizes = vec![chunk; s / chunk];
                if s % chunk > 0 || s == 0 {
                    sizes.push(s % chunk);
                }
                sizes
            })
            .collect()
    }
}

/// The samples a slice of `samples` runs through `model` at a time so that the activations of
/// a chunk stay in this core's L2 cache ([`chunk_at`] with this machine's L2 and vector lanes),
/// or `None` where that is the whole slice.
pub(super) fn chunk_for(model: &Weights, samples: usize) -> Option<usize> {
    let widest = model
        .layers
        .iter()
        .zip(model.layer_tokens())
        .map(|(l, t)| l.rows().max(l.cols()) * t * std::mem::size_of::<f32>())
        .max()?;
    let at = (kernels::l2_cache_bytes(), kernels::isa().lanes());
    chunk_at(widest, samples, at)
}

/// The chunk of a slice of `samples` for a model whose widest activation takes `widest` bytes a
/// sample, on an L2 of `l2` bytes with `lanes` floats a vector: the samples whose widest
/// activation takes about 1/[`CHUNK_SHARE`] of the L2, rounded down to a multiple of the lanes
/// (the attention's blocks of samples), at least one vector of them; `None` where that is the
/// whole slice.
fn chunk_at(widest: usize, samples: usize, (l2, lanes): (usize, usize)) -> Option<usize> {
    let lanes = lanes.max(1);
    let fit = (l2 as f64 / (CHUNK_SHARE * widest.max(1) as f64)) as usize;
    let chunk = (fit / lanes * lanes).max(lanes);
    (chunk < samples).then_some(chunk)
}

/// [`chunk_for`]'s share of the L2 per widest activation.
const CHUNK_SHARE: f64 = 6.0;

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

    /// A cut's slices are as equal as can be; each slice runs chunks of the chunk size and the
    /// rest, none empty but a slice of no samples.
    #[test]
    fn a_cut_deals_the_samples_into_slices_and_chunks_in_order() {
        let cut = |slices, chunk| Cut { slices, chunk };
        assert_eq!(cut(2, 32).chunks(256), vec![vec![32; 4], vec![32; 4]]);
        assert_eq!(cut(2, 48).chunks(256), vec![vec![48, 48, 32]; 2]);
        assert_eq!(cut(2, 32).chunks(100), vec![vec![32, 18]; 2]);
        assert_eq!(cut(2, 3).chunks(7), vec![vec![3, 1], vec![3]]);
        assert_eq!(cut(1, 3).chunks(7), vec![vec![3, 3, 1]]);
        assert_eq!(Cut::sliced(7, 3).chunks(7), vec![vec![3], vec![2], vec![2]]);
        assert_eq!(Cut::whole(7).chunks(7), vec![vec![7]]);
        assert_eq!(cut(2, 48).samples_at_once(256), 48);
        assert_eq!(Cut::sliced(256, 2).samples_at_once(256), 128);
        // A chunk of no samples is taken as one; more slices than samples as one each.
        assert_eq!(cut(1, 0).chunks(3), vec![vec![1, 1, 1]]);
        assert_eq!(cut(4, 100).chunks(2), vec![vec![1], vec![1]]);
        assert_eq!(cut(2, 4).chunks(0), vec![vec![0]]);
        // Whole: one slice of one chunk, however the cut reads.
        assert!(Cut::whole(9).is_whole(9) && cut(2, 5).is_whole(1) && cut(2, 4).is_whole(0));
        assert!(!cut(1, 4).is_whole(9) && !Cut::sliced(9, 2).is_whole(9));
    }

    /// The chunk is a multiple of the lanes near a sixth of the L2 over the widest activation
    /// of a sample, at least one vector, and none where the slice is no larger.
    #[test]
    fn a_chunk_takes_a_share_of_the_l2_in_whole_vectors() {
        let mib = 1 << 20;
        // vit-digits: the up-projection's 128 rows × 17 tokens, 8,704 bytes a sample.
        assert_eq!(chunk_at(128 * 17 * 4, 128, (2 * mib, 16)), Some(32));
        assert_eq!(chunk_at(128 * 17 * 4, 128, (2 * mib, 8)), Some(40));
        assert_eq!(chunk_at(128 * 17 * 4, 128, (mib, 16)), Some(16));
        assert_eq!(chunk_at(128 * 17 * 4, 32, (2 * mib, 16)), None);
        // DeiT-tiny widths (768 × 17): less than a vector fits; one vector it is.
        assert_eq!(chunk_at(768 * 17 * 4, 128, (2 * mib, 16)), Some(16));
        // The quickstart's MLP (256 rows, one token): a slice of 128 fits whole.
        assert_eq!(chunk_at(256 * 4, 128, (2 * mib, 16)), None);
        // On a 512 KiB L2 (AVX2) it does not: 80 samples a chunk.
        assert_eq!(chunk_at(256 * 4, 128, (mib / 2, 8)), Some(80));
        let (small, _, _) = fixtures::small_mlp();
        assert_eq!(chunk_for(&small, 8), None);
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
