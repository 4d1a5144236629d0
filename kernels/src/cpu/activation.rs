//! The activations a product's epilogue can apply: ReLU and GELU (candle's tanh
//! approximation, the transformer MLP's). GELU is written once against [`Simd`] from lane-wise
//! operations only (no FMA, no lane crossing), so the scalar, AVX2 and AVX-512 code compute the
//! same bits: fused into a kernel's store or applied to a row afterwards, a value comes out the
//! same.

use super::simd::{Scalar, Simd};
use crate::Isa;

/// What follows a product's bias, per element.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    /// Nothing.
    #[default]
    None,
    /// `x < 0 ? 0 : x` (−0 and NaN stay as they are).
    Relu,
    /// `0.5 · x · (1 + tanh(u))`, `u = √(2/π) · (x + 0.044715 · x³)`, computed as
    /// `x / (1 + e^(−2u))`: within ~1e-6 of the tanh form (tested); NaN stays NaN.
    Gelu,
}

/// `−2 · √(2/π)`: GELU's `x / (1 + e^(c · (x + A · x³)))`.
const GELU_C: f32 = -1.595_769_2;
/// GELU's cubic coefficient.
const GELU_A: f32 = 0.044_715;

/// GELU of each lane of `x` (see [`Activation::Gelu`]).
///
/// # Safety
/// `S`'s ISA is available (as for every [`Simd`] method).
#[inline(always)]
pub(crate) unsafe fn gelu<S: Simd>(x: S::V) -> S::V {
    // SAFETY: the caller guarantees `S`'s ISA.
    unsafe {
        let cube = S::mul(S::mul(S::mul(x, x), S::splat(GELU_A)), x);
        let e = exp::<S>(S::mul(S::add(x, cube), S::splat(GELU_C)));
        S::div(x, S::add(S::splat(1.0), e))
    }
}

/// `e^x` per lane: `x = n · ln 2 + r` with `|r| ≤ ln 2 / 2` (n rounded by adding and
/// subtracting 1.5 · 2²³), `e^r` by Cephes' `expf` polynomial, `2ⁿ` in the exponent bits. Relative error ≈ 2e-7. x is clamped to
/// `[−87, 88.7]`: below, the result stays a normal f32 (~1.6e-38); from 88.38 on, n = 128 and
/// the result is +∞ (a little early: e^x overflows f32 from 88.72). NaN stays NaN.
///
/// # Safety
/// `S`'s ISA is available.
#[inline(always)]
pub(super) unsafe fn exp<S: Simd>(x: S::V) -> S::V {
    const SHIFT: f32 = 12_582_912.0; // 1.5 · 2²³
    const P: [f32; 6] = [
        1.987_569_1e-4,
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        0.166_666_65,
        0.5,
    ];
    // SAFETY: the caller guarantees `S`'s ISA.
    unsafe {
        let x = S::clamp(x, -87.0, 88.7);
        let t = S::add(
            S::mul(x, S::splat(std::f32::consts::LOG2_E)),
            S::splat(SHIFT),
        );
        let n = S::sub(t, S::splat(SHIFT));
        // ln 2 in two parts (Cody–Waite), so that r keeps its low bits.
        let r = S::sub(x, S::mul(n, S::splat(0.693_359_4)));
        let r = S::add(r, S::mul(n, S::splat(2.121_944_4e-4)));
        let mut p = S::splat(P[0]);
        for &c in &P[1..] {
            p = S::add(S::mul(p, r), S::splat(c));
        }
        let p = S::add(S::add(S::mul(S::mul(p, r), r), r), S::splat(1.0));
        S::mul(p, S::pow2_of_shifted(t))
    }
}

/// `e^x` of one value, the same bits as every lane of the vector code; inlined, loops over it
/// vectorise (no libm call).
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    // SAFETY: scalar code needs no ISA.
    unsafe { exp::<Scalar>(x) }
}

/// GELU of one value, the same bits as every lane of the vector code.
#[inline(always)]
pub fn gelu_f32(x: f32) -> f32 {
    // SAFETY: scalar code needs no ISA.
    unsafe { gelu::<Scalar>(x) }
}

/// `activation` applied to every value of `v` (a row or part of one) in place, `S::LANES` at a
/// time with a masked tail.
///
/// # Safety
/// `S`'s ISA is available.
#[inline(always)]
pub(crate) unsafe fn apply<S: Simd>(v: &mut [f32], activation: Activation) {
    let (len, p) = (v.len(), v.as_mut_ptr());
    let mut at = 0;
    // SAFETY: the caller guarantees `S`'s ISA; full vectors lie inside `v`, and the tail is
    // read and written through masks of its `len − at < LANES` floats.
    unsafe {
        while at + S::LANES <= len {
            S::store(p.add(at), activate::<S>(S::load(p.add(at)), activation));
            at += S::LANES;
        }
        if at < len {
            let tail = activate::<S>(S::load_partial(p.add(at), len - at), activation);
            S::store_partial(p.add(at), tail, len - at);
        }
    }
}

