//! A minimal SIMD abstraction: the kernels are written once against [`Simd`] and instantiated per
//! ISA inside `#[target_feature]` functions (see `cpu::dispatch`). Every method is
//! `#[inline(always)]` so that it is compiled with the caller's target features.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Vector operations on f32 lanes.
///
/// # Safety
/// Implementations for an ISA may only be called where the CPU supports that ISA (guaranteed by
/// the dispatch, which selects them after run-time detection), and pointers must be valid for
/// `LANES` reads or writes.
pub(crate) unsafe trait Simd {
    /// f32 lanes per vector.
    const LANES: usize;
    /// The vector type.
    type V: Copy;
    /// All zeros.
    unsafe fn zero() -> Self::V;
    /// `x` in every lane.
    unsafe fn splat(x: f32) -> Self::V;
    /// `(p[0] in every lane, p[1] in every lane)`: one 8-byte load and two in-register
    /// shuffles instead of two broadcast loads (the kernels are bound by loads).
    unsafe fn splat_pair(p: *const f32) -> (Self::V, Self::V);
    /// Unaligned load of `LANES` floats.
    unsafe fn load(p: *const f32) -> Self::V;
    /// Unaligned store of `LANES` floats.
    unsafe fn store(p: *mut f32, v: Self::V);
    /// The first `count < LANES` floats from `p`, zeros in the other lanes; nothing past them
    /// is read (a masked load, so a partial tile costs no `memcpy` call).
    unsafe fn load_partial(p: *const f32, count: usize) -> Self::V;
    /// Stores the first `count < LANES` lanes of `v` at `p`; nothing past them is written.
    unsafe fn store_partial(p: *mut f32, v: Self::V, count: usize);
    /// `acc + a · b` (fused where the ISA has FMA).
    unsafe fn fma(acc: Self::V, a: Self::V, b: Self::V) -> Self::V;
    /// `a · b + acc` rounded once on every ISA, [`Scalar`]'s included (through `f32::mul_add`,
    /// in software where the CPU has no FMA), so that code written with it gives the same bits
    /// at every ISA.
    unsafe fn mul_add(a: Self::V, b: Self::V, acc: Self::V) -> Self::V;
    /// `a + b`.
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// Per lane `x < 0 ? 0 : x` (so −0 and NaN stay as they are).
    unsafe fn relu(x: Self::V) -> Self::V;
    /// Per lane `a > b ? a : b` (so `b` where either is NaN).
    unsafe fn max(a: Self::V, b: Self::V) -> Self::V;
    /// Per lane `√x`, correctly rounded.
    unsafe fn sqrt(x: Self::V) -> Self::V;
    /// `a − b`.
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
    /// `a · b` (rounded once, never fused with a neighbouring add).
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    /// `a / b`, correctly rounded.
    unsafe fn div(a: Self::V, b: Self::V) -> Self::V;
    /// Per lane `x` clamped to `[lo, hi]`; NaN stays NaN.
    unsafe fn clamp(x: Self::V, lo: f32, hi: f32) -> Self::V;
    /// Per lane `2ⁿ` from `t = n + 1.5 · 2²³` for an integral `n` in `[−126, 127]`: t's low
    /// mantissa bits hold n, and `n + 127` is the biased exponent of 2ⁿ.
    unsafe fn pow2_of_shifted(t: Self::V) -> Self::V;
}

/// The `len ≤ LANES` floats at `p` (zeros in the other lanes; nothing past them read). A
/// function, not a closure: a closure is compiled without the caller's target features, and
/// every intrinsic in it would become a call.
///
/// # Safety
/// `S`'s ISA is available; `p` is valid for `len` reads.
#[inline(always)]
pub(crate) unsafe fn load_n<S: Simd>(p: *const f32, len: usize) -> S::V {
    // SAFETY: the caller's contract.
    unsafe {
        if len == S::LANES {
            S::load(p)
        } else {
            S::load_partial(p, len)
        }
    }
}

/// Stores the first `len ≤ LANES` lanes of `x` at `p` (nothing past them written).
///
/// # Safety
/// `S`'s ISA is available; `p` is valid for `len` writes.
#[inline(always)]
pub(crate) unsafe fn store_n<S: Simd>(p: *mut f32, x: S::V, len: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        if len == S::LANES {
            S::store(p, x)
        } else {
            S::store_partial(p, x, len)
        }
    }
}

/// The bits of `1.5 · 2²³` as an f32: `n + 1.5 · 2²³` has the bits `SHIFTED_ZERO + n` for
/// `|n| < 2²²`.
const SHIFTED_ZERO: i32 = 0x4B40_0000;

/// Scalar code, always available.
pub(crate) struct Scalar;

