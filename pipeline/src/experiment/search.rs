//! `[search]`: the strategy, and for `unified` its objectives, constraints and budget.

use super::error::{ExperimentError, SourceMap};
use super::schema::{RawExperiment, SearchStrategy};
use super::validate::{check, ModelPart};
use crate::kinds::PrunePoint;
use std::ops::Range;

/// A validated `[search] strategy = "unified"`.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchSpec {
    /// Every prunable layer takes its own point (pattern, N:M, V, sparsity) from the axes.
    pub per_layer: bool,
    /// Where `per_layer` was set (a model with one prunable layer is an error there).
    pub per_layer_span: Range<usize>,
    /// The batch size whose latency is the objective.
    pub batch_size: u64,
    /// Fine-tune epochs the search may spend.
    pub budget_epochs: u64,
    /// Full trials chosen per round, at most.
    pub per_round: usize,
    /// Constraints on the trials the search reports as its answer.
    pub constraints: Constraints,
}

/// Optional constraints of a unified search.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Constraints {
    /// The least accuracy.
    pub min_accuracy: Option<f64>,
    /// The most latency, µs at the search's batch size.
    pub max_latency_us: Option<f64>,
    /// The least speedup over the dense model at the search's batch size.
    pub min_speedup: Option<f64>,
}

/// Full trials per round when the file does not say.
pub const PER_ROUND_DEFAULT: u64 = 3;

/// `[search]` of `raw` (`None` for grid). `batch_tokens` are the declared tuned batch sizes
/// and `batch_sizes` the evaluated ones; the search's batch size must be evaluated and tuned
/// at exactly that size (declared, or added by [`super::tuned_batches`] because no declared
/// size is within 4× of it): it predicts latency from the tunings at that size.
pub(super) fn search_spec(
    raw: &RawExperiment,
    map: &SourceMap,
    model: Option<&ModelPart>,
    points: &[PrunePoint],
    batch_tokens: &[u64],
    batch_sizes: &[u64],
) -> Result<Option<SearchSpec>, ExperimentError> {
    let Some(s) = &raw.search else {
        return Ok(None);
    };
    let unified = *s.strategy.get_ref() == SearchStrategy::Unified;
    if !unified {
        let set = [
            ("per_layer", s.per_layer.as_ref().map(|x| x.span())),
            ("batch_size", s.batch_size.as_ref().map(|x| x.span())),
            ("budget_epochs", s.budget_epochs.as_ref().map(|x| x.span())),
            ("per_round", s.per_round.as_ref().map(|x| x.span())),
            ("min_accuracy", s.min_accuracy.as_ref().map(|x| x.span())),
            (
                "max_latency_us",
                s.max_latency_us.as_ref().map(|x| x.span()),
            ),
            ("min_speedup", s.min_speedup.as_ref().map(|x| x.span())),
        ];
        if let Some((name, Some(span))) = set.into_iter().find(|(_, s)| s.is_some()) {
            return Err(map.error(
                span,
                format!("`{name}` applies to strategy = \"unified\" only"),
            ));
        }
        return Ok(None);
    }
    let at = s.strategy.span();
    let Some(model) = model else {
        return Err(map.error(
            at,
            "strategy = \"unified\" searches the pruning of a trained model: it needs [dataset], [model] and [train] (a kernel-only study or a layer study has no accuracy to search)",
        ));
    };
    check(model.trains.len() == 1, map, at.clone(), || {
        format!(
            "strategy = \"unified\" searches the prune space of one trained model; the [train] axes give {} trainings (keep one value per axis)",
            model.trains.len()
        )
    })?;
    check(
        points.iter().any(|p| p.method.is_some()),
        map,
        at.clone(),
        || "strategy = \"unified\" needs sparse patterns in [prune] pattern".into(),
    )?;
    let finetune = points.iter().map(|p| p.finetune_epochs).max().unwrap_or(0);
    let budget = s.budget_epochs.as_ref().ok_or_else(|| {
        map.error(
            at.clone(),
            "strategy = \"unified\" needs `budget_epochs`: the fine-tune epochs it may spend",
        )
    })?;
    check(
        *budget.get_ref() >= finetune.max(1),
        map,
        budget.span(),
        || {
            format!(
            "budget_epochs = {} is smaller than one fine-tune ([prune] finetune_epochs = {finetune})",
            budget.get_ref()
        )
        },
    )?;
    // Only a size that another tuned size is within 4x of is left untuned: evaluations use
    // the nearest such tuning (declared, or added for another evaluated size).
    let tuned = super::tuned_batches(batch_tokens, batch_sizes, true);
    let not_tuned = |what: &str, v: u64| {
        let near = stages::evaluate::guiding_batch(tuned.iter().map(|&t| t as usize), v as usize)
            .unwrap_or(v as usize);
        format!("{what} = {v} is not tuned: the tuning at batch {near} is within 4x of it, and evaluations use that one, while the search predicts latency from the tunings at exactly its batch size; add {v} to [kernel_tune] batch_tokens")
    };
    let batch_size = match &s.batch_size {
        Some(b) => {
            let v = *b.get_ref();
            check(batch_sizes.contains(&v), map, b.span(), || {
                format!("batch_size = {v} is not one of [evaluate] batch_sizes {batch_sizes:?}")
            })?;
            check(tuned.contains(&v), map, b.span(), || {
                not_tuned("batch_size", v)
            })?;
            v
        }
        None => {
            let largest = batch_sizes.iter().copied().max().unwrap_or(1);
            check(tuned.contains(&largest), map, at.clone(), || {
                format!(
                    "{} (or set [search] batch_size)",
                    not_tuned(
                        "the search's batch size (default: the largest of [evaluate] batch_sizes)",
                        largest
                    )
                )
            })?;
            largest
        }
    };
    let per_round = match &s.per_round {
        Some(x) => {
            check(*x.get_ref() >= 1, map, x.span(), || {
                "per_round must be ≥ 1".into()
            })?;
            *x.get_ref()
        }
        None => PER_ROUND_DEFAULT,
    };
    let positive = |x: &Option<toml::Spanned<f64>>, name: &str, max: f64| match x {
        Some(v) => {
            let f = *v.get_ref();
            check(f.is_finite() && f > 0.0 && f <= max, map, v.span(), || {
                if max == f64::MAX {
                    format!("{name} must be a finite number > 0, found {f:?}")
                } else {
                    format!("{name} must be in (0, {max}], found {f:?}")
                }
            })?;
            Ok(Some(f))
        }
        None => Ok(None),
    };
    let constraints = Constraints {
        min_accuracy: positive(&s.min_accuracy, "min_accuracy", 1.0)?,
        max_latency_us: positive(&s.max_latency_us, "max_latency_us", f64::MAX)?,
        min_speedup: positive(&s.min_speedup, "min_speedup", f64::MAX)?,
    };
    Ok(Some(SearchSpec {
        per_layer: s.per_layer.as_ref().is_some_and(|x| *x.get_ref()),
        per_layer_span: s.per_layer.as_ref().map_or(at, |x| x.span()),
        batch_size,
        budget_epochs: *budget.get_ref(),
        per_round: per_round as usize,
        constraints,
    }))
}
