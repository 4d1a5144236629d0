//! Running host code (the non-GEMM part of a model's pass: bias, activations, normalisation,
//! attention) with the kernels' ISA enabled, so that its loops vectorise at the machine's
//! width instead of the baseline x86-64's SSE2.
//!
//! [`with_isa`] runs a [`HostOp`] from a function compiled with AVX2 + FMA or AVX-512 enabled
//! (as [`isa`] chose, `COTUNE_ISA` included). Code gets those features only where it is inlined
//! into that function, so [`HostOp::run`] and everything it calls that should be widened are
//! `#[inline(always)]` (the technique of pulp's `WithSimd`; a closure would not do: its body is
//! a function of its own, compiled for the baseline, and too large to be inlined). Enabling the
//! features changes no result: Rust never contracts `a * b + c` into an FMA on its own, and
//! LLVM does not reorder float reductions without fast-math, so the widened loops compute the
//! same values in the same order, only more lanes at a time.

#[cfg(target_arch = "x86_64")]
use super::simd::{Avx2, Avx512};
use super::simd::{Scalar, Simd};
use crate::{isa, Isa};

/// Host code to run at the kernels' ISA. Implement [`run`](HostOp::run) with
/// `#[inline(always)]`, and mark what it calls `#[inline(always)]` as deep as the loops that
/// should vectorise.
pub trait HostOp {
    /// What the code returns.
    type Output;
    /// The code.
    fn run(self) -> Self::Output;
}

/// Runs `op` with [`isa`]'s instruction set enabled for the code inlined into it.
#[inline(always)]
pub fn with_isa<Op: HostOp>(op: Op) -> Op::Output {
    match isa() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa()` returns Avx512 only when the CPU reports avx512f and fma (and every
        // CPU with AVX-512F has AVX2).
        Isa::Avx512 => unsafe { avx512(op) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa()` returns Avx2 only when the CPU reports avx2 and fma.
        Isa::Avx2 => unsafe { avx2(op) },
        _ => op.run(),
    }
}

/// Host work cut into parts that may run at the same time (each writes only its own part of
/// the output). Implement [`part`](HostParts::part) with `#[inline(always)]`, as
/// [`HostOp::run`]: each part runs at the kernels' ISA through [`with_isa`].
pub trait HostParts: Sync {
    /// Part `i`.
    fn part(&self, i: usize);
}

/// One part of a [`HostParts`] as a [`HostOp`].
struct Part<'a, Op>(&'a Op, usize);

impl<Op: HostParts> HostOp for Part<'_, Op> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        self.0.part(self.1)
    }
}

/// Runs `op.part(i)` for every `i < parts` at the kernels' ISA, on up to `threads` of the
/// kernels' threads (the caller's included; the same spinning pool as the products, so a pass's
/// host work between two layers wakes nobody). With one thread the parts run in order.
pub fn run_host_parts<Op: HostParts>(op: &Op, parts: usize, threads: usize) {
    if threads <= 1 || parts <= 1 {
        (0..parts).for_each(|i| with_isa(Part(op, i)));
        return;
    }
    super::pool::run_parts(parts, threads, &|i| with_isa(Part(op, i)));
}

/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn avx512<Op: HostOp>(op: Op) -> Op::Output {
    op.run()
}

/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2<Op: HostOp>(op: Op) -> Op::Output {
    op.run()
}

/// Host code written on the kernels' explicit vectors ([`Simd`]) rather than left to the
/// vectoriser: a transformer's attention heads and LayerNorm. [`run_vectors_at`] runs it.
pub(crate) trait VectorOp {
    /// The code at `S`'s width.
    ///
    /// # Safety
    /// `S`'s ISA is available.
    unsafe fn run<S: Simd>(self);
}

/// Runs `op` at `at`, or at [`isa`]'s width where `at` is wider, each ISA's instance in a
/// function of its own compiled with that ISA's features (a narrower `at` is how tests check
/// the other ISAs on one machine).
pub(crate) fn run_vectors_at<Op: VectorOp>(at: Isa, op: Op) {
    let at = if at.lanes() <= isa().lanes() {
        at
    } else {
        isa()
    };
    match at {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa()`, no narrower than `at`, reports avx512f and fma.
        Isa::Avx512 => unsafe { vectors_avx512(op) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `isa()`, no narrower than `at`, reports avx2 and fma.
        Isa::Avx2 => unsafe { vectors_avx2(op) },
        // SAFETY: scalar code needs no ISA.
        _ => unsafe { op.run::<Scalar>() },
    }
}

/// # Safety
/// The CPU supports AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn vectors_avx512<Op: VectorOp>(op: Op) {
    // SAFETY: compiled for and selected on AVX-512F.
    unsafe { op.run::<Avx512>() }
}

/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn vectors_avx2<Op: VectorOp>(op: Op) {
    // SAFETY: compiled for and selected on AVX2.
    unsafe { op.run::<Avx2>() }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sum<'a>(&'a [f32], &'a mut usize);

    impl HostOp for Sum<'_> {
        type Output = f32;
        #[inline(always)]
        fn run(self) -> f32 {
            *self.1 += 1;
            self.0.iter().sum()
        }
    }

    struct Squares<'a>(Vec<std::sync::Mutex<&'a mut [f32]>>);

    impl HostParts for Squares<'_> {
        #[inline(always)]
        fn part(&self, i: usize) {
            let mut mine = self.0[i].lock().unwrap();
            mine.iter_mut().for_each(|x| *x *= *x);
        }
    }

    #[test]
    fn every_part_runs_once_at_any_thread_count() {
        for threads in [1, 2, 3] {
            let mut x: Vec<f32> = (0..1003).map(|i| i as f32).collect();
            let parts = Squares(x.chunks_mut(100).map(std::sync::Mutex::new).collect());
            run_host_parts(&parts, parts.0.len(), threads);
            drop(parts);
            assert!(
                x.iter().enumerate().all(|(i, &v)| v == (i * i) as f32),
                "{threads}"
            );
        }
    }

    #[test]
    fn the_op_runs_once_and_its_value_is_the_baselines() {
        let x: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut calls = 0;
        let got = with_isa(Sum(&x, &mut calls));
        assert_eq!(calls, 1);
        // The same additions in the same order: bit-identical.
        assert_eq!(got.to_bits(), x.iter().sum::<f32>().to_bits());
    }
}
