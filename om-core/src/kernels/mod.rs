//! Kernels: the arithmetic behind the operators. Kernels take slices and explicit
//! [`Settings`](crate::compute::Settings); they never read global state, never record
//! autograd history, and take every buffer they need from the pool.
//!
//! Element-wise work runs on the lane loops ([`lanes`]), the row-wise softmax
//! ([`softmax`]) and the fixed-polynomial elementary functions behind them
//! (`transcendentals`), all written once, generic over `simd::Lanes`, and instantiated per
//! instruction set by `dispatch`, which hands them the set's capability token (a value only
//! run-time detection makes, so no vector code can run on a CPU without its instructions). Because the lane operations are single IEEE operations
//! (never a fused multiply-add), every instantiation gives the scalar bits.

pub mod alloc_count;
pub(crate) mod basic;
pub mod chunks;
pub mod conv;
pub mod elementwise;
pub mod fused;
pub mod gates;
pub mod gemm;
pub mod lanes;
pub mod math;
pub mod math64;
pub mod norm;
pub mod parallel;
pub mod pooling;
pub mod reduce;
pub mod scratch;
pub(crate) mod simd;
pub mod softmax;
pub(crate) mod transcendentals;
pub mod transpose;

#[cfg(test)]
mod ulp_tests;

use crate::compute::{KernelPath, Mode};
use simd::Lanes;

/// The canonical quiet NaN written by exact mode.
pub const CANONICAL_NAN: u32 = 0x7fc0_0000;

/// A piece of work generic over the lane type; [`dispatch`] picks the instantiation.
pub(crate) trait LaneTask {
    type Output;
    /// Runs the work with lanes `L`, given the token proving that this CPU runs them (the
    /// only way to make a vector; see `simd`). Implementations are `#[inline(always)]` so
    /// that they are compiled inside the `#[target_feature]` function that calls them.
    fn run<L: Lanes>(self, isa: L::Isa) -> Self::Output;
}

/// Runs `task` on `path`'s lane type, or on scalar lanes if the CPU lacks `path`.
pub(crate) fn dispatch<T: LaneTask>(path: KernelPath, task: T) -> T::Output {
    match path {
        #[cfg(target_arch = "x86_64")]
        KernelPath::Sse => {
            if let Some(isa) = simd::Sse2::detect() {
                // SAFETY: the token exists, so run-time detection found SSE2 on this CPU.
                return unsafe { isa::sse(task, isa) };
            }
        }
        #[cfg(target_arch = "x86_64")]
        KernelPath::Avx2 => {
            if let Some(isa) = simd::Avx2::detect() {
                // SAFETY: the token exists, so run-time detection found AVX2 on this CPU.
                return unsafe { isa::avx2(task, isa) };
            }
        }
        #[cfg(target_arch = "x86_64")]
        KernelPath::Avx512 => {
            if let Some(isa) = simd::Avx512::detect() {
                // SAFETY: the token exists, so run-time detection found AVX-512F on this CPU.
                return unsafe { isa::avx512(task, isa) };
            }
        }
        #[cfg(target_arch = "aarch64")]
        KernelPath::Neon => {
            if let Some(isa) = simd::Neon::detect() {
                // SAFETY: the token exists, so run-time detection found NEON on this CPU.
                return unsafe { isa::neon(task, isa) };
            }
        }
        _ => {}
    }
    task.run::<f32>(simd::Scalar)
}

/// In exact mode, replaces any NaN lane by [`CANONICAL_NAN`].
#[inline(always)]
pub(crate) fn finish<L: Lanes>(v: L, mode: Mode) -> L {
    match mode {
        Mode::Exact => L::select(v.is_nan(), L::splat(v.isa(), f32::from_bits(CANONICAL_NAN)), v),
        Mode::Fast => v,
    }
}

/// One `#[target_feature]` entry point per instruction set (FMA is never enabled), each
/// taking the set's token (which is what makes calling it sound).
mod isa {
    use super::simd;
    use super::LaneTask;

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "sse2")]
    pub(super) fn sse<T: LaneTask>(task: T, isa: simd::Sse2) -> T::Output {
        task.run::<simd::F32x4>(isa)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    pub(super) fn avx2<T: LaneTask>(task: T, isa: simd::Avx2) -> T::Output {
        task.run::<simd::F32x8>(isa)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    pub(super) fn avx512<T: LaneTask>(task: T, isa: simd::Avx512) -> T::Output {
        task.run::<simd::F32x16>(isa)
    }

    #[cfg(target_arch = "aarch64")]
    #[target_feature(enable = "neon")]
    pub(super) fn neon<T: LaneTask>(task: T, isa: simd::Neon) -> T::Output {
        task.run::<simd::F32x4>(isa)
    }
}
