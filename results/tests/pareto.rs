//! The Pareto front against a brute-force oracle on seeded random points with ties and NaNs,
//! and the front under latency intervals against its definition.

mod common;

use common::Rng;
use results::{pareto_front, pareto_front_with_ties, MeasuredPoint, Objectives};

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

#[test]
fn with_empty_intervals_the_noisy_front_is_the_exact_front() {
    let mut rng = Rng::new(11);
    for case in 0..200 {
        let n = rng.below(40) as usize;
        let points: Vec<Objectives> = (0..n)
            .map(|_| Objectives {
                accuracy: coordinate(&mut rng, 5),
                latency_us: coordinate(&mut rng, 5),
                weight_bytes: coordinate(&mut rng, 5),
            })
            .collect();
        let measured: Vec<MeasuredPoint> =
            points.iter().map(|&o| MeasuredPoint::exact(o)).collect();
        let noisy = pareto_front_with_ties(&measured);
        assert!(noisy.iter().all(|&(_, tie)| !tie), "case {case}");
        let ids: Vec<usize> = noisy.iter().map(|&(i, _)| i).collect();
        assert_eq!(ids, pareto_front(&points), "case {case}");
    }
}

#[test]
fn intervals_that_overlap_keep_both_points_and_mark_the_tie() {
    let m = |accuracy, latency_us, spread: f64| MeasuredPoint {
        objectives: Objectives {
            accuracy,
            latency_us,
            weight_bytes: 100.0,
        },
        latency_lo: latency_us * (1.0 - spread),
        latency_hi: latency_us * (1.0 + spread),
    };
    let points = [
        m(0.9, 100.0, 0.03),
        // Less accurate and 2 % slower: dominated by its point values, but within the spread.
        m(0.8, 102.0, 0.03),
        // Less accurate and 20 % slower: surely dominated.
        m(0.8, 120.0, 0.03),
        // More accurate, much slower: on the front either way.
        m(0.95, 200.0, 0.03),
        // Less accurate but 2 % faster: on the exact front, yet index 0 may dominate it.
        m(0.85, 98.0, 0.03),
    ];
    assert_eq!(
        pareto_front_with_ties(&points),
        [(0, false), (1, true), (3, false), (4, true)]
    );
    // Every point the noisy front leaves out is surely dominated by one it keeps.
    assert!(points[0].surely_dominates(&points[2]));
    assert!(!points[0].surely_dominates(&points[1]));
    assert!(points[0].possibly_dominates(&points[4]) && !points[0].surely_dominates(&points[4]));
}
