//! Pareto fronts and hypervolume over the three objectives of a unified search: accuracy ↑,
//! latency ↓, weight bytes ↓, measured as gains over a reference point.

/// The reference point of the hypervolume: a trial only adds volume where it beats it on all
/// three objectives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reference {
    /// Accuracy (the dense model's, less [`ACCURACY_MARGIN`]).
    pub accuracy: f64,
    /// Latency in µs at the search's batch size (the dense model's).
    pub latency_us: f64,
    /// Weight bytes (the dense model's).
    pub weight_bytes: f64,
}

/// How far below the dense model's accuracy the reference point lies: models that lose more
/// than ten points of accuracy add nothing to the hypervolume.
pub const ACCURACY_MARGIN: f64 = 0.10;

/// One model's objectives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Objectives {
    /// Accuracy (fraction correct).
    pub accuracy: f64,
    /// Latency, µs.
    pub latency_us: f64,
    /// Weight bytes.
    pub weight_bytes: f64,
}

impl Reference {
    /// The gains of `o` over the reference, each ≥ 0 and larger for better: accuracy points
    /// above it, and the fractions of its latency and bytes saved.
    pub fn gains(&self, o: &Objectives) -> [f64; 3] {
        let rel = |x: f64, r: f64| if r > 0.0 { (r - x) / r } else { 0.0 };
        [
            (o.accuracy - self.accuracy).max(0.0),
            rel(o.latency_us, self.latency_us).max(0.0),
            rel(o.weight_bytes, self.weight_bytes).max(0.0),
        ]
    }
}

/// Whether `a` dominates `b` (objectives as [`Objectives`]: no worse on all, better on one).
pub fn dominates(a: &Objectives, b: &Objectives) -> bool {
    let no_worse = a.accuracy >= b.accuracy
        && a.latency_us <= b.latency_us
        && a.weight_bytes <= b.weight_bytes;
    let better =
        a.accuracy > b.accuracy || a.latency_us < b.latency_us || a.weight_bytes < b.weight_bytes;
    no_worse && better
}

/// Indices of the points no other point dominates (equal points all stay).
pub fn front(points: &[Objectives]) -> Vec<usize> {
    (0..points.len())
        .filter(|&i| !points.iter().any(|q| dominates(q, &points[i])))
        .collect()
}

/// The volume dominated by `gains` (each coordinate ≥ 0, larger better) above the origin.
pub fn hypervolume(gains: &[[f64; 3]]) -> f64 {
    let mut pts: Vec<[f64; 3]> = gains
        .iter()
        .copied()
        .filter(|g| g.iter().all(|&x| x > 0.0))
        .collect();
    pts.sort_by(|a, b| b[2].total_cmp(&a[2]));
    let mut volume = 0.0;
    for i in 0..pts.len() {
        let next = pts.get(i + 1).map_or(0.0, |p| p[2]);
        let depth = pts[i][2] - next;
        if depth > 0.0 {
            volume += area(&pts[..=i]) * depth;
        }
    }
    volume
}

/// The area dominated by the points' first two coordinates above the origin.
fn area(pts: &[[f64; 3]]) -> f64 {
    let mut xy: Vec<(f64, f64)> = pts.iter().map(|p| (p[0], p[1])).collect();
    xy.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (mut a, mut top) = (0.0, 0.0f64);
    for j in 0..xy.len() {
        top = top.max(xy[j].1);
        let next = xy.get(j + 1).map_or(0.0, |p| p.0);
        a += (xy[j].0 - next) * top;
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hypervolume of boxes against a Monte-Carlo-free oracle: inclusion–exclusion over
    /// every subset of a few points.
    fn oracle(g: &[[f64; 3]]) -> f64 {
        let n = g.len();
        let mut v = 0.0;
        for mask in 1u32..(1 << n) {
            let mut m = [f64::INFINITY; 3];
            for (i, p) in g.iter().enumerate() {
                if mask & (1 << i) != 0 {
                    for k in 0..3 {
                        m[k] = m[k].min(p[k]);
                    }
                }
            }
            let sign = if mask.count_ones() % 2 == 1 {
                1.0
            } else {
                -1.0
            };
            v += sign * m[0] * m[1] * m[2];
        }
        v
    }

    #[test]
    fn hypervolume_equals_inclusion_exclusion() {
        let mut s = 12345u64;
        let mut r = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64 * 8.0).floor() / 8.0 + 0.125
        };
        for n in 1..8 {
            let g: Vec<[f64; 3]> = (0..n).map(|_| [r(), r(), r()]).collect();
            let (h, o) = (hypervolume(&g), oracle(&g));
            assert!((h - o).abs() < 1e-12, "{n} points: {h} vs {o}");
        }
        assert_eq!(hypervolume(&[[1.0, 1.0, 0.0]]), 0.0);
        assert_eq!(hypervolume(&[]), 0.0);
    }

    #[test]
    fn front_keeps_the_non_dominated() {
        let o = |a, l, b| Objectives {
            accuracy: a,
            latency_us: l,
            weight_bytes: b,
        };
        let pts = [
            o(0.9, 10.0, 5.0),
            o(0.8, 12.0, 6.0),
            o(0.95, 20.0, 5.0),
            o(0.9, 10.0, 5.0),
        ];
        assert_eq!(front(&pts), vec![0, 2, 3]);
        let r = Reference {
            accuracy: 0.5,
            latency_us: 20.0,
            weight_bytes: 10.0,
        };
        assert_eq!(r.gains(&pts[0]), [0.4, 0.5, 0.5]);
        assert_eq!(r.gains(&o(0.4, 30.0, 5.0)), [0.0, 0.0, 0.5]);
    }
}
