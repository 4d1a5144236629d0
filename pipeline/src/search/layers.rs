//! Each layer's latency in a format, as the latency predictor adds it up: measured inside the
//! evaluated models' passes where some model ran that layer in that format (the median of
//! those), else the layer's tuned kernel time scaled by the median ratio of in-pass to tuned
//! time over every observation (a kernel timed alone is not the same kernel inside a pass).

use crate::kinds::pattern_label;
use kernels::Pattern;
use std::collections::BTreeMap;

/// Per (layer index, pattern label): tuned and in-pass times, µs.
#[derive(Clone, Debug, Default)]
pub struct LayerTimes {
    tuned: BTreeMap<(usize, String), f64>,
    observed: BTreeMap<(usize, String), Vec<f64>>,
    ratio: f64,
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

impl LayerTimes {
    /// From the tunings (`tuned(i, p)`) and the models measured so far: each model's layer
    /// patterns and its in-pass layer times.
    pub fn new(
        layers: usize,
        options: impl Fn(usize) -> Vec<Pattern>,
        tuned: impl Fn(usize, &Pattern) -> Option<f64>,
        models: &[(Vec<Pattern>, Vec<f64>)],
    ) -> LayerTimes {
        let mut t = LayerTimes::default();
        for i in 0..layers {
            let mut ps = options(i);
            if !ps.contains(&Pattern::Dense) {
                ps.push(Pattern::Dense);
            }
            for p in ps {
                if let Some(us) = tuned(i, &p) {
                    t.tuned.insert((i, pattern_label(&p)), us);
                }
            }
        }
        let mut ratios = vec![];
        for (patterns, times) in models.iter().filter(|m| m.0.len() == m.1.len()) {
            for (i, (p, &us)) in patterns.iter().zip(times).enumerate() {
                let k = (i, pattern_label(p));
                if let Some(&tu) = t.tuned.get(&k) {
                    ratios.push(us / tu);
                }
                t.observed.entry(k).or_default().push(us);
            }
        }
        t.ratio = median(&mut ratios).unwrap_or(1.0);
        t
    }

    /// Layer `i`'s predicted time in `p`, µs.
    pub fn us(&self, i: usize, p: &Pattern) -> Option<f64> {
        let k = (i, pattern_label(p));
        match self.observed.get(&k) {
            Some(v) => median(&mut v.clone()),
            None => self.tuned.get(&k).map(|t| t * self.ratio),
        }
    }

    /// The median ratio of in-pass to tuned time (1 before any model is measured).
    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// Observed (layer, format) pairs.
    pub fn observed(&self) -> usize {
        self.observed.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observed_times_win_and_the_rest_scale_by_the_median_ratio() {
        let (d, s) = (Pattern::Dense, Pattern::Nm { n: 2, m: 4 });
        let tuned = |_: usize, p: &Pattern| Some(if *p == Pattern::Dense { 10.0 } else { 5.0 });
        let models = vec![
            (vec![d.clone(), d.clone()], vec![20.0, 22.0]),
            (vec![s.clone(), d.clone()], vec![9.0, 18.0]),
        ];
        let t = LayerTimes::new(2, |_| vec![s.clone()], tuned, &models);
        // Ratios 2.0, 2.2, 1.8, 1.8: median 1.9.
        assert!((t.ratio() - 1.9).abs() < 1e-12);
        assert_eq!(t.us(0, &d), Some(20.0));
        assert_eq!(t.us(1, &d), Some(20.0));
        assert_eq!(t.us(0, &s), Some(9.0));
        assert!((t.us(1, &s).unwrap() - 9.5).abs() < 1e-12);
        assert_eq!(t.observed(), 3);
    }
}
