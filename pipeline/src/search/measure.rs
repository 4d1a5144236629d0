//! What a unified search reads back after each round: from the store, by the keys of the plan
//! it fed (so the same stored measurements give the same choices, whatever the workers).

use crate::key::AnyKey;
use crate::kinds::{pattern_label, Evaluate, KernelTune, Prune, PrunePoint};
use crate::plan::Plan;
use crate::store::{EntryState, Store};
use kernels::Pattern;
use results::{Row, Value};

use stages::kernel_tune::Backend;
use std::collections::BTreeMap;

/// A model's measured objectives.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// Test accuracy.
    pub accuracy: f64,
    /// Latency at the search's batch size, µs.
    pub latency_us: f64,
    /// Weight bytes.
    pub weight_bytes: f64,
    /// The dense model's latency measured in the same evaluation, µs, if it says.
    pub dense_latency_us: Option<f64>,
    /// Time outside the GEMMs per pass, µs, if it says.
    pub non_gemm_us: Option<f64>,
    /// Each GEMM layer's time (forward order), µs, if it says for this batch: inside the pass,
    /// or alone where the row has no in-pass times or ran a layer dense.
    pub layer_us: Option<Vec<f64>>,
    /// The speedup over the dense model measured in pairs with it, if it says.
    pub speedup: Option<f64>,
}

fn num(row: &Row, col: &str) -> Option<f64> {
    row.get(col)
        .and_then(Value::as_f64)
        .filter(|x| x.is_finite())
}

/// Reads result rows from the store, each stored entry verified once (an entry never changes
/// once stored; one that is missing is asked again, as a later round may have computed it).
pub struct Reader {
    store: Store,
    seen: std::cell::RefCell<BTreeMap<AnyKey, Row>>,
}

impl Reader {
    /// A reader of `store`.
    pub fn new(store: Store) -> Reader {
        Reader {
            store,
            seen: Default::default(),
        }
    }
}

/// The stored result row of `key`, if it succeeded.
pub fn metrics(store: &Reader, key: &AnyKey) -> Option<Row> {
    if let Some(row) = store.seen.borrow().get(key) {
        return Some(row.clone());
    }
    match store.store.read(key) {
        EntryState::Valid(meta) => {
            store.seen.borrow_mut().insert(*key, meta.metrics.clone());
            Some(meta.metrics.clone())
        }
        _ => None,
    }
}

/// The prune node of `point` in `plan`.
pub fn prune_key(plan: &Plan, point: &PrunePoint) -> Option<AnyKey> {
    plan.nodes.values().find_map(|n| {
        let p = n.planned::<Prune>()?;
        let s = &p.trial.spec;
        (s.pattern == point.pattern
            && s.method == point.method
            && s.schedule == point.schedule
            && s.finetune_epochs as u64 == point.finetune_epochs
            && s.layer_patterns == point.layers)
            .then_some(n.key)
    })
}

/// The measured objectives of the evaluation of `prune` on `backend` at `batch`.
pub fn evaluation(
    store: &Reader,
    plan: &Plan,
    prune: AnyKey,
    backend: Backend,
    batch: u64,
    largest: bool,
) -> Option<Measured> {
    let key = plan.nodes.values().find_map(|n| {
        let e = n.planned::<Evaluate>()?;
        (e.parents.0.any() == prune && e.trial.backend == backend).then_some(n.key)
    })?;
    let row = metrics(store, &key)?;
    let ran_dense = matches!(
        row.get(&format!("dense_layers_b{batch}")),
        Some(Value::ListStr(v)) if !v.is_empty()
    );
    let in_pass = row.get("layer_pass_us").filter(|_| !ran_dense);
    Some(Measured {
        accuracy: num(&row, "accuracy")?,
        latency_us: num(&row, &format!("latency_us_b{batch}"))
            .or_else(|| num(&row, "latency_us_median"))?,
        weight_bytes: num(&row, "weight_bytes")?,
        dense_latency_us: num(&row, &format!("dense_latency_us_b{batch}")),
        non_gemm_us: num(&row, &format!("non_gemm_us_b{batch}")),
        // The layer times are recorded for the largest batch size only: inside the pass where
        // the row has them and ran every layer at its own kernel (a layer run dense spent its
        // dense copy's time there), else each layer's time alone (earlier rows have only that).
        // In a pass cut into slices (`pass_slices_b{B}` > 1, or its slice run in chunks) they are
        // the slowest slice's, its share of the batch on one thread, summed over the slice's
        // chunks: each layer's share of that pass's time, as a whole pass's are of its own, so
        // they add up the same way; two evaluations that chose differently
        // give a layer times measured two ways (the latency fit's scale absorbs the mean).
        layer_us: match (in_pass, row.get("layer_latency_us")) {
            (Some(Value::ListF64(v)), _) | (_, Some(Value::ListF64(v)))
                if largest && !v.is_empty() =>
            {
                Some(v.clone())
            }
            _ => None,
        },
        speedup: num(&row, &format!("speedup_vs_dense_b{batch}")).filter(|s| *s > 0.0),
    })
}

/// The accuracy a pruning reached (its fine-tuned test accuracy).
pub fn prune_accuracy(store: &Reader, key: AnyKey) -> Option<f64> {
    num(&metrics(store, &key)?, "accuracy")
}

/// The tuned latency (µs) of every tuning in `plan` on `backend`, by (pattern label, rows, cols, batch tokens).
pub fn tunings(
    store: &Reader,
    plan: &Plan,
    backend: Backend,
) -> BTreeMap<(String, u64, u64, u64), f64> {
    let mut out = BTreeMap::new();
    for n in plan.nodes.values() {
        let Some(t) = n.planned::<KernelTune>() else {
            continue;
        };
        let t = &t.trial;
        if t.backend != backend {
            continue;
        }
        if let Some(us) = metrics(store, &n.key).and_then(|r| num(&r, "latency_us_median")) {
            out.insert(
                (pattern_label(&t.pattern), t.rows, t.cols, t.batch_tokens),
                us,
            );
        }
    }
    out
}

/// The bytes a `rows × cols` layer takes in the format of `pattern` (packed from a fixed
/// pseudo-random matrix: exact for every pattern whose count of kept weights is fixed).
pub fn format_bytes(pattern: &Pattern, rows: u64, cols: u64) -> f64 {
    let (r, c) = (rows as usize, cols as usize);
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let w: Vec<f32> = (0..r * c)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    let scores: Vec<f32> = w.iter().map(|x| x.abs()).collect();
    kernels::build_mask(pattern, &scores, r, c)
        .and_then(|m| kernels::SparseMatrix::from_masked(pattern, &w, &m))
        .map_or(rows as f64 * cols as f64 * 4.0, |m| m.bytes() as f64)
}
