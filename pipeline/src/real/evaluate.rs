//! The evaluate stage: runs a pruned model end to end through its layers' tuned kernels.

use super::kernel_tune::{device, isa, ready};
use super::train::WEIGHTS;
use super::{masks, rows, Datasets};
use crate::kinds::{evaluate, EvalTrial, Evaluate, KernelTune, Prune};
use crate::plan::{PlanError, Planner};
use crate::stage::{Done, Outcome, RunCtx, Stage, StageError};
use results::Value;
use stages::evaluate::{LayerRun, LayerTuning};
use stages::kernel_tune::{self as tune, Backend};
use std::sync::Arc;

/// Seconds spent measuring each batch size in an evaluation.
const SECONDS_PER_BATCH: f64 = 0.25;

/// The evaluate stage.
pub struct EvaluateStage(pub(super) Arc<Datasets>);

/// The tunings among `tunings` of a layer's packed format.
fn layer_tunings(
    want: &kernels::FormatSignature,
    tunings: &[Done<KernelTune>],
) -> Result<Vec<LayerTuning>, StageError> {
    let mut out = vec![];
    for done in tunings {
        let t = done.trial();
        let sig =
            kernels::FormatSignature::for_pattern(&t.pattern, t.rows as usize, t.cols as usize)?;
        let same = (sig.kind, sig.rows, sig.cols, sig.v, sig.m, sig.n)
            == (want.kind, want.rows, want.cols, want.v, want.m, want.n);
        if !same {
            continue;
        }
        let params = |column: &str| match done.metrics.get(column) {
            Some(Value::Str(s)) => Ok(tune::parse_params(s)?),
            _ => Err(StageError::Artifact {
                path: done.dir.join("meta.json"),
                what: format!("the tuning's metrics have no `{column}`"),
            }),
        };
        out.push(LayerTuning {
            batch_tokens: t.batch_tokens as usize,
            params: params("best_params")?,
            dense_params: params("dense_params")?,
        });
    }
    Ok(out)
}

impl Stage for EvaluateStage {
    type Kind = Evaluate;
    const MEASURES: bool = true;

    fn version(&self) -> u32 {
        // 3: every model end to end (CNNs, transformers), non-GEMM time, per-layer dense
        // timings, the fastest way to run the dense-format layers. 4: the model and its dense
        // baseline timed in alternation, speedups as medians of pairs with their intervals.
        // 5: the host part of the pass compiled for the kernels' ISA (kernels::with_isa).
        // 6: each layer's bias and ReLU fused into its product (kernels::Epilogue).
        // 7: each pass writes its products into the buffers of its previous round.
        // 8: rows carry layers_speedup_b{B} and speedup_of_layers_b{B}.
        // 9: a transformer's LayerNorm, attention heads and GELU on the layers' threads.
        // 10: layers_speedup_b{B} is the harmonic mean of the layers' speedups (was arithmetic).
        // 11: a transformer's GELU fused into its up-projection's epilogue (kernels' GELU).
        // 12: every buffer of a pass comes back to it (none resized and zeroed per pass), and
        // the dense baseline's epilogue runs over rows after a column-band product.
        // 13: both passes also timed cut into slices of samples, one per thread
        // (pass_slices_b{B}), the faster way kept.
        // 14: a transformer's attention heads and LayerNorm run on the kernels' explicit
        // vectors (kernels::attention_head, kernels::layer_norm_columns).
        // 15: where a slice's activations outgrow the L2 cache, the slices are also timed run
        // through the model in chunks of samples (pass_chunk_b{B}); the attention's output
        // product writes straight into the output.
        15
    }

    fn plan(&self, p: &mut Planner) -> Result<(), PlanError> {
        evaluate::plan(p, device)
    }

    fn run(
        &self,
        ctx: &RunCtx,
        e: &EvalTrial,
        (pruned, tunings): (Done<Prune>, Vec<Done<KernelTune>>),
    ) -> Result<Outcome, StageError> {
        ready(e.backend, &e.device)?;
        let data = pruned.upstream().parent()?.parent()?;
        let ds = self.0.load(data.trial())?;
        let weights = stages::Weights::load(&pruned.artifact(WEIGHTS))?;
        let masks_path = pruned.artifact(masks::MASKS);
        let masks = masks::load(&masks_path)?;
        if masks.len() != weights.layers.len() {
            return Err(StageError::Artifact {
                path: masks_path,
                what: format!(
                    "{} masks for {} layers of the pruned weights",
                    masks.len(),
                    weights.layers.len()
                ),
            });
        }
        let spec = &pruned.trial().spec;
        let mut layers = vec![];
        let mlp = weights.arch == stages::model::Arch::Chain
            && weights
                .layers
                .iter()
                .all(|l| l.kind == stages::LayerKind::Linear);
        if e.backend == Backend::Cuda && !mlp {
            return Err(StageError::Failed(
                "the CUDA evaluate path runs MLPs only (no device kernels for im2col, attention or norms yet); evaluate this model on the cpu backend".into(),
            ));
        }
        for (l, m) in weights.layers.iter().zip(masks) {
            let (lp, mask) = match m {
                Some(mask) => (spec.pattern_of(&l.name).clone(), mask),
                None => (
                    kernels::Pattern::Dense,
                    kernels::Mask::full(l.rows(), l.cols()),
                ),
            };
            let matrix = kernels::SparseMatrix::from_masked(&lp, &l.weight, &mask)?;
            let want = matrix.signature();
            let tunings = layer_tunings(&want, &tunings)?;
            if tunings.is_empty() {
                return Err(StageError::NoTuning {
                    layer: l.name.clone(),
                    format: format!("{want:?}"),
                });
            }
            layers.push(LayerRun {
                name: l.name.clone(),
                matrix,
                bias: l.bias.clone(),
                tunings,
            });
        }
        if e.dense_where_faster && e.backend == Backend::Cuda {
            return Err(StageError::Failed(
                "dense_where_faster runs on the cpu backend only (the CUDA evaluation has no dense forward pass yet)".into(),
            ));
        }
        let batch_sizes: Vec<usize> = e.batch_sizes.iter().map(|&b| b as usize).collect();
        let ev = {
            let _timing = ctx.measuring()?;
            match e.backend {
                Backend::Cpu => stages::evaluate::evaluate(
                    &ds,
                    &weights,
                    &layers,
                    &batch_sizes,
                    SECONDS_PER_BATCH,
                    e.dense_where_faster,
                )?,
                Backend::Cuda => {
                    let dev =
                        tune::cuda::shared_device().map_err(|err| StageError::Unavailable {
                            backend: e.backend,
                            why: err.to_string(),
                        })?;
                    stages::evaluate::cuda::evaluate_cuda(&ds, &layers, &batch_sizes, dev)?
                }
            }
        };
        let path = ctx.out_dir.join("evaluation.txt");
        std::fs::write(&path, format!("{ev:?}\n")).map_err(StageError::io(&path))?;
        let mut metrics = rows::evaluate(&ev, &isa(e.backend)?);
        if e.backend == Backend::Cuda {
            rows::cuda_evaluate_notes(&mut metrics);
        }
        Ok(Outcome {
            metrics,
            rows: vec![],
        })
    }
}
