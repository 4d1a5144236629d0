//! The one-shot methods on a network — SparseGPT and Wanda — layer by layer in order, for every
//! pattern, and the relative output error every method's pruning leaves on each layer.
//!
//! A method's saliency (SparseGPT `w²/[H⁻¹]ᵢᵢ²`, Wanda `|w|·‖x‖`) chooses the mask through the
//! kernels' mask builders, so each pattern keeps its invariants. V:N:M picks each V×M block's 4
//! columns by the saliency summed over the block's rows; vector-wise scores a column-vector by
//! its summed saliency (the builders take the L2 norm of their scores, so they are given square
//! roots); unstructured is spread over the layer (SparseGPT: over each block of columns) or per
//! output row ([`Scope`]).

use kernels::{build_mask, Mask, Pattern};

use super::calibrate::{output_error, Chain, LayerInputs};
use super::schedule::Target;
use super::sparsegpt::{self, Selection};
use super::{Method, Scope};
use crate::model::{Layer, Weights};
use crate::StageError;

/// The builders' scores for a saliency: its square root for vector-wise (whose builder ranks a
/// vector by the L2 norm of its scores), the saliency itself otherwise.
fn scores(pattern: &Pattern, saliency: &[f64]) -> Vec<f32> {
    match pattern {
        Pattern::Vector { .. } => saliency.iter().map(|s| s.sqrt() as f32).collect(),
        _ => saliency.iter().map(|&s| s as f32).collect(),
    }
}

/// The keep flags of `target` on a `rows × cols` saliency matrix.
fn keep_flags(
    target: &Target,
    scope: Scope,
    saliency: &[f64],
    rows: usize,
    cols: usize,
) -> Result<Vec<bool>, kernels::KernelError> {
    let s = scores(&target.pattern(), saliency);
    match (target, scope) {
        (Target::Pattern(pattern @ Pattern::Unstructured { .. }), Scope::Row) => {
            let mut keep = Vec::with_capacity(rows * cols);
            for row in s.chunks(cols.max(1)) {
                keep.extend_from_slice(build_mask(pattern, row, 1, cols)?.as_slice());
            }
            Ok(keep)
        }
        _ => Ok(target.mask(&s, rows, cols)?.as_slice().to_vec()),
    }
}

/// Prunes one layer to `pattern` with a one-shot method (SparseGPT or Wanda) on its calibration
/// inputs `x`; returns its mask. Pruned weights become exactly `+0.0`; a failure names the layer.
pub fn prune_layer(
    layer: &mut Layer,
    x: &LayerInputs,
    pattern: &Pattern,
    method: &Method,
) -> Result<Mask, StageError> {
    prune_layer_to(layer, x, &Target::of(pattern), method)
}

/// [`prune_layer`] to one step's target (a gradual schedule's steps towards V:2:M are steps of
/// its nested structure).
fn prune_layer_to(
    layer: &mut Layer,
    x: &LayerInputs,
    target: &Target,
    method: &Method,
) -> Result<Mask, StageError> {
    let (rows, cols) = (layer.rows(), layer.cols());
    let name = layer.name.clone();
    let failed = |what: String| StageError::Layer {
        layer: name.clone(),
        what,
    };
    let keep = match *method {
        Method::SparseGpt {
            damp, block, scope, ..
        } => {
            let u = sparsegpt::inverse_factor(x, damp).map_err(failed)?;
            let step = match target.pattern() {
                Pattern::Nm { m, .. } | Pattern::Vnm { m, .. } => m,
                _ => block,
            };
            let choose = |sal: &[f64], r: usize, len: usize| {
                keep_flags(target, scope, sal, r, len).map_err(|e| e.to_string())
            };
            let select = Selection {
                step,
                choose: &choose,
            };
            sparsegpt::prune(&mut layer.weight, rows, cols, &u, block, &select).map_err(failed)?
        }
        Method::Wanda { scope, .. } => {
            let norms: Vec<f64> = (0..cols)
                .map(|c| {
                    (0..x.tokens)
                        .map(|t| f64::from(x.p[t * cols + c]).powi(2))
                        .sum::<f64>()
                        .sqrt()
                })
                .collect();
            let sal: Vec<f64> = layer
                .weight
                .iter()
                .enumerate()
                .map(|(k, w)| f64::from(w.abs()) * norms[k % cols])
                .collect();
            keep_flags(target, scope, &sal, rows, cols)?
        }
        _ => {
            return Err(StageError::InvalidConfig(format!(
                "{} is not a one-shot method",
                method.kind()
            )))
        }
    };
    let mask = Mask::new(rows, cols, keep)?;
    layer.weight = mask.apply(&layer.weight)?;
    Ok(mask)
}

