//! The [`Lanes`] trait: a vector of `f32` lanes with exactly-rounded IEEE operations.
//!
//! Implemented for `f32` (one lane, the scalar reference), SSE `__m128`, AVX2 `__m256`,
//! AVX-512 `__m512` and NEON `float32x4_t`. Every operation is either one correctly
//! rounded IEEE-754 operation per lane (add, sub, mul, div, sqrt, int-to-float of small
//! integers), or exact (compares, selects, bit casts, integer adds and shifts). There is
//! no fused multiply-add and no approximate instruction (`rcp`, `rsqrt`), so any function
//! written once over `L: Lanes` gives the same bits at every width.
//!
//! # Safety by type
//! The vector implementations call intrinsics that need their instruction set. The right
//! to run them is a value: each instruction set has a zero-sized token (`Sse2`, `Avx`,
//! `Avx2`, `Avx512`, `Neon`; [`Scalar`] for the `f32` reference) that only its `detect`
//! makes, after checking the CPU at run time (the design of the `pulp` crate). This module
//! is the only place that asks the CPU (`is_x86_feature_detected!`,
//! `is_aarch64_feature_detected!`; `tests/unsafe_audit.rs` checks it), and
//! [`KernelPath::is_supported`] is answered here ([`path_supported`]). Every ISA path takes
//! its token: the lane loops (through `kernels::dispatch`), the GEMM's register tiles
//! (`gemm/x86.rs`, `gemm/neon.rs`, `gemm/scalar.rs`), the 8×8 transposes of
//! `kernels/transpose.rs` (which the GEMM's packers use), so code that calls one without
//! proof of the feature does not compile. Tokens are zero-sized, so passing them costs no
//! instruction. A wider token yields the narrower ones its detection implies
//! ([`Avx512::avx2`], [`Avx512::avx`], [`Avx2::avx`]).
//!
//! Vectors are
//! private newtypes over the intrinsic types, made only by [`Lanes::splat`],
//! [`Lanes::load`] and [`Lanes::int_splat`], which take the token, or by operations on
//! vectors that already exist. So code holding a vector (or an integer vector made from
//! one) holds proof that the CPU runs its instructions, and every operation is sound
//! wherever it is called; [`super::dispatch`] runs the generic code inside a
//! `#[target_feature]` function only so that it is compiled for the set. Loads and stores
//! index a slice of at least `WIDTH` elements first, so their pointers are always in
//! bounds.

use crate::compute::KernelPath;

/// Wraps one intrinsic call; see the module's safety notes.
macro_rules! intrinsic {
    ($e:expr) => {
        // SAFETY: a vector of this type (or its token) exists, and only the token's
        // `detect` makes one, after finding the instruction set on this CPU at run time
        // (module safety notes); pointer arguments come from slices of at least `WIDTH`
        // elements.
        unsafe { $e }
    };
}

/// The token of the scalar reference path: plain Rust runs on every CPU.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scalar;

/// A vector of `f32` lanes; see the module docs.
pub(crate) trait Lanes: Copy {
    /// Number of `f32` lanes.
    const WIDTH: usize;
    /// Result of a lane-wise comparison.
    type Mask: Copy;
    /// The same lanes seen as `i32`.
    type Int: Copy;
    /// The token proving that this CPU runs the lane type's instructions.
    type Isa: Copy;