// SAFETY: plain f32 arithmetic; callers guarantee the pointers are valid for one float.
unsafe impl Simd for Scalar {
    const LANES: usize = 1;
    type V = f32;
    #[inline(always)]
    unsafe fn zero() -> f32 {
        0.0
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> f32 {
        x
    }
    #[inline(always)]
    unsafe fn splat_pair(p: *const f32) -> (f32, f32) {
        // SAFETY: the caller guarantees `p` is valid for two reads.
        unsafe { (p.read_unaligned(), p.add(1).read_unaligned()) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> f32 {
        // SAFETY: the caller guarantees `p` is valid for one read.
        unsafe { p.read_unaligned() }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: f32) {
        // SAFETY: the caller guarantees `p` is valid for one write.
        unsafe { p.write_unaligned(v) }
    }
    #[inline(always)]
    unsafe fn load_partial(_: *const f32, _: usize) -> f32 {
        0.0 // count < 1
    }
    #[inline(always)]
    unsafe fn store_partial(_: *mut f32, _: f32, _: usize) {}
    #[inline(always)]
    unsafe fn fma(acc: f32, a: f32, b: f32) -> f32 {
        acc + a * b
    }
    #[inline(always)]
    unsafe fn mul_add(a: f32, b: f32, acc: f32) -> f32 {
        a.mul_add(b, acc)
    }
    #[inline(always)]
    unsafe fn add(a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    unsafe fn relu(x: f32) -> f32 {
        if x < 0.0 {
            0.0
        } else {
            x
        }
    }
    #[inline(always)]
    unsafe fn max(a: f32, b: f32) -> f32 {
        if a > b {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    unsafe fn sqrt(x: f32) -> f32 {
        x.sqrt()
    }
    #[inline(always)]
    unsafe fn sub(a: f32, b: f32) -> f32 {
        a - b
    }
    #[inline(always)]
    unsafe fn mul(a: f32, b: f32) -> f32 {
        a * b
    }
    #[inline(always)]
    unsafe fn div(a: f32, b: f32) -> f32 {
        a / b
    }
    #[inline(always)]
    unsafe fn clamp(x: f32, lo: f32, hi: f32) -> f32 {
        // As the vector ISAs' `min(hi, max(lo, x))`, which return their second operand when
        // either is NaN.
        let x = if lo > x { lo } else { x };
        if hi < x {
            hi
        } else {
            x
        }
    }
    #[inline(always)]
    unsafe fn pow2_of_shifted(t: f32) -> f32 {
        // Wrapping, as the vector ISAs' integer lanes (only a NaN t gets near the ends).
        f32::from_bits(((t.to_bits() as i32).wrapping_sub(SHIFTED_ZERO - 127) << 23) as u32)
    }
}

/// AVX2 + FMA, 8 lanes.
#[cfg(target_arch = "x86_64")]
pub(crate) struct Avx2;

// SAFETY: only instantiated inside functions compiled with `avx2,fma` and selected after
// detecting both; pointers are valid for 8 floats by the caller's contract.
#[cfg(target_arch = "x86_64")]
unsafe impl Simd for Avx2 {
    const LANES: usize = 8;
    type V = __m256;
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        // SAFETY: AVX is available (see the impl's contract).
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m256 {
        // SAFETY: AVX is available.
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn splat_pair(p: *const f32) -> (__m256, __m256) {
        // SAFETY: AVX is available and `p` is valid for two reads (8 bytes, any alignment).
        unsafe {
            let d = _mm256_castpd_ps(_mm256_broadcast_sd(&p.cast::<f64>().read_unaligned()));
            (
                _mm256_permute_ps::<0b0000_0000>(d),
                _mm256_permute_ps::<0b0101_0101>(d),
            )
        }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        // SAFETY: AVX is available and `p` is valid for 8 reads.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        // SAFETY: AVX is available and `p` is valid for 8 writes.
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const f32, count: usize) -> __m256 {
        // SAFETY: AVX2 is available; the masked-off lanes are neither read nor faulted on.
        unsafe { _mm256_maskload_ps(p, avx2_mask(count)) }
    }
    #[inline(always)]
    unsafe fn store_partial(p: *mut f32, v: __m256, count: usize) {
        // SAFETY: AVX2 is available; the masked-off lanes are not written.
        unsafe { _mm256_maskstore_ps(p, avx2_mask(count), v) }
    }
    #[inline(always)]
    unsafe fn fma(acc: __m256, a: __m256, b: __m256) -> __m256 {
        // SAFETY: FMA is available.
        unsafe { _mm256_fmadd_ps(a, b, acc) }
    }
    #[inline(always)]
    unsafe fn mul_add(a: __m256, b: __m256, acc: __m256) -> __m256 {
        // SAFETY: as `fma`, which is fused on this ISA.
        unsafe { Self::fma(acc, a, b) }
    }
    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX is available.
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn relu(x: __m256) -> __m256 {
        // SAFETY: AVX is available. `max(0, x)` returns its second operand, x, unless 0 > x:
        // for x = −0 and for NaN too, as `x < 0 ? 0 : x` does.
        unsafe { _mm256_max_ps(_mm256_setzero_ps(), x) }
    }
    #[inline(always)]
    unsafe fn max(a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX is available. `max(a, b)` is `a > b ? a : b`.
        unsafe { _mm256_max_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn sqrt(x: __m256) -> __m256 {
        // SAFETY: AVX is available.
        unsafe { _mm256_sqrt_ps(x) }
    }
    #[inline(always)]
    unsafe fn sub(a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX is available.
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn mul(a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX is available.
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn div(a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX is available.
        unsafe { _mm256_div_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn clamp(x: __m256, lo: f32, hi: f32) -> __m256 {
        // SAFETY: AVX is available. `max` and `min` return their second operand, x, when it
        // is NaN.
        unsafe { _mm256_min_ps(_mm256_set1_ps(hi), _mm256_max_ps(_mm256_set1_ps(lo), x)) }
    }
    #[inline(always)]
    unsafe fn pow2_of_shifted(t: __m256) -> __m256 {
        // SAFETY: AVX2 is available; as Scalar::pow2_of_shifted per lane.
        unsafe {
            let bias = _mm256_set1_epi32(127 - SHIFTED_ZERO);
            let e = _mm256_add_epi32(_mm256_castps_si256(t), bias);
            _mm256_castsi256_ps(_mm256_slli_epi32::<23>(e))
        }
    }
}

/// All ones in the lanes below `count`, for AVX2's masked loads and stores.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn avx2_mask(count: usize) -> __m256i {
    // SAFETY: only called from `Avx2`'s methods, where AVX2 is available.
    unsafe {
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(count as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        )
    }
}

/// AVX-512F + FMA, 16 lanes.
#[cfg(target_arch = "x86_64")]
pub(crate) struct Avx512;

// SAFETY: only instantiated inside functions compiled with `avx512f,fma` and selected after
// detecting both; pointers are valid for 16 floats by the caller's contract.
#[cfg(target_arch = "x86_64")]
unsafe impl Simd for Avx512 {
    const LANES: usize = 16;
    type V = __m512;
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        // SAFETY: AVX-512F is available.
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        // SAFETY: AVX-512F is available.
        unsafe { _mm512_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn splat_pair(p: *const f32) -> (__m512, __m512) {
        // SAFETY: AVX-512F is available and `p` is valid for two reads (8 bytes, any alignment).
        unsafe {
            let d = _mm512_castpd_ps(_mm512_set1_pd(p.cast::<f64>().read_unaligned()));
            (
                _mm512_permute_ps::<0b0000_0000>(d),
                _mm512_permute_ps::<0b0101_0101>(d),
            )
        }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        // SAFETY: AVX-512F is available and `p` is valid for 16 reads.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        // SAFETY: AVX-512F is available and `p` is valid for 16 writes.
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const f32, count: usize) -> __m512 {
        // SAFETY: AVX-512F is available; the masked-off lanes are neither read nor faulted on.
        unsafe { _mm512_maskz_loadu_ps(((1u32 << count) - 1) as __mmask16, p) }
    }
    #[inline(always)]
    unsafe fn store_partial(p: *mut f32, v: __m512, count: usize) {
        // SAFETY: AVX-512F is available; the masked-off lanes are not written.
        unsafe { _mm512_mask_storeu_ps(p, ((1u32 << count) - 1) as __mmask16, v) }
    }
    #[inline(always)]
    unsafe fn fma(acc: __m512, a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F is available.
        unsafe { _mm512_fmadd_ps(a, b, acc) }
    }
    #[inline(always)]
    unsafe fn mul_add(a: __m512, b: __m512, acc: __m512) -> __m512 {
        // SAFETY: as `fma`, which is fused on this ISA.
        unsafe { Self::fma(acc, a, b) }
    }
    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F is available.
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn relu(x: __m512) -> __m512 {
        // SAFETY: AVX-512F is available; as Avx2::relu.
        unsafe { _mm512_max_ps(_mm512_setzero_ps(), x) }
    }
    #[inline(always)]
    unsafe fn max(a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F is available. `max(a, b)` is `a > b ? a : b`.
        unsafe { _mm512_max_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn sqrt(x: __m512) -> __m512 {
        // SAFETY: AVX-512F is available.
        unsafe { _mm512_sqrt_ps(x) }
    }
    #[inline(always)]
    unsafe fn sub(a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F is available.
        unsafe { _mm512_sub_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn mul(a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F is available.
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn div(a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F is available.
        unsafe { _mm512_div_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn clamp(x: __m512, lo: f32, hi: f32) -> __m512 {
        // SAFETY: AVX-512F is available; as Avx2::clamp.
        unsafe { _mm512_min_ps(_mm512_set1_ps(hi), _mm512_max_ps(_mm512_set1_ps(lo), x)) }
    }
    #[inline(always)]
    unsafe fn pow2_of_shifted(t: __m512) -> __m512 {
        // SAFETY: AVX-512F is available; as Scalar::pow2_of_shifted per lane.
        unsafe {
            let bias = _mm512_set1_epi32(127 - SHIFTED_ZERO);
            let e = _mm512_add_epi32(_mm512_castps_si512(t), bias);
            _mm512_castsi512_ps(_mm512_slli_epi32::<23>(e))
        }
    }
}
