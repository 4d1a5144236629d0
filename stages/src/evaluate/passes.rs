//! How a model's passes are timed: the sparse model and its dense baseline, every way of
//! running their dense-format layers, in the same rounds (see [`paired_passes`]).

use std::time::Instant;

use super::cut::Cut;
use super::slices::SlicedPass;
use super::ways::{pass_ways, Ways};
use super::{graph, paired};
use crate::kernel_tune::summarise;
use crate::model::Weights;
use crate::StageError;
use kernels::{Activation, ParamPoint, SparseMatrix};

/// The sparse pass and the dense pass of one batch, timed together.
pub(super) struct PairedPasses {
    /// How both passes ran their dense-format layers (see [`dense_variants`]).
    pub way: &'static str,
    /// How both passes were cut into slices of samples and chunks of them (one of each: each
    /// product shared by the threads; see [`super::slices`]).
    pub cut: Cut,
    /// The points the sparse pass ran, as tuned for the batch (a pass cut into slices ran them
    /// on one thread per slice).
    pub points: Vec<ParamPoint>,
    /// The points the dense pass ran.
    pub dense_points: Vec<ParamPoint>,
    /// The sparse pass's end-to-end samples, µs (round `i` the `i`-th).
    pub e2e: Vec<f64>,
    /// The dense pass's, paired with them.
    pub dense_e2e: Vec<f64>,
    /// Each sparse sample's time outside the GEMMs, µs.
    pub outside: Vec<f64>,
    /// Per layer, its GEMM's time inside each sparse sample's pass, µs.
    pub layer_us: Vec<Vec<f64>>,
    /// Per layer, its GEMM's time inside each dense sample's pass, µs.
    pub dense_layer_us: Vec<Vec<f64>>,
}

/// The most rounds [`paired_passes`] times.
const MAX_ROUNDS: usize = 400;

