//! The Pareto front against a brute-force oracle on seeded random points with ties and NaNs.

mod common;

use common::Rng;
use results::{pareto_front, Objectives};

/// The definition, checked pair by pair.
fn oracle(points: &[Objectives]) -> Vec<usize> {
    let nan =
        |p: &Objectives| p.accuracy.is_nan() || p.latency_us.is_nan() || p.weight_bytes.is_nan();
    (0..points.len())
        .filter(|&i| !nan(&points[i]))
        .filter(|&i| {
            !points.iter().any(|q| {
                let p = &points[i];
                !nan(q)
                    && q.accuracy >= p.accuracy
                    && q.latency_us <= p.latency_us
                    && q.weight_bytes <= p.weight_bytes
                    && (q.accuracy > p.accuracy
                        || q.latency_us < p.latency_us
                        || q.weight_bytes < p.weight_bytes)
            })
        })
        .collect()
}

/// A value from a small grid (so ties are common), sometimes NaN or infinite.
fn coordinate(rng: &mut Rng, levels: u64) -> f64 {
    match rng.below(40) {
        0 => f64::NAN,
        1 => f64::INFINITY,
        2 => -0.0,
        _ => rng.below(levels) as f64,
    }
}

#[test]
fn matches_the_brute_force_oracle_on_random_points() {
    let mut rng = Rng::new(7);
    for case in 0..400 {
        let n = rng.below(60) as usize;
        let levels = 1 + rng.below(8);
        let points: Vec<Objectives> = (0..n)
            .map(|_| Objectives {
                accuracy: coordinate(&mut rng, levels),
                latency_us: coordinate(&mut rng, levels),
                weight_bytes: coordinate(&mut rng, levels),
            })
            .collect();
        let front = pareto_front(&points);
        assert_eq!(front, oracle(&points), "case {case}: {points:?}");
        for &f in &front {
            assert!(
                !points.iter().any(|q| q.dominates(&points[f])),
                "case {case}"
            );
        }
    }
}

#[test]
fn ties_are_all_kept_and_nan_points_dropped() {
    let p = |accuracy, latency_us, weight_bytes| Objectives {
        accuracy,
        latency_us,
        weight_bytes,
    };
    let points = [
        p(0.9, 10.0, 100.0),
        p(0.9, 10.0, 100.0), // an exact tie of a front point
        p(0.9, 10.0, 101.0), // dominated by the two above
        p(0.8, 5.0, 100.0),
        p(f64::NAN, 0.0, 0.0), // would dominate everything were it comparable
        p(0.95, 20.0, 50.0),
        p(0.8, 5.0, 200.0), // dominated by index 3
        p(0.0, 0.0, 0.0),
    ];
    assert_eq!(pareto_front(&points), [0, 1, 3, 5, 7]);
    assert_eq!(pareto_front(&[]), Vec::<usize>::new());
}