    /// The token that the existence of `self` proves.
    fn isa(self) -> Self::Isa;
    /// `v` in every lane.
    fn splat(isa: Self::Isa, v: f32) -> Self;
    /// Loads `s[..WIDTH]` (panics if `s` is shorter).
    fn load(isa: Self::Isa, s: &[f32]) -> Self;
    /// Stores into `s[..WIDTH]` (panics if `s` is shorter).
    fn store(self, s: &mut [f32]);
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    /// Correctly rounded square root (part of the lane vocabulary; no kernel here uses
    /// it yet, the tests check it).
    #[allow(dead_code)]
    fn sqrt(self) -> Self;
    /// `self < o` (false if either is NaN).
    fn lt(self, o: Self) -> Self::Mask;
    /// `self <= o` (false if either is NaN).
    fn le(self, o: Self) -> Self::Mask;
    /// `self == o` (false if either is NaN).
    fn eq(self, o: Self) -> Self::Mask;
    fn is_nan(self) -> Self::Mask;
    /// Per lane: `a` where `m` is set, else `b`.
    fn select(m: Self::Mask, a: Self, b: Self) -> Self;
    /// Whether `m` is set in every lane (lets a kernel skip the work of a `select` operand
    /// that no lane takes; the selected values, hence the bits, are the same).
    fn all(m: Self::Mask) -> bool;
    /// The lanes set in `m` as bits (lane `i` is bit `i`), so that a kernel can visit only
    /// those lanes. The default goes through memory; the x86 and scalar lanes override it.
    #[inline(always)]
    fn bitmask(isa: Self::Isa, m: Self::Mask) -> u32 {
        let mut flags = [0.0f32; 16];
        Self::select(m, Self::splat(isa, 1.0), Self::splat(isa, 0.0)).store(&mut flags);
        flags[..Self::WIDTH].iter().enumerate().fold(0, |bits, (i, &f)| bits | (u32::from(f != 0.0) << i))
    }
    fn to_bits(self) -> Self::Int;
    fn from_bits(i: Self::Int) -> Self;
    fn int_splat(isa: Self::Isa, v: i32) -> Self::Int;
    /// Wrapping `a - b`.
    fn int_sub(a: Self::Int, b: Self::Int) -> Self::Int;
    fn int_and(a: Self::Int, b: Self::Int) -> Self::Int;
    fn int_or(a: Self::Int, b: Self::Int) -> Self::Int;
    fn int_xor(a: Self::Int, b: Self::Int) -> Self::Int;
    /// `a << 23`, moving an integer into the exponent field.
    fn int_shl23(a: Self::Int) -> Self::Int;
    /// Arithmetic `a >> 23`, reading the sign and exponent fields.
    fn int_shr23(a: Self::Int) -> Self::Int;
    /// Converts integers (exact for |a| < 2^24, the only use).
    fn int_to_f32(a: Self::Int) -> Self;

    /// The AVX-512 token when these are AVX-512 lanes (`isa` is then that token), else
    /// `None`: how generic code reaches an AVX-512-only routine (the norms' lockstep sums)
    /// with proof of the instruction set. Resolved at compile time per lane type.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn avx512(isa: Self::Isa) -> Option<Avx512> {
        let _ = isa;
        None
    }

    /// `self > o`.
    #[inline(always)]
    fn gt(self, o: Self) -> Self::Mask {
        o.lt(self)
    }
    /// `self >= o`.
    #[inline(always)]
    fn ge(self, o: Self) -> Self::Mask {
        o.le(self)
    }
    /// Clears the sign bit.
    #[inline(always)]
    fn abs(self) -> Self {
        Self::from_bits(Self::int_and(self.to_bits(), Self::int_splat(self.isa(), 0x7fff_ffff)))
    }
    /// Flips the sign bit (exact IEEE negation).
    #[inline(always)]
    fn neg(self) -> Self {
        Self::from_bits(Self::int_xor(self.to_bits(), Self::int_splat(self.isa(), i32::MIN)))
    }
    /// `|self|` with the sign bit of `sign`.
    #[inline(always)]
    fn copysign(self, sign: Self) -> Self {
        let s = Self::int_and(sign.to_bits(), Self::int_splat(self.isa(), i32::MIN));
        Self::from_bits(Self::int_or(self.abs().to_bits(), s))
    }
    /// `lo` below `lo`, `hi` above `hi`, else `self`; NaN stays NaN.
    #[inline(always)]
    fn clamp(self, lo: f32, hi: f32) -> Self {
        let (lo, hi) = (Self::splat(self.isa(), lo), Self::splat(self.isa(), hi));
        Self::select(self.lt(lo), lo, Self::select(hi.lt(self), hi, self))
    }
}