/// Times the sparse and the dense pass of one batch in rounds, for `seconds` in all.
///
/// Every way of `dense_variants` runs the dense pass, and the sparse pass runs its dense-format
/// layers the same way, so that a dense model's two passes are the same computation (chosen
/// apart, they read 0.77-1.35× of each other) and a sparse model differs from its baseline
/// only where it is sparse. Each of those ways runs both whole, every product shared by the
/// threads, and (where the points use more than one thread) cut into slices of samples, one per
/// thread, and (where a slice's activations outgrow the L2 cache) cut into as many slices, one at a
/// thread, each run in chunks of samples ([`super::slices`]); both passes of a pair run the same
/// way ([`pass_ways`]). All of these passes run once per round ([`paired::rounds`]), so each cut
/// divides the rounds each pass gets within `seconds` (and adds to the time of the five-round
/// minimum): a way
/// chosen by a probe run on its own was 35 % slower in alternation with the sparse pass than
/// in the probe, so the way is chosen by the dense pass's median inside the same rounds, and
/// the speedup pairs that way's passes of each round.
pub(super) fn paired_passes(
    model: &Weights,
    (sparse, points): (&[&SparseMatrix], &[ParamPoint]),
    (dense, dense_points): (&[&SparseMatrix], &[ParamPoint]),
    x: &[f32],
    b: usize,
    seconds: f64,
) -> Result<PairedPasses, StageError> {
    let Ways {
        ways,
        mut sparse_ways,
        sparse_of,
    } = pass_ways(model, (sparse, points), (dense, dense_points), b);
    // Per pass way, per call, each layer's time in its GEMM.
    let mut gemm_us: Vec<Vec<Vec<f64>>> = vec![vec![]; sparse_ways.len() + ways.len()];
    let (sparse_gemm_us, dense_gemm_us) = gemm_us.split_at_mut(sparse_ways.len());
    let samples = {
        let mut passes: Vec<Box<dyn FnMut() -> Result<(), StageError> + '_>> = vec![];
        // Each pass keeps its own buffers, so that a layer writes where it wrote last round.
        let runs = sparse_ways
            .iter()
            .map(|(pts, cut)| (sparse, pts, *cut))
            .chain(ways.iter().map(|(_, pts, cut)| (dense, pts, *cut)));
        for ((matrices, pts, cut), g) in runs.zip(sparse_gemm_us.iter_mut().chain(dense_gemm_us)) {
            // Room for every round's times, so that no timed pass grows a vector.
            g.reserve(MAX_ROUNDS + 1);
            if !cut.is_whole(b) {
                let mut sliced = SlicedPass::new(model, (matrices, pts), x, b, cut)?;
                passes.push(Box::new(move || {
                    let mut t = Vec::with_capacity(matrices.len());
                    sliced.run(&mut t)?;
                    g.push(t);
                    Ok(())
                }));
                continue;
            }
            let mut buffers = Buffers::default();
            passes.push(Box::new(move || {
                let mut t = Vec::with_capacity(matrices.len());
                let out = run_cpu(model, (matrices, pts), x, b, &mut buffers, &mut t)?;
                buffers.give(out);
                g.push(t);
                Ok(())
            }));
        }
        let mut refs: Vec<&mut dyn FnMut() -> Result<(), StageError>> =
            passes.iter_mut().map(|p| &mut **p as _).collect();
        paired::rounds(&mut refs, 5, MAX_ROUNDS, seconds)?
    };
    let mut samples = samples;
    let n_sparse = sparse_ways.len();
    let medians: Vec<f64> = samples[n_sparse..]
        .iter()
        .map(|d| summarise(d.clone()).median_us)
        .collect();
    let best = (0..ways.len())
        .min_by(|&i, &j| medians[i].total_cmp(&medians[j]))
        .expect("at least the tuned way");
    let s = sparse_of[best];
    // The warm-up call comes first in the GEMM times.
    let outside: Vec<f64> = samples[s]
        .iter()
        .zip(gemm_us[s].iter().skip(1))
        .map(|(t, g)| t - g.iter().sum::<f64>())
        .collect();
    let layers_of = |calls: &[Vec<f64>]| -> Vec<Vec<f64>> {
        let layers = calls.iter().map(Vec::len).max().unwrap_or(0);
        (0..layers)
            .map(|i| {
                calls
                    .iter()
                    .skip(1)
                    .map(|c| c.get(i).copied().unwrap_or(0.0))
                    .collect()
            })
            .collect()
    };
    let layer_us = layers_of(&gemm_us[s]);
    let dense_layer_us = layers_of(&gemm_us[n_sparse + best]);
    let (way, dense_points, cut) = ways.into_iter().nth(best).expect("in range");
    Ok(PairedPasses {
        way,
        cut,
        points: sparse_ways.swap_remove(s).0,
        dense_points,
        dense_e2e: std::mem::take(&mut samples[n_sparse + best]),
        e2e: std::mem::take(&mut samples[s]),
        outside,
        layer_us,
        dense_layer_us,
    })
}

/// Layer `i`'s bias and activation, fused into its product on the threads that compute it.
pub(super) fn epilogue(model: &Weights, i: usize, activation: Activation) -> kernels::Epilogue<'_> {
    kernels::Epilogue {
        bias: Some(&model.layers[i].bias),
        activation,
    }
}

/// Output buffers kept from one pass to the next: each product writes into a buffer an earlier
/// one no longer needs instead of a fresh, zeroed allocation.
///
/// A fresh output cost more than its allocation: zeroing it on the calling thread pulled its
/// lines into that core's cache, and the other thread's rows then had to fetch them back. On
/// the quickstart's 64→256→256→10 MLP at batch 256 (Intel Xeon, AVX-512, 2 threads) the three
/// products ran in 197 µs (dense) and 115 µs (64:2:8) with fresh outputs against 155 µs and
/// 79 µs with reused ones (146 µs and 71 µs summed when each is timed alone).
#[derive(Default)]
pub(super) struct Buffers {
    free: Vec<Vec<f32>>,
    /// Buffers allocated because none of the length was kept (read by the tests).
    #[cfg(test)]
    fresh: usize,
}

impl Buffers {
    /// How many buffers were allocated because none of the length was kept.
    #[cfg(test)]
    pub(super) fn fresh(&self) -> usize {
        self.fresh
    }

    /// Buffers kept at most; more are dropped.
    const KEEP: usize = 32;

