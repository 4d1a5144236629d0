//! How a pass cuts its batch ([`Cut`]): into slices of samples that run at once, one per
//! thread the points use ([`slice_count`]), each run in one piece or in chunks of samples one
//! after the other ([`chunk_for`]); `super::slices` runs them.
//!
//! Where a slice's activations outgrow the L2 cache ([`chunk_for`]), each slice may also run its
//! samples through the model in chunks, one after the other, in buffers kept from chunk to chunk
//! (`super::slices`): a chunk's activations then stay in the core's L2 from one layer to the next,
//! where a whole slice's went out to L3 between them. On the vit-digits ViT at batch 256 (Intel
//! Xeon, AVX-512, 2 MiB of L2 a core) two slices of 128 samples in chunks of 32 took the 2:8 pass
//! from 2.37–2.56 ms to 1.94–2.03 ms and its speedup from 1.37–1.47× to 1.71–1.75×; the dense pass
//! stayed within the machine's noise (`examples/model_pass`, kernels/BENCH.md, forty-third
//! session). The sparse kernels gain: their products take less time beside the same traffic. Since
//! the way is chosen by the dense pass's median, where the dense pass runs about as fast either way
//! the sparse pass's speedup may read either way's from one evaluation to the next.

use kernels::ParamPoint;

use crate::model::Weights;

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
    pub(super) fn chunks(self, b: usize) -> Vec<Vec<usize>> {
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

#[cfg(test)]
mod tests {
    use super::super::fixtures;
    use super::*;

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
}
