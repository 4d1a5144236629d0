//! The Pareto front over (accuracy ↑, latency ↓, weight bytes ↓).
//!
//! A point dominates another when it is no worse in all three objectives and strictly better in
//! at least one. Points with a NaN objective are never on the front and dominate nothing.
//! Equal points do not dominate each other, so all copies of a non-dominated point are kept:
//! the front does not depend on the order of the input.

use serde::{Deserialize, Serialize};

/// The three objectives of one trial.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Objectives {
    /// Accuracy, higher is better.
    pub accuracy: f64,
    /// Latency in microseconds, lower is better.
    pub latency_us: f64,
    /// Weight storage in bytes, lower is better.
    pub weight_bytes: f64,
}

impl Objectives {
    /// True if no objective is NaN.
    pub fn is_comparable(&self) -> bool {
        !(self.accuracy.is_nan() || self.latency_us.is_nan() || self.weight_bytes.is_nan())
    }

    /// True if `self` dominates `other` (never when either has a NaN objective).
    pub fn dominates(&self, other: &Objectives) -> bool {
        let no_worse = self.accuracy >= other.accuracy
            && self.latency_us <= other.latency_us
            && self.weight_bytes <= other.weight_bytes;
        let better = self.accuracy > other.accuracy
            || self.latency_us < other.latency_us
            || self.weight_bytes < other.weight_bytes;
        no_worse && better
    }
}

/// Indices (ascending) of the points no other point dominates, NaN points excluded.
///
/// Sorted best-first lexicographically, a point can only be dominated by one before it, and if
/// it is dominated at all it is dominated by a front point (dominance is transitive), so each
/// point is checked against the front found so far: O(n log n + n·front).
pub fn pareto_front(points: &[Objectives]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].is_comparable())
        .collect();
    // `x + 0.0` turns -0.0 into 0.0: the order must agree with `<`, which ties them, or a
    // point could be visited before the one that dominates it.
    let numeric = |x: f64, y: f64| (x + 0.0).total_cmp(&(y + 0.0));
    order.sort_by(|&a, &b| {
        let (p, q) = (&points[a], &points[b]);
        numeric(q.accuracy, p.accuracy)
            .then(numeric(p.latency_us, q.latency_us))
            .then(numeric(p.weight_bytes, q.weight_bytes))
    });
    let mut front: Vec<usize> = Vec::new();
    for i in order {
        if !front.iter().any(|&f| points[f].dominates(&points[i])) {
            front.push(i);
        }
    }
    front.sort_unstable();
    front
}

/// A point whose latency is known only within an interval (from a measured confidence
/// interval): `latency_lo ≤ objectives.latency_us ≤ latency_hi`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredPoint {
    /// The objectives at their point values.
    pub objectives: Objectives,
    /// Lower end of the latency's interval.
    pub latency_lo: f64,
    /// Upper end of the latency's interval.
    pub latency_hi: f64,
}

impl MeasuredPoint {
    /// A point measured exactly (an empty interval).
    pub fn exact(objectives: Objectives) -> MeasuredPoint {
        MeasuredPoint {
            objectives,
            latency_lo: objectives.latency_us,
            latency_hi: objectives.latency_us,
        }
    }

    /// True if `self` dominates `other` whatever the latencies are inside their intervals: no
    /// worse in accuracy and bytes, slower at most where `other` is fastest, and strictly
    /// better in one objective. Never with a NaN.
    pub fn surely_dominates(&self, other: &MeasuredPoint) -> bool {
        let (p, q) = (&self.objectives, &other.objectives);
        if !(p.is_comparable() && q.is_comparable()) {
            return false;
        }
        let no_worse = p.accuracy >= q.accuracy
            && p.weight_bytes <= q.weight_bytes
            && self.latency_hi <= other.latency_lo;
        let better = p.accuracy > q.accuracy
            || p.weight_bytes < q.weight_bytes
            || self.latency_hi < other.latency_lo;
        no_worse && better
    }

    /// True if `self` dominates `other` for some latencies inside their intervals: no worse in
    /// accuracy and bytes, fastest no slower than `other` at its slowest, and strictly better in
    /// one objective at some such latencies. Never with a NaN.
    pub fn possibly_dominates(&self, other: &MeasuredPoint) -> bool {
        let (p, q) = (&self.objectives, &other.objectives);
        if !(p.is_comparable() && q.is_comparable()) {
            return false;
        }
        let no_worse = p.accuracy >= q.accuracy
            && p.weight_bytes <= q.weight_bytes
            && self.latency_lo <= other.latency_hi;
        let better = p.accuracy > q.accuracy
            || p.weight_bytes < q.weight_bytes
            || self.latency_lo < other.latency_hi;
        no_worse && better
    }
}

/// The front under measurement noise: indices (ascending) of the points that no other point
/// [surely dominates](MeasuredPoint::surely_dominates), each with `true` (a *tie*) where another
/// point [possibly dominates](MeasuredPoint::possibly_dominates) it: its place on the front
/// then rests on latencies the measured spread cannot tell apart, and another measurement may
/// drop it (it includes every point the exact front of the point values, [`pareto_front`],
/// leaves out). NaN points are left out. O(n²) comparisons.
pub fn pareto_front_with_ties(points: &[MeasuredPoint]) -> Vec<(usize, bool)> {
    // Checking against every comparable point keeps this obviously right; evaluations number
    // in the hundreds, not millions.
    let comparable: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].objectives.is_comparable())
        .collect();
    comparable
        .iter()
        .copied()
        .filter(|&i| {
            !comparable
                .iter()
                .any(|&j| j != i && points[j].surely_dominates(&points[i]))
        })
        .map(|i| {
            let tie = comparable
                .iter()
                .any(|&j| j != i && points[j].possibly_dominates(&points[i]));
            (i, tie)
        })
        .collect()
}