    /// A buffer of `len` floats with unspecified contents, which the kernels overwrite: the
    /// last kept one of exactly `len` floats, else a fresh one. A pass asks for the same
    /// lengths in the same order every round and gives every buffer back (its output too,
    /// [`Self::give`]), so from the second round on every product writes into a buffer a
    /// product wrote in the round before. Until 2026-12-07 a take of a length none had resized
    /// the largest kept buffer and the pass's output was dropped: in the MLP's pass the 256×256
    /// layer's output was grown every round from the 16 Ki-float input copy, 192 KiB zeroed on
    /// the calling thread per pass (kernels/BENCH.md, fortieth session).
    fn take(&mut self, len: usize) -> Vec<f32> {
        match self.free.iter().rposition(|v| v.len() == len) {
            // `remove`, not `swap_remove`: `free` stays in the order the buffers came back.
            Some(at) => self.free.remove(at),
            None => {
                #[cfg(test)]
                {
                    self.fresh += 1;
                }
                vec![0.0; len]
            }
        }
    }

    /// Keeps `v` for a later [`Self::take`] of its length (the oldest kept is dropped when
    /// [`Self::KEEP`] are).
    pub(super) fn give(&mut self, v: Vec<f32>) {
        if v.is_empty() {
            return;
        }
        if self.free.len() == Self::KEEP {
            self.free.remove(0);
        }
        self.free.push(v);
    }
}

/// The CPU kernels as a pass's [`graph::Gemm`]: each layer at its point, its bias and ReLU
/// fused, into recycled [`Buffers`], timed into `gemm_us`.
struct KernelGemm<'a> {
    model: &'a Weights,
    matrices: &'a [&'a SparseMatrix],
    points: &'a [ParamPoint],
    buffers: &'a mut Buffers,
    gemm_us: &'a mut Vec<f64>,
}

impl graph::Gemm<f32> for KernelGemm<'_> {
    fn gemm(
        &mut self,
        i: usize,
        x: &[f32],
        n: usize,
        activation: Activation,
    ) -> Result<Vec<f32>, StageError> {
        let start = Instant::now();
        let m = self.matrices[i];
        let mut out = self.buffers.take(m.rows() * n);
        let epilogue = epilogue(self.model, i, activation);
        kernels::spmm_with(m, x, n, &mut out, &self.points[i], epilogue)?;
        let us = start.elapsed().as_secs_f64() * 1e6;
        if self.gemm_us.len() <= i {
            self.gemm_us.resize(i + 1, 0.0);
        }
        self.gemm_us[i] += us;
        Ok(out)
    }

    fn recycle(&mut self, done: Vec<f32>) {
        self.buffers.give(done);
    }

    fn take(&mut self, len: usize) -> Vec<f32> {
        self.buffers.take(len)
    }

    /// The most threads any layer's point uses.
    fn host_threads(&self) -> usize {
        self.points
            .iter()
            .filter_map(|p| p.get("threads").ok())
            .max()
            .map_or(1, |t| t.max(1) as usize)
    }
}

/// One forward pass through `matrices` at `points` (the layers' GEMMs by the CPU kernels, each
/// with its bias and ReLU fused, into `buffers`' recycled outputs); adds the time layer `i`
/// spent in its GEMM to `gemm_us[i]` (grown as needed).
pub(super) fn run_cpu(
    model: &Weights,
    (matrices, points): (&[&SparseMatrix], &[ParamPoint]),
    xt: &[f32],
    b: usize,
    buffers: &mut Buffers,
    gemm_us: &mut Vec<f64>,
) -> Result<Vec<f32>, StageError> {
    let mut gemm = KernelGemm {
        model,
        matrices,
        points,
        buffers,
        gemm_us,
    };
    // The host part (activations, norms, attention) at the kernels' ISA.
    kernels::with_isa(Pass {
        model,
        xt,
        b,
        gemm: &mut gemm,
    })
}

/// [`graph::forward`] as a [`kernels::HostOp`]: inlined, with all of the graph's host code,
/// into a function compiled for the machine's ISA.
struct Pass<'a, 'g> {
    model: &'a Weights,
    xt: &'a [f32],
    b: usize,
    gemm: &'a mut (dyn graph::Gemm<f32> + 'g),
}