/// `activation` of each lane of `x`. A plain function, not a closure or a function pointer: the
/// code must be inlined into the caller's `#[target_feature]` function, or every intrinsic
/// becomes a call (GELU fused that way ran 6–7× slower than the product it followed).
///
/// # Safety
/// `S`'s ISA is available.
#[inline(always)]
pub(crate) unsafe fn activate<S: Simd>(x: S::V, activation: Activation) -> S::V {
    // SAFETY: the caller guarantees `S`'s ISA.
    unsafe {
        match activation {
            Activation::None => x,
            Activation::Relu => S::relu(x),
            Activation::Gelu => gelu::<S>(x),
        }
    }
}

/// [`apply`] at `isa`'s width (the epilogue's path for rows a kernel did not finish itself:
/// dense products and matrix-vector products).
pub(crate) fn apply_at(isa: Isa, v: &mut [f32], activation: Activation) {
    match (isa, activation) {
        (_, Activation::None) => {}
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa()` returns Avx512 only when the CPU reports avx512f and fma.
        (Isa::Avx512, _) => unsafe { apply_avx512(v, activation) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa()` returns Avx2 only when the CPU reports avx2 and fma.
        (Isa::Avx2, _) => unsafe { apply_avx2(v, activation) },
        // SAFETY: scalar code needs no ISA.
        _ => unsafe { apply::<Scalar>(v, activation) },
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn apply_avx2(v: &mut [f32], activation: Activation) {
    // SAFETY: compiled for and selected on AVX2.
    unsafe { apply::<super::simd::Avx2>(v, activation) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn apply_avx512(v: &mut [f32], activation: Activation) {
    // SAFETY: compiled for and selected on AVX-512F.
    unsafe { apply::<super::simd::Avx512>(v, activation) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GELU's tanh form in f64, the formula candle's `gelu` computes.
    fn gelu_f64(x: f64) -> f64 {
        let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
        0.5 * x * (1.0 + u.tanh())
    }

    /// Values across GELU's and exp's ranges, the ends and the special values included.
    fn probes() -> Vec<f32> {
        let mut v: Vec<f32> = (-4000..=4000).map(|i| i as f32 * 0.005).collect();
        v.extend((-300..=300).map(|i| i as f32 * 0.37));
        v.extend([
            0.0,
            -0.0,
            1e-30,
            -1e-30,
            f32::MIN_POSITIVE,
            f32::MAX,
            f32::MIN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ]);
        v
    }

    /// `exp_f32` is within 3e-7 of e^x (relative) from −87 to 88.3, keeps NaN, stays a positive
    /// normal f32 below −87 and is +∞ above 88.4.
    #[test]
    fn exp_f32_is_accurate_and_keeps_nan() {
        for i in -8700..=8830 {
            let x = i as f32 * 0.01;
            let (got, want) = (exp_f32(x) as f64, (x as f64).exp());
            assert!(
                ((got - want) / want).abs() < 3e-7,
                "exp({x}) = {got}, want {want}"
            );
        }
        assert!(exp_f32(f32::NAN).is_nan());
        assert_eq!(exp_f32(88.4), f32::INFINITY);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert!(exp_f32(-1000.0).is_normal() && exp_f32(f32::NEG_INFINITY) > 0.0);
    }

    /// `gelu_f32` is within 1e-6 of the f64 tanh form relative to max(|x|, 1e-3) (so that
    /// values near GELU's zero at x → −∞ are judged against their scale), exactly 0 at 0, +∞
    /// at +∞, and NaN at NaN and at −∞ (as the tanh form's `−∞ · 0`).
    #[test]
    fn gelu_f32_follows_the_tanh_form() {
        for x in probes().into_iter().filter(|x| x.is_finite()) {
            let (got, want) = (gelu_f32(x) as f64, gelu_f64(x as f64));
            let scale = (x as f64).abs().max(1e-3);
            assert!(
                (got - want).abs() / scale < 1e-6,
                "gelu({x}) = {got}, want {want}"
            );
        }
        assert_eq!(gelu_f32(0.0), 0.0);
        assert_eq!(gelu_f32(f32::INFINITY), f32::INFINITY);
        assert!(gelu_f32(f32::NEG_INFINITY).is_nan());
        assert!(gelu_f32(f32::NAN).is_nan());
    }

    /// Every ISA this machine has computes each activation's bits exactly as the scalar code,
    /// at every length (full vectors and masked tails).
    #[test]
    fn every_isa_gives_the_scalar_bits() {
        let probes = probes();
        let mut isas = vec![Isa::Scalar];
        if crate::isa() != Isa::Scalar {
            isas.push(Isa::Avx2);
        }
        if crate::isa() == Isa::Avx512 {
            isas.push(Isa::Avx512);
        }
        for activation in [Activation::Relu, Activation::Gelu] {
            let mut want = probes.clone();
            // SAFETY: scalar code needs no ISA.
            unsafe { apply::<Scalar>(&mut want, activation) };
            for &isa in &isas {
                for len in [0, 1, 7, 15, 16, 17, 33, probes.len()] {
                    let mut got = probes[..len].to_vec();
                    apply_at(isa, &mut got, activation);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&got),
                        bits(&want[..len]),
                        "{isa:?} {activation:?} {len}"
                    );
                }
            }
        }
    }
}