/// Prunes the `prunable` layers of `weights` to their `targets` with a one-shot method, in order, on
/// the calibration `batch`: each layer sees the outputs of the layers before it as pruned
/// (`sequential`) or as they were.
pub(crate) fn prune_network(
    weights: &mut Weights,
    targets: &[Target],
    prunable: &[bool],
    method: &Method,
    batch: &[f32],
) -> Result<Vec<Option<Mask>>, StageError> {
    let sequential = method.calibration().is_none_or(|c| c.sequential());
    // Dense calibration runs the batch through the layers as they were.
    let before = (!sequential).then(|| weights.clone());
    let mut chain = Chain::new(weights, batch.to_vec())?;
    let mut masks = Vec::with_capacity(weights.layers.len());
    for (i, layer) in weights.layers.iter_mut().enumerate() {
        if prunable[i] {
            let x = chain.inputs(layer)?;
            masks.push(Some(prune_layer_to(layer, &x, &targets[i], method)?));
        } else {
            masks.push(None);
        }
        chain.advance(before.as_ref().map_or(&*layer, |b| &b.layers[i]))?;
    }
    Ok(masks)
}

/// Each pruned layer's relative output error `‖(W − Ŵ)X‖/‖WX‖` on the calibration `batch`,
/// without the method's update (`Ŵ = W ⊙ mask`) and with it (`Ŵ` = `after`): `W` from
/// `before`, `X` the layer's inputs in `after` (`sequential`) or in `before`.
pub(crate) fn output_errors(
    before: &Weights,
    after: &Weights,
    masks: &[Option<Mask>],
    batch: &[f32],
    sequential: bool,
) -> Result<Vec<Option<(f64, f64)>>, StageError> {
    let source = if sequential { after } else { before };
    let mut chain = Chain::new(source, batch.to_vec())?;
    let mut out = Vec::with_capacity(masks.len());
    for (i, layer) in source.layers.iter().enumerate() {
        out.push(match &masks[i] {
            Some(mask) => {
                let x = chain.inputs(layer)?;
                let (w, rows) = (&before.layers[i].weight, layer.rows());
                let masked = mask.apply(w)?;
                Some((
                    output_error(w, &masked, rows, &x),
                    output_error(w, &after.layers[i].weight, rows, &x),
                ))
            }
            None => None,
        });
        chain.advance(layer)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LayerKind;
    use crate::prune::Calibration;
    use kernels::SparseMatrix;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const ROWS: usize = 16;
    const COLS: usize = 20;

    fn layer(seed: u64) -> Layer {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Layer {
            name: "fc0".into(),
            kind: LayerKind::Linear,
            shape: vec![ROWS, COLS],
            weight: (0..ROWS * COLS)
                .map(|_| rng.random_range(-1.0..1.0))
                .collect(),
            bias: vec![0.0; ROWS],
        }
    }

    fn random_inputs(tokens: usize, seed: u64) -> LayerInputs {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        LayerInputs {
            p: (0..tokens * COLS)
                .map(|_| rng.random_range(-1.0..1.0))
                .collect(),
            tokens,
            cols: COLS,
        }
    }

    /// LayerInputs whose every column has the same norm: each token is a signed unit vector.
    fn equal_norm_inputs() -> LayerInputs {
        let tokens = 2 * COLS;
        let p = (0..tokens * COLS)
            .map(|k| {
                let (t, c) = (k / COLS, k % COLS);
                if t % COLS == c {
                    if t < COLS {
                        1.0
                    } else {
                        -1.0
                    }
                } else {
                    0.0
                }
            })
            .collect();
        LayerInputs {
            p,
            tokens,
            cols: COLS,
        }
    }

    fn patterns() -> Vec<Pattern> {
        vec![
            Pattern::Unstructured { sparsity: 0.75 },
            Pattern::Nm { n: 2, m: 8 },
            Pattern::Nm { n: 1, m: 3 },
            Pattern::Vnm { v: 8, m: 8 },
            Pattern::Vnm { v: 4, m: 6 },
            Pattern::Vector {
                v: 4,
                sparsity: 0.5,
            },
        ]
    }

    fn calibration() -> Calibration {
        Calibration {
            samples: 1,
            inputs: crate::prune::CalibrationInputs::Sequential,
        }
    }

    fn wanda(scope: Scope) -> Method {
        Method::Wanda {
            calibration: calibration(),
            scope,
        }
    }

    fn sparsegpt(damp: f64, block: usize, scope: Scope) -> Method {
        Method::SparseGpt {
            calibration: calibration(),
            damp,
            block,
            scope,
        }
    }

    /// The mask of saliency `|w|^power`: 1 is magnitude pruning; 2 is what SparseGPT's
    /// `w²/[H⁻¹]ᵢᵢ²` becomes when the dampening swamps the Hessian. The two rank weights alike
    /// but sum differently, which matters for V:N:M's choice of a block's 4 columns.
    fn magnitude(l: &Layer, pattern: &Pattern, scope: Scope, power: i32) -> Mask {
        let sal: Vec<f64> = l
            .weight
            .iter()
            .map(|w| f64::from(w.abs()).powi(power))
            .collect();
        let keep = keep_flags(&Target::of(pattern), scope, &sal, ROWS, COLS).unwrap();
        Mask::new(ROWS, COLS, keep).unwrap()
    }

    #[test]
    fn wanda_with_equal_input_norms_is_magnitude() {
        for pattern in patterns() {
            for scope in [Scope::Layer, Scope::Row] {
                let mut l = layer(1);
                let want = magnitude(&l, &pattern, scope, 1);
                let w0 = l.weight.clone();
                let mask =
                    prune_layer(&mut l, &equal_norm_inputs(), &pattern, &wanda(scope)).unwrap();
                assert_eq!(mask, want, "{pattern} {scope}");
                assert_eq!(l.weight, want.apply(&w0).unwrap(), "no update");
            }
        }
    }

    #[test]
    fn sparsegpt_with_huge_dampening_is_magnitude_pruning() {
        for pattern in patterns() {
            let mut l = layer(2);
            let want = magnitude(&l, &pattern, Scope::Layer, 2);
            let w0 = l.weight.clone();
            let method = sparsegpt(1e12, COLS, Scope::Layer);
            let mask = prune_layer(&mut l, &random_inputs(64, 3), &pattern, &method).unwrap();
            // Unstructured and vector-wise choose per block of columns: one block is the layer.
            assert_eq!(mask, want, "{pattern}");
            for (got, w) in l.weight.iter().zip(want.apply(&w0).unwrap()) {
                assert!(
                    (got - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "{pattern}: {got} vs {w}"
                );
            }
        }
    }

    #[test]
    fn every_pattern_keeps_its_invariants_and_exact_zeros() {
        let methods = [
            wanda(Scope::Layer),
            wanda(Scope::Row),
            sparsegpt(0.01, 8, Scope::Layer),
            sparsegpt(0.01, 5, Scope::Row),
        ];
        for pattern in patterns() {
            for method in &methods {
                let mut l = layer(4);
                let mask = prune_layer(&mut l, &random_inputs(50, 5), &pattern, method).unwrap();
                // The format's constructor checks the pattern's structure (N per group, a V×M
                // block's 4 shared columns, whole column-vectors) and that it round-trips.
                let m = SparseMatrix::from_masked(&pattern, &l.weight, &mask)
                    .unwrap_or_else(|e| panic!("{pattern} {}: {e}", method.kind()));
                assert_eq!(m.to_dense(), l.weight);
                for (w, k) in l.weight.iter().zip(mask.as_slice()) {
                    if !k {
                        assert_eq!(w.to_bits(), 0, "{pattern}: a pruned weight is +0.0");
                    }
                }
                let density = mask.density();
                let want = 1.0 - pattern.sparsity();
                assert!(
                    (density - want).abs() < 0.1,
                    "{pattern} {}: {density}",
                    method.kind()
                );
                if let (
                    Pattern::Unstructured { .. },
                    Method::Wanda {
                        scope: Scope::Row, ..
                    },
                ) = (&pattern, method)
                {
                    for r in 0..ROWS {
                        let kept = (0..COLS).filter(|&c| mask.keep(r, c)).count();
                        assert_eq!(kept, 5, "row {r}: 25 % of 20 columns");
                    }
                }
            }
        }
    }

    #[test]
    fn sparsegpt_leaves_a_smaller_output_error_than_wanda_and_magnitude() {
        let x = random_inputs(200, 6);
        for pattern in patterns() {
            let l0 = layer(7);
            let err = |method: Option<&Method>| {
                let mut l = l0.clone();
                match method {
                    Some(m) => {
                        prune_layer(&mut l, &x, &pattern, m).unwrap();
                    }
                    None => {
                        let mask = magnitude(&l, &pattern, Scope::Layer, 1);
                        l.weight = mask.apply(&l0.weight).unwrap();
                    }
                }
                output_error(&l0.weight, &l.weight, ROWS, &x)
            };
            let (s, w, m) = (
                err(Some(&sparsegpt(0.01, 8, Scope::Layer))),
                err(Some(&wanda(Scope::Layer))),
                err(None),
            );
            assert!(
                s < m && s < w,
                "{pattern}: sparsegpt {s}, wanda {w}, magnitude {m}"
            );
        }
    }
}