impl kernels::HostOp for Pass<'_, '_> {
    type Output = Result<Vec<f32>, StageError>;
    #[inline(always)]
    fn run(self) -> Self::Output {
        graph::forward(self.model, self.xt, self.b, self.gemm)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;
    use super::super::points::points_at;
    use super::super::ways::{pass_ways, Ways};
    use super::super::LayerRun;
    use super::*;
    use kernels::Pattern;

    /// The pass run at the kernels' ISA (`with_isa`) gives the baseline build's logits bit for
    /// bit: a ViT (LayerNorm, attention on the batched path, GELU) and a CNN.
    #[test]
    fn the_pass_at_the_kernels_isa_equals_the_baseline_bit_for_bit() {
        let vit = crate::ModelSpec::Transformer {
            layers: 1,
            d_model: 16,
            heads: 2,
            d_ff: 32,
            patch: 2,
        };
        let cnn = crate::ModelSpec::Cnn {
            channels: vec![4],
            hidden: vec![16],
        };
        for (spec, image) in [(vit, Some((1, 8, 8))), (cnn, Some((1, 8, 8)))] {
            let w = Weights::init(&spec, 64, image, 5, 3).unwrap();
            let samples = 11;
            let xt = kernels::random_values(64 * samples, 2);
            let gemm = |i: usize, x: &[f32], n: usize, act| -> Result<Vec<f32>, StageError> {
                Ok(graph::naive_gemm(&w, i, x, n, act))
            };
            let plain = graph::forward(&w, &xt, samples, &mut gemm.clone()).unwrap();
            let widened = kernels::with_isa(Pass {
                model: &w,
                xt: &xt,
                b: samples,
                gemm: &mut gemm.clone(),
            })
            .unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&plain), bits(&widened), "{spec:?}");
        }
    }

    /// A pass into recycled buffers gives what a pass into fresh ones gives, bit for bit, even
    /// when every kept buffer holds NaN (the kernels overwrite their outputs): an MLP, a CNN
    /// with pooling and a ViT, with 2:4 layers among dense ones; and it keeps its buffers.
    #[test]
    fn a_pass_into_recycled_buffers_equals_a_fresh_pass_bit_for_bit() {
        let vit = crate::ModelSpec::Transformer {
            layers: 1,
            d_model: 16,
            heads: 2,
            d_ff: 32,
            patch: 2,
        };
        let cnn = crate::ModelSpec::Cnn {
            channels: vec![4],
            hidden: vec![16],
        };
        let mlp = crate::ModelSpec::Mlp {
            hidden: vec![32, 16],
        };
        for (spec, image) in [(mlp, None), (cnn, Some((1, 8, 8))), (vit, Some((1, 8, 8)))] {
            let w = Weights::init(&spec, 64, image, 5, 3).unwrap();
            let runs: Vec<LayerRun> = w
                .layers
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    let p = if i % 2 == 0 && l.cols() % 4 == 0 {
                        Pattern::Nm { n: 2, m: 4 }
                    } else {
                        Pattern::Dense
                    };
                    let mask = match p {
                        Pattern::Dense => kernels::Mask::full(l.rows(), l.cols()),
                        _ => kernels::build_mask(&p, &l.weight, l.rows(), l.cols()).unwrap(),
                    };
                    LayerRun {
                        name: l.name.clone(),
                        matrix: SparseMatrix::from_masked(&p, &l.weight, &mask).unwrap(),
                        bias: l.bias.clone(),
                        tunings: vec![],
                    }
                })
                .collect();
            let refs: Vec<&SparseMatrix> = runs.iter().map(|l| &l.matrix).collect();
            let samples = 7;
            let (points, _) = points_at(&runs, &w.layer_tokens(), samples, false);
            let x = kernels::random_values(64 * samples, 2);
            let pass = |buffers: &mut Buffers| {
                run_cpu(&w, (&refs, &points), &x, samples, buffers, &mut vec![]).unwrap()
            };
            let fresh = pass(&mut Buffers::default());
            let mut kept = Buffers::default();
            let out = pass(&mut kept);
            kept.give(out);
            assert!(!kept.free.is_empty(), "{spec:?}: no buffer kept");
            // From the second pass on, every buffer a pass takes is one it gave back: the same
            // allocations, none grown or zeroed anew.
            let held = |b: &Buffers| {
                let mut v: Vec<(usize, usize)> = b
                    .free
                    .iter()
                    .map(|v| (v.as_ptr() as usize, v.len()))
                    .collect();
                v.sort_unstable();
                v
            };
            let (before, allocated) = (held(&kept), kept.fresh);
            let out = pass(&mut kept);
            kept.give(out);
            assert_eq!(
                held(&kept),
                before,
                "{spec:?}: a pass took a buffer it did not give back"
            );
            assert_eq!(
                kept.fresh, allocated,
                "{spec:?}: a buffer of the last pass did not come back"
            );
            for v in &mut kept.free {
                v.iter_mut().for_each(|x| *x = f32::NAN);
            }
            let again = pass(&mut kept);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fresh), bits(&again), "{spec:?}");
        }
    }

    /// A model's dense-format layers run exactly as its dense baseline runs them, so that a
    /// dense model's two passes are one computation (issue 18: chosen apart, a dense model
    /// read 0.77-1.35x of itself).
    #[test]
    fn dense_format_layers_run_as_the_dense_pass_runs_them() {
        // The first layer 2:4, the 4-row head dense.
        let (w, dense, mixed) = fixtures::small_mlp();
        let runs = |ms: &[SparseMatrix]| fixtures::runs(&w, ms);
        let x = kernels::random_values(16 * 8, 5);
        let tokens = w.layer_tokens();
        let dense_refs: Vec<&SparseMatrix> = dense.iter().collect();
        let (dense_points, _) = points_at(&runs(&dense), &tokens, 8, true);
        for model in [&dense[..], &mixed[..]] {
            let refs: Vec<&SparseMatrix> = model.iter().collect();
            let (points, _) = points_at(&runs(model), &tokens, 8, false);
            let PairedPasses {
                points: sparse_pts,
                dense_points: dense_pts,
                e2e,
                dense_e2e,
                outside,
                ..
            } = paired_passes(
                &w,
                (&refs, &points),
                (&dense_refs, &dense_points),
                &x,
                8,
                0.0,
            )
            .unwrap();
            for (i, m) in model.iter().enumerate() {
                if matches!(m, SparseMatrix::Dense(_)) {
                    assert_eq!(sparse_pts[i], dense_pts[i], "layer {i}");
                } else {
                    assert_eq!(sparse_pts[i], points[i], "layer {i}");
                }
            }
            assert_eq!((e2e.len(), dense_e2e.len(), outside.len()), (5, 5, 5));
        }
    }

    /// Where the points use two threads, every way runs whole and cut in two, and each dense
    /// pass is paired with the sparse pass of the same cut, whose dense-format layers run at
    /// that way's dense points; at one thread nothing is cut.
    #[test]
    fn every_way_runs_whole_and_cut_pairing_passes_of_the_same_cut() {
        let (w, dense, mixed) = fixtures::small_mlp();
        let tokens = w.layer_tokens();
        let b = 8;
        let at_threads = |ps: Vec<ParamPoint>, t: i64| -> Vec<ParamPoint> {
            ps.into_iter()
                .map(|mut p| {
                    p.0.insert("threads".into(), t);
                    p
                })
                .collect()
        };
        let refs: Vec<&SparseMatrix> = mixed.iter().collect();
        let dense_refs: Vec<&SparseMatrix> = dense.iter().collect();
        let threads = kernels::available_cores().min(2) as i64;
        for t in [1, threads] {
            let points = at_threads(
                points_at(&fixtures::runs(&w, &mixed), &tokens, b, false).0,
                t,
            );
            let dense_points = at_threads(
                points_at(&fixtures::runs(&w, &dense), &tokens, b, true).0,
                t,
            );
            let Ways {
                ways,
                sparse_ways,
                sparse_of,
            } = pass_ways(&w, (&refs, &points), (&dense_refs, &dense_points), b);
            // The MLP's activations are far from filling an L2 cache: no chunks.
            let mut cuts = vec![Cut::whole(b)];
            if t > 1 {
                cuts.push(Cut::sliced(b, t as usize));
            }
            assert!(!ways.is_empty());
            for (name, d, _) in &ways {
                for c in &cuts {
                    let n = ways
                        .iter()
                        .filter(|(m, e, k)| m == name && e == d && k == c)
                        .count();
                    assert_eq!(n, 1, "{name}, {c:?}, at {t} threads");
                }
            }
            assert!(ways.iter().all(|w| cuts.contains(&w.2)));
            assert_eq!(sparse_of.len(), ways.len());
            for ((_, d, c), &s) in ways.iter().zip(&sparse_of) {
                let (sp, sc) = &sparse_ways[s];
                assert_eq!(sc, c);
                assert_eq!((&sp[0], &sp[1]), (&points[0], &d[1]));
            }
        }
    }
}
