//! The batch sizes an experiment tunes its layers at: its `[kernel_tune] batch_tokens`, and,
//! where it evaluates models, every `[evaluate]` batch size that none of them guides.
//!
//! An evaluation runs each layer at the point tuned at the nearest batch within 4×
//! ([`stages::evaluate::guides`]); further away it would fall back to the cost model's best
//! points, for the layer and for its dense baseline alike, so that its speedup would not be
//! against a tuned dense kernel. Measured on the quickstart (batch 1, tunings at 64 and 256
//! samples; AMD EPYC Zen 4, 2 cores; the `kernel_tune` rows at batch 1, two runs): the cost
//! model's dense points took 6.3 and 5.0 µs for the three layers where the tuned ones took 4.7
//! and 4.1 µs, so the batch-1 speedups read 1.24–1.36× too high.

use super::Experiment;

/// `batch_tokens`, then each of `batch_sizes` that no entry of `batch_tokens` guides, when the
/// experiment `evaluates` models (a layer study and a kernel-only study evaluate nothing).
pub fn tuned_batches(batch_tokens: &[u64], batch_sizes: &[u64], evaluates: bool) -> Vec<u64> {
    let mut out = batch_tokens.to_vec();
    if evaluates {
        for &b in batch_sizes {
            let guided = out
                .iter()
                .any(|&t| stages::evaluate::guides(t as usize, b as usize));
            if !guided {
                out.push(b);
            }
        }
    }
    out
}

impl Experiment {
    /// The batch sizes (samples) the experiment's layers are tuned at ([`tuned_batches`]).
    pub fn tuned_batches(&self) -> Vec<u64> {
        tuned_batches(
            &self.batch_tokens,
            &self.batch_sizes,
            self.model_part.is_some(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_evaluated_batch_no_tuning_guides_is_tuned_too() {
        // The quickstart's: batch 1 is 64x from the nearest tuning; 256 is tuned.
        assert_eq!(tuned_batches(&[64, 256], &[1, 256], true), [64, 256, 1]);
        // 4x is still a guide (16 for 64); 2 and 3 then go together (3 is within 4x of 2).
        assert_eq!(tuned_batches(&[64], &[16, 256, 2, 3], true), [64, 2]);
        assert_eq!(tuned_batches(&[16], &[1, 8], true), [16, 1]);
        // Nothing evaluated, nothing added.
        assert_eq!(tuned_batches(&[64], &[1], false), [64]);
    }
}