impl Lanes for f32 {
    const WIDTH: usize = 1;
    type Mask = bool;
    type Int = i32;
    type Isa = Scalar;

    #[inline(always)]
    fn isa(self) -> Scalar {
        Scalar
    }
    #[inline(always)]
    fn splat(_: Scalar, v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn load(_: Scalar, s: &[f32]) -> Self {
        s[0]
    }
    #[inline(always)]
    fn store(self, s: &mut [f32]) {
        s[0] = self;
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        self - o
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        self * o
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        self / o
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    #[inline(always)]
    fn lt(self, o: Self) -> bool {
        self < o
    }
    #[inline(always)]
    fn le(self, o: Self) -> bool {
        self <= o
    }
    #[inline(always)]
    fn eq(self, o: Self) -> bool {
        self == o
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    #[inline(always)]
    fn select(m: bool, a: Self, b: Self) -> Self {
        if m {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    fn all(m: bool) -> bool {
        m
    }
    #[inline(always)]
    fn bitmask(_: Scalar, m: bool) -> u32 {
        u32::from(m)
    }
    #[inline(always)]
    fn to_bits(self) -> i32 {
        f32::to_bits(self) as i32
    }
    #[inline(always)]
    fn from_bits(i: i32) -> Self {
        f32::from_bits(i as u32)
    }
    #[inline(always)]
    fn int_splat(_: Scalar, v: i32) -> i32 {
        v
    }
    #[inline(always)]
    fn int_sub(a: i32, b: i32) -> i32 {
        a.wrapping_sub(b)
    }
    #[inline(always)]
    fn int_and(a: i32, b: i32) -> i32 {
        a & b
    }
    #[inline(always)]
    fn int_or(a: i32, b: i32) -> i32 {
        a | b
    }
    #[inline(always)]
    fn int_xor(a: i32, b: i32) -> i32 {
        a ^ b
    }
    #[inline(always)]
    fn int_shl23(a: i32) -> i32 {
        a.wrapping_shl(23)
    }
    #[inline(always)]
    fn int_shr23(a: i32) -> i32 {
        a >> 23
    }
    #[inline(always)]
    fn int_to_f32(a: i32) -> Self {
        a as f32
    }
}

/// Declares an instruction set's token: zero-sized, made only by its `detect`, which runs
/// the run-time test `$found` (the features `$feature` names).
macro_rules! token {
    ($tok:ident, $feature:literal, $found:expr) => {
        #[doc = concat!("Proof that this CPU runs ", $feature, ": made only by [`", stringify!($tok), "::detect`]")]
        /// (zero-sized: passing it costs nothing). See the module's safety notes.
        #[derive(Clone, Copy, Debug)]
        pub(crate) struct $tok(());

        impl $tok {
            #[doc = concat!("The token, if run-time detection finds ", $feature, " on this CPU (std caches")]
            /// the answer: a load and a test per call).
            #[inline]
            pub(crate) fn detect() -> Option<$tok> {
                ($found).then_some($tok(()))
            }
        }
    };
}

/// Declares an instruction set's token (see [`token!`]) and the private `f32` and `i32`
/// vector newtypes that only the token or an existing vector makes.
macro_rules! isa_types {
    ($tok:ident, $feature:literal, $found:expr, $f:ident($fraw:ty), $i:ident($iraw:ty)) => {
        token!($tok, $feature, $found);

        #[doc = concat!("`f32` lanes; only a [`", stringify!($tok), "`] (through [`Lanes::splat`] or")]
        /// [`Lanes::load`]) or an operation on such vectors makes one.
        #[derive(Clone, Copy)]
        #[repr(transparent)]
        pub(crate) struct $f($fraw);

        #[doc = concat!("`i32` lanes, made like [`", stringify!($f), "`].")]
        #[derive(Clone, Copy)]
        #[repr(transparent)]
        pub(crate) struct $i($iraw);
    };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Lanes;
    use std::arch::is_x86_feature_detected as found;
    use std::arch::x86_64::*;

    isa_types!(Sse2, "SSE2", found!("sse2"), F32x4(__m128), I32x4(__m128i));
    token!(Avx, "AVX", found!("avx"));
    isa_types!(Avx2, "AVX, AVX2 and FMA", found!("avx") && found!("avx2") && found!("fma"), F32x8(__m256), I32x8(__m256i));
    isa_types!(
        Avx512,
        "AVX-512 F, VL, DQ and BW, AVX, AVX2 and FMA",
        found!("avx512f")
            && found!("avx512vl")
            && found!("avx512dq")
            && found!("avx512bw")
            && found!("avx")
            && found!("avx2")
            && found!("fma"),
        F32x16(__m512),
        I32x16(__m512i)
    );

    impl Avx2 {
        /// The AVX token: [`Avx2::detect`] found AVX.
        #[inline(always)]
        #[allow(dead_code)]
        pub(crate) fn avx(self) -> Avx {
            Avx(())
        }
    }

    impl Avx512 {
        /// The AVX token: [`Avx512::detect`] found AVX.
        #[inline(always)]
        #[allow(dead_code)]
        pub(crate) fn avx(self) -> Avx {
            Avx(())
        }

        /// The AVX2 token: [`Avx512::detect`] found AVX, AVX2 and FMA.
        #[inline(always)]
        #[allow(dead_code)]
        pub(crate) fn avx2(self) -> Avx2 {
            Avx2(())
        }
    }
    impl Lanes for F32x4 {
        const WIDTH: usize = 4;
        type Mask = __m128;
        type Isa = Sse2;
        type Int = I32x4;

        #[inline(always)]
        fn isa(self) -> Sse2 {
            Sse2(())
        }
        #[inline(always)]
        fn splat(_: Self::Isa, v: f32) -> Self {
            Self(intrinsic!(_mm_set1_ps(v)))
        }
        #[inline(always)]
        fn load(_: Self::Isa, s: &[f32]) -> Self {
            let s = &s[..4];
            Self(intrinsic!(_mm_loadu_ps(s.as_ptr())))
        }
        #[inline(always)]
        fn store(self, s: &mut [f32]) {
            let s = &mut s[..4];
            intrinsic!(_mm_storeu_ps(s.as_mut_ptr(), self.0))
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            Self(intrinsic!(_mm_add_ps(self.0, o.0)))
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            Self(intrinsic!(_mm_sub_ps(self.0, o.0)))
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            Self(intrinsic!(_mm_mul_ps(self.0, o.0)))
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            Self(intrinsic!(_mm_div_ps(self.0, o.0)))
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            Self(intrinsic!(_mm_sqrt_ps(self.0)))
        }
        #[inline(always)]
        fn lt(self, o: Self) -> __m128 {
            intrinsic!(_mm_cmplt_ps(self.0, o.0))
        }
        #[inline(always)]
        fn le(self, o: Self) -> __m128 {
            intrinsic!(_mm_cmple_ps(self.0, o.0))
        }
        #[inline(always)]
        fn eq(self, o: Self) -> __m128 {
            intrinsic!(_mm_cmpeq_ps(self.0, o.0))
        }
        #[inline(always)]
        fn is_nan(self) -> __m128 {
            intrinsic!(_mm_cmpunord_ps(self.0, self.0))
        }
        #[inline(always)]
        fn select(m: __m128, a: Self, b: Self) -> Self {
            Self(intrinsic!(_mm_or_ps(_mm_and_ps(m, a.0), _mm_andnot_ps(m, b.0))))
        }
        #[inline(always)]
        fn all(m: __m128) -> bool {
            intrinsic!(_mm_movemask_ps(m)) == 0xf
        }
        #[inline(always)]
        fn bitmask(_: Self::Isa, m: __m128) -> u32 {
            intrinsic!(_mm_movemask_ps(m)) as u32
        }
        #[inline(always)]
        fn to_bits(self) -> I32x4 {
            I32x4(intrinsic!(_mm_castps_si128(self.0)))
        }
        #[inline(always)]
        fn from_bits(i: I32x4) -> Self {
            Self(intrinsic!(_mm_castsi128_ps(i.0)))
        }
        #[inline(always)]
        fn int_splat(_: Self::Isa, v: i32) -> I32x4 {
            I32x4(intrinsic!(_mm_set1_epi32(v)))
        }
        #[inline(always)]
        fn int_sub(a: I32x4, b: I32x4) -> I32x4 {
            I32x4(intrinsic!(_mm_sub_epi32(a.0, b.0)))
        }
        #[inline(always)]
        fn int_and(a: I32x4, b: I32x4) -> I32x4 {
            I32x4(intrinsic!(_mm_and_si128(a.0, b.0)))
        }
        #[inline(always)]
        fn int_or(a: I32x4, b: I32x4) -> I32x4 {
            I32x4(intrinsic!(_mm_or_si128(a.0, b.0)))
        }
        #[inline(always)]
        fn int_xor(a: I32x4, b: I32x4) -> I32x4 {
            I32x4(intrinsic!(_mm_xor_si128(a.0, b.0)))
        }
        #[inline(always)]
        fn int_shl23(a: I32x4) -> I32x4 {
            I32x4(intrinsic!(_mm_slli_epi32::<23>(a.0)))
        }
        #[inline(always)]
        fn int_shr23(a: I32x4) -> I32x4 {
            I32x4(intrinsic!(_mm_srai_epi32::<23>(a.0)))
        }
        #[inline(always)]
        fn int_to_f32(a: I32x4) -> Self {
            Self(intrinsic!(_mm_cvtepi32_ps(a.0)))
        }
    }

    impl Lanes for F32x8 {
        const WIDTH: usize = 8;
        type Mask = __m256;
        type Isa = Avx2;
        type Int = I32x8;

        #[inline(always)]
        fn isa(self) -> Avx2 {
            Avx2(())
        }
        #[inline(always)]
        fn splat(_: Self::Isa, v: f32) -> Self {
            Self(intrinsic!(_mm256_set1_ps(v)))
        }
        #[inline(always)]
        fn load(_: Self::Isa, s: &[f32]) -> Self {
            let s = &s[..8];
            Self(intrinsic!(_mm256_loadu_ps(s.as_ptr())))
        }
        #[inline(always)]
        fn store(self, s: &mut [f32]) {
            let s = &mut s[..8];
            intrinsic!(_mm256_storeu_ps(s.as_mut_ptr(), self.0))
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            Self(intrinsic!(_mm256_add_ps(self.0, o.0)))
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            Self(intrinsic!(_mm256_sub_ps(self.0, o.0)))
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            Self(intrinsic!(_mm256_mul_ps(self.0, o.0)))
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            Self(intrinsic!(_mm256_div_ps(self.0, o.0)))
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            Self(intrinsic!(_mm256_sqrt_ps(self.0)))
        }
        #[inline(always)]
        fn lt(self, o: Self) -> __m256 {
            intrinsic!(_mm256_cmp_ps::<_CMP_LT_OQ>(self.0, o.0))
        }
        #[inline(always)]
        fn le(self, o: Self) -> __m256 {
            intrinsic!(_mm256_cmp_ps::<_CMP_LE_OQ>(self.0, o.0))
        }
        #[inline(always)]
        fn eq(self, o: Self) -> __m256 {
            intrinsic!(_mm256_cmp_ps::<_CMP_EQ_OQ>(self.0, o.0))
        }
        #[inline(always)]
        fn is_nan(self) -> __m256 {
            intrinsic!(_mm256_cmp_ps::<_CMP_UNORD_Q>(self.0, self.0))
        }
        #[inline(always)]
        fn select(m: __m256, a: Self, b: Self) -> Self {
            Self(intrinsic!(_mm256_blendv_ps(b.0, a.0, m)))
        }
        #[inline(always)]
        fn all(m: __m256) -> bool {
            intrinsic!(_mm256_movemask_ps(m)) == 0xff
        }
        #[inline(always)]
        fn bitmask(_: Self::Isa, m: __m256) -> u32 {
            intrinsic!(_mm256_movemask_ps(m)) as u32
        }
        #[inline(always)]
        fn to_bits(self) -> I32x8 {
            I32x8(intrinsic!(_mm256_castps_si256(self.0)))
        }
        #[inline(always)]
        fn from_bits(i: I32x8) -> Self {
            Self(intrinsic!(_mm256_castsi256_ps(i.0)))
        }
        #[inline(always)]
        fn int_splat(_: Self::Isa, v: i32) -> I32x8 {
            I32x8(intrinsic!(_mm256_set1_epi32(v)))
        }
        #[inline(always)]
        fn int_sub(a: I32x8, b: I32x8) -> I32x8 {
            I32x8(intrinsic!(_mm256_sub_epi32(a.0, b.0)))
        }
        #[inline(always)]
        fn int_and(a: I32x8, b: I32x8) -> I32x8 {
            I32x8(intrinsic!(_mm256_and_si256(a.0, b.0)))
        }
        #[inline(always)]
        fn int_or(a: I32x8, b: I32x8) -> I32x8 {
            I32x8(intrinsic!(_mm256_or_si256(a.0, b.0)))
        }
        #[inline(always)]
        fn int_xor(a: I32x8, b: I32x8) -> I32x8 {
            I32x8(intrinsic!(_mm256_xor_si256(a.0, b.0)))
        }
        #[inline(always)]
        fn int_shl23(a: I32x8) -> I32x8 {
            I32x8(intrinsic!(_mm256_slli_epi32::<23>(a.0)))
        }
        #[inline(always)]
        fn int_shr23(a: I32x8) -> I32x8 {
            I32x8(intrinsic!(_mm256_srai_epi32::<23>(a.0)))
        }
        #[inline(always)]
        fn int_to_f32(a: I32x8) -> Self {
            Self(intrinsic!(_mm256_cvtepi32_ps(a.0)))
        }
    }

    impl Lanes for F32x16 {
        const WIDTH: usize = 16;
        type Mask = __mmask16;
        type Isa = Avx512;
        type Int = I32x16;

        #[inline(always)]
        fn isa(self) -> Avx512 {
            Avx512(())
        }
        #[inline(always)]
        fn avx512(isa: Avx512) -> Option<Avx512> {
            Some(isa)
        }
        #[inline(always)]
        fn splat(_: Self::Isa, v: f32) -> Self {
            Self(intrinsic!(_mm512_set1_ps(v)))
        }
        #[inline(always)]
        fn load(_: Self::Isa, s: &[f32]) -> Self {
            let s = &s[..16];
            Self(intrinsic!(_mm512_loadu_ps(s.as_ptr())))
        }
        #[inline(always)]
        fn store(self, s: &mut [f32]) {
            let s = &mut s[..16];
            intrinsic!(_mm512_storeu_ps(s.as_mut_ptr(), self.0))
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            Self(intrinsic!(_mm512_add_ps(self.0, o.0)))
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            Self(intrinsic!(_mm512_sub_ps(self.0, o.0)))
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            Self(intrinsic!(_mm512_mul_ps(self.0, o.0)))
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            Self(intrinsic!(_mm512_div_ps(self.0, o.0)))
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            Self(intrinsic!(_mm512_sqrt_ps(self.0)))
        }
        #[inline(always)]
        fn lt(self, o: Self) -> __mmask16 {
            intrinsic!(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(self.0, o.0))
        }
        #[inline(always)]
        fn le(self, o: Self) -> __mmask16 {
            intrinsic!(_mm512_cmp_ps_mask::<_CMP_LE_OQ>(self.0, o.0))
        }
        #[inline(always)]
        fn eq(self, o: Self) -> __mmask16 {
            intrinsic!(_mm512_cmp_ps_mask::<_CMP_EQ_OQ>(self.0, o.0))
        }
        #[inline(always)]
        fn is_nan(self) -> __mmask16 {
            intrinsic!(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(self.0, self.0))
        }
        #[inline(always)]
        fn select(m: __mmask16, a: Self, b: Self) -> Self {
            Self(intrinsic!(_mm512_mask_blend_ps(m, b.0, a.0)))
        }
        #[inline(always)]
        fn all(m: __mmask16) -> bool {
            m == 0xffff
        }
        #[inline(always)]
        fn bitmask(_: Self::Isa, m: __mmask16) -> u32 {
            u32::from(m)
        }
        #[inline(always)]
        fn to_bits(self) -> I32x16 {
            I32x16(intrinsic!(_mm512_castps_si512(self.0)))
        }
        #[inline(always)]
        fn from_bits(i: I32x16) -> Self {
            Self(intrinsic!(_mm512_castsi512_ps(i.0)))
        }
        #[inline(always)]
        fn int_splat(_: Self::Isa, v: i32) -> I32x16 {
            I32x16(intrinsic!(_mm512_set1_epi32(v)))
        }
        #[inline(always)]
        fn int_sub(a: I32x16, b: I32x16) -> I32x16 {
            I32x16(intrinsic!(_mm512_sub_epi32(a.0, b.0)))
        }
        #[inline(always)]
        fn int_and(a: I32x16, b: I32x16) -> I32x16 {
            I32x16(intrinsic!(_mm512_and_si512(a.0, b.0)))
        }
        #[inline(always)]
        fn int_or(a: I32x16, b: I32x16) -> I32x16 {
            I32x16(intrinsic!(_mm512_or_si512(a.0, b.0)))
        }
        #[inline(always)]
        fn int_xor(a: I32x16, b: I32x16) -> I32x16 {
            I32x16(intrinsic!(_mm512_xor_si512(a.0, b.0)))
        }
        #[inline(always)]
        fn int_shl23(a: I32x16) -> I32x16 {
            I32x16(intrinsic!(_mm512_slli_epi32::<23>(a.0)))
        }
        #[inline(always)]
        fn int_shr23(a: I32x16) -> I32x16 {
            I32x16(intrinsic!(_mm512_srai_epi32::<23>(a.0)))
        }
        #[inline(always)]
        fn int_to_f32(a: I32x16) -> Self {
            Self(intrinsic!(_mm512_cvtepi32_ps(a.0)))
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Avx, Avx2, Avx512, F32x16, F32x4, F32x8, Sse2};

#[cfg(target_arch = "aarch64")]
mod neon {
    use super::Lanes;
    use std::arch::aarch64::*;

    isa_types!(Neon, "NEON", std::arch::is_aarch64_feature_detected!("neon"), F32x4(float32x4_t), I32x4(int32x4_t));
    impl Lanes for F32x4 {
        const WIDTH: usize = 4;
        type Mask = uint32x4_t;
        type Isa = Neon;
        type Int = I32x4;

        #[inline(always)]
        fn isa(self) -> Neon {
            Neon(())
        }
        #[inline(always)]
        fn splat(_: Self::Isa, v: f32) -> Self {
            Self(intrinsic!(vdupq_n_f32(v)))
        }
        #[inline(always)]
        fn load(_: Self::Isa, s: &[f32]) -> Self {
            let s = &s[..4];
            Self(intrinsic!(vld1q_f32(s.as_ptr())))
        }
        #[inline(always)]
        fn store(self, s: &mut [f32]) {
            let s = &mut s[..4];
            intrinsic!(vst1q_f32(s.as_mut_ptr(), self.0))
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            Self(intrinsic!(vaddq_f32(self.0, o.0)))
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            Self(intrinsic!(vsubq_f32(self.0, o.0)))
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            Self(intrinsic!(vmulq_f32(self.0, o.0)))
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            Self(intrinsic!(vdivq_f32(self.0, o.0)))
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            Self(intrinsic!(vsqrtq_f32(self.0)))
        }
        #[inline(always)]
        fn lt(self, o: Self) -> uint32x4_t {
            intrinsic!(vcltq_f32(self.0, o.0))
        }
        #[inline(always)]
        fn le(self, o: Self) -> uint32x4_t {
            intrinsic!(vcleq_f32(self.0, o.0))
        }
        #[inline(always)]
        fn eq(self, o: Self) -> uint32x4_t {
            intrinsic!(vceqq_f32(self.0, o.0))
        }
        #[inline(always)]
        fn is_nan(self) -> uint32x4_t {
            intrinsic!(vmvnq_u32(vceqq_f32(self.0, self.0)))
        }
        #[inline(always)]
        fn select(m: uint32x4_t, a: Self, b: Self) -> Self {
            Self(intrinsic!(vbslq_f32(m, a.0, b.0)))
        }
        #[inline(always)]
        fn all(m: uint32x4_t) -> bool {
            intrinsic!(vminvq_u32(m)) != 0
        }
        #[inline(always)]
        fn to_bits(self) -> I32x4 {
            I32x4(intrinsic!(vreinterpretq_s32_f32(self.0)))
        }
        #[inline(always)]
        fn from_bits(i: I32x4) -> Self {
            Self(intrinsic!(vreinterpretq_f32_s32(i.0)))
        }
        #[inline(always)]
        fn int_splat(_: Self::Isa, v: i32) -> I32x4 {
            I32x4(intrinsic!(vdupq_n_s32(v)))
        }
        #[inline(always)]
        fn int_sub(a: I32x4, b: I32x4) -> I32x4 {
            I32x4(intrinsic!(vsubq_s32(a.0, b.0)))
        }
        #[inline(always)]
        fn int_and(a: I32x4, b: I32x4) -> I32x4 {
            I32x4(intrinsic!(vandq_s32(a.0, b.0)))
        }
        #[inline(always)]
        fn int_or(a: I32x4, b: I32x4) -> I32x4 {
            I32x4(intrinsic!(vorrq_s32(a.0, b.0)))
        }
        #[inline(always)]
        fn int_xor(a: I32x4, b: I32x4) -> I32x4 {
            I32x4(intrinsic!(veorq_s32(a.0, b.0)))
        }
        #[inline(always)]
        fn int_shl23(a: I32x4) -> I32x4 {
            I32x4(intrinsic!(vshlq_n_s32::<23>(a.0)))
        }
        #[inline(always)]
        fn int_shr23(a: I32x4) -> I32x4 {
            I32x4(intrinsic!(vshrq_n_s32::<23>(a.0)))
        }
        #[inline(always)]
        fn int_to_f32(a: I32x4) -> Self {
            Self(intrinsic!(vcvtq_f32_s32(a.0)))
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub(crate) use neon::{F32x4, Neon};

/// Whether this CPU runs `path`: whether its token's `detect` succeeds (the answer of
/// [`KernelPath::is_supported`]).
pub(crate) fn path_supported(path: KernelPath) -> bool {
    match path {
        KernelPath::Scalar => true,
        #[cfg(target_arch = "x86_64")]
        KernelPath::Sse => Sse2::detect().is_some(),
        #[cfg(target_arch = "x86_64")]
        KernelPath::Avx2 => Avx2::detect().is_some(),
        #[cfg(target_arch = "x86_64")]
        KernelPath::Avx512 => Avx512::detect().is_some(),
        #[cfg(target_arch = "aarch64")]
        KernelPath::Neon => Neon::detect().is_some(),
        #[allow(unreachable_patterns)]
        _ => false,
    }
}
