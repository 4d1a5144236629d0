//! A CNN's host steps between its products: the im2col matrix of a convolution, 2×2
//! max-pooling, and regrouping the activations between a column per sample and a column per
//! sample and position. Each writes into a buffer the pass hands it (`graph::Gemm::take`, a
//! recycled buffer of any contents) and overwrites every value.

use super::graph::Real;

/// Between `(c·hw) × s` (flat features in (channel, position) order, a column per sample) and
/// `c × (s·hw)` (a column per sample and position): `flatten` goes to the former. Into `out`
/// (as long as `x`; every value overwritten).
#[inline(always)]
pub(super) fn regroup<T: Real>(
    x: &[T],
    samples: usize,
    hw: usize,
    flatten: bool,
    mut out: Vec<T>,
) -> Vec<T> {
    let c = x.len() / (samples * hw).max(1);
    for ch in 0..c {
        for s in 0..samples {
            for p in 0..hw {
                let (flat, grouped) = ((ch * hw + p) * samples + s, ch * samples * hw + s * hw + p);
                if flatten {
                    out[flat] = x[grouped];
                } else {
                    out[grouped] = x[flat];
                }
            }
        }
    }
    out
}

/// The im2col matrix `(c·k·k) × (s·oh·ow)` of `x` (`c × (s·h·w)`), stride 1, zero `padding`;
/// rows in the weight's (channel, ky, kx) order. Into `out` (of that size, any contents).
#[inline(always)]
pub(super) fn im2col<T: Real>(
    x: &[T],
    (c, h, w): (usize, usize, usize),
    samples: usize,
    (k, padding): (usize, usize),
    mut out: Vec<T>,
) -> Vec<T> {
    let (oh, ow) = (h + 2 * padding + 1 - k, w + 2 * padding + 1 - k);
    let n = samples * oh * ow;
    if padding > 0 {
        // The positions over the padding are skipped below.
        out.fill(T::default());
    }
    for ch in 0..c {
        for ky in 0..k {
            for kx in 0..k {
                let row = &mut out[((ch * k + ky) * k + kx) * n..][..n];
                for s in 0..samples {
                    let src = &x[ch * samples * h * w + s * h * w..][..h * w];
                    for oy in 0..oh {
                        let y = (oy + ky) as isize - padding as isize;
                        if y < 0 || y >= h as isize {
                            continue;
                        }
                        for ox in 0..ow {
                            let xx = (ox + kx) as isize - padding as isize;
                            if xx >= 0 && xx < w as isize {
                                row[s * oh * ow + oy * ow + ox] = src[y as usize * w + xx as usize];
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// 2×2 max-pooling, stride 2 (odd edges dropped, as candle does), of `c × (s·h·w)`, into
/// `out` (of that size, every value overwritten).
#[inline(always)]
pub(super) fn max_pool2<T: Real>(
    x: &[T],
    (c, h, w): (usize, usize, usize),
    samples: usize,
    mut out: Vec<T>,
) -> Vec<T> {
    let (ph, pw) = (h / 2, w / 2);
    let mut at = 0;
    for ch in 0..c {
        for s in 0..samples {
            let src = &x[ch * samples * h * w + s * h * w..][..h * w];
            for y in 0..ph {
                for xx in 0..pw {
                    let mut m = src[2 * y * w + 2 * xx];
                    for v in [
                        src[2 * y * w + 2 * xx + 1],
                        src[(2 * y + 1) * w + 2 * xx],
                        src[(2 * y + 1) * w + 2 * xx + 1],
                    ] {
                        if v > m {
                            m = v;
                        }
                    }
                    out[at] = m;
                    at += 1;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host steps that write into a recycled buffer (any contents) write every value:
    /// im2col with and without padding, pooling and regrouping give into a NaN-filled buffer
    /// what they give into a zeroed one.
    #[test]
    fn host_steps_overwrite_their_recycled_buffers() {
        let (c, h, w, s) = (3, 6, 5, 2);
        let x: Vec<f32> = (0..c * s * h * w)
            .map(|i| (i as f32 * 0.37).sin())
            .collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let nan = |len| vec![f32::NAN; len];
        for (k, padding) in [(3, 0), (3, 1), (2, 0), (1, 0)] {
            let (oh, ow) = (h + 2 * padding + 1 - k, w + 2 * padding + 1 - k);
            let len = c * k * k * s * oh * ow;
            let zeroed = im2col(&x, (c, h, w), s, (k, padding), vec![0.0; len]);
            let reused = im2col(&x, (c, h, w), s, (k, padding), nan(len));
            assert_eq!(
                bits(&reused),
                bits(&zeroed),
                "im2col k={k} padding={padding}"
            );
        }
        let len = c * s * (h / 2) * (w / 2);
        let pooled = max_pool2(&x, (c, h, w), s, vec![0.0; len]);
        assert_eq!(bits(&max_pool2(&x, (c, h, w), s, nan(len))), bits(&pooled));
        for flatten in [false, true] {
            let zeroed = regroup(&x, s, h * w, flatten, vec![0.0; x.len()]);
            let reused = regroup(&x, s, h * w, flatten, nan(x.len()));
            assert_eq!(bits(&reused), bits(&zeroed), "regroup flatten={flatten}");
        }
    }
}
