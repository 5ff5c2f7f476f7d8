//! The [`Lanes`] trait: a vector of `f32` lanes with exactly-rounded IEEE operations.
//!
//! Implemented for `f32` (one lane, the scalar reference), SSE `__m128`, AVX2 `__m256`,
//! AVX-512 `__m512` and NEON `float32x4_t`. Every operation is either one correctly
//! rounded IEEE-754 operation per lane (add, sub, mul, div, sqrt, int-to-float of small
//! integers), or exact (compares, selects, bit casts, integer adds and shifts). There is
//! no fused multiply-add and no approximate instruction (`rcp`, `rsqrt`), so any function
//! written once over `L: Lanes` gives the same bits at every width.
//!
//! # Safety contract
//! The vector implementations call intrinsics that need their instruction set. They are
//! only reached through [`super::dispatch`], which checks the CPU at run time and runs the
//! generic code inside a `#[target_feature]` function; that is why this module is private
//! to the crate. Loads and stores index a slice of at least `WIDTH` elements first, so
//! their pointers are always in bounds.

/// Wraps one intrinsic call; see the module's safety contract.
macro_rules! intrinsic {
    ($e:expr) => {
        // SAFETY: the lane type's instruction set was detected at run time and is enabled
        // in the calling `#[target_feature]` function (module safety contract); pointer
        // arguments come from slices of at least `WIDTH` elements.
        unsafe { $e }
    };
}

/// A vector of `f32` lanes; see the module docs.
pub(crate) trait Lanes: Copy {
    /// Number of `f32` lanes.
    const WIDTH: usize;
    /// Result of a lane-wise comparison.
    type Mask: Copy;
    /// The same lanes seen as `i32`.
    type Int: Copy;

    fn splat(v: f32) -> Self;
    /// Loads `s[..WIDTH]` (panics if `s` is shorter).
    fn load(s: &[f32]) -> Self;
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
    fn to_bits(self) -> Self::Int;
    fn from_bits(i: Self::Int) -> Self;
    fn int_splat(v: i32) -> Self::Int;
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
        Self::from_bits(Self::int_and(self.to_bits(), Self::int_splat(0x7fff_ffff)))
    }
    /// Flips the sign bit (exact IEEE negation).
    #[inline(always)]
    fn neg(self) -> Self {
        Self::from_bits(Self::int_xor(self.to_bits(), Self::int_splat(i32::MIN)))
    }
    /// `|self|` with the sign bit of `sign`.
    #[inline(always)]
    fn copysign(self, sign: Self) -> Self {
        let s = Self::int_and(sign.to_bits(), Self::int_splat(i32::MIN));
        Self::from_bits(Self::int_or(self.abs().to_bits(), s))
    }
    /// `lo` below `lo`, `hi` above `hi`, else `self`; NaN stays NaN.
    #[inline(always)]
    fn clamp(self, lo: f32, hi: f32) -> Self {
        let (lo, hi) = (Self::splat(lo), Self::splat(hi));
        Self::select(self.lt(lo), lo, Self::select(hi.lt(self), hi, self))
    }
}

impl Lanes for f32 {
    const WIDTH: usize = 1;
    type Mask = bool;
    type Int = i32;

    #[inline(always)]
    fn splat(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn load(s: &[f32]) -> Self {
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
    fn to_bits(self) -> i32 {
        f32::to_bits(self) as i32
    }
    #[inline(always)]
    fn from_bits(i: i32) -> Self {
        f32::from_bits(i as u32)
    }
    #[inline(always)]
    fn int_splat(v: i32) -> i32 {
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

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Lanes;
    use std::arch::x86_64::*;

    impl Lanes for __m128 {
        const WIDTH: usize = 4;
        type Mask = __m128;
        type Int = __m128i;

        #[inline(always)]
        fn splat(v: f32) -> Self {
            intrinsic!(_mm_set1_ps(v))
        }
        #[inline(always)]
        fn load(s: &[f32]) -> Self {
            let s = &s[..4];
            intrinsic!(_mm_loadu_ps(s.as_ptr()))
        }
        #[inline(always)]
        fn store(self, s: &mut [f32]) {
            let s = &mut s[..4];
            intrinsic!(_mm_storeu_ps(s.as_mut_ptr(), self))
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            intrinsic!(_mm_add_ps(self, o))
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            intrinsic!(_mm_sub_ps(self, o))
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            intrinsic!(_mm_mul_ps(self, o))
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            intrinsic!(_mm_div_ps(self, o))
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            intrinsic!(_mm_sqrt_ps(self))
        }
        #[inline(always)]
        fn lt(self, o: Self) -> Self {
            intrinsic!(_mm_cmplt_ps(self, o))
        }
        #[inline(always)]
        fn le(self, o: Self) -> Self {
            intrinsic!(_mm_cmple_ps(self, o))
        }
        #[inline(always)]
        fn eq(self, o: Self) -> Self {
            intrinsic!(_mm_cmpeq_ps(self, o))
        }
        #[inline(always)]
        fn is_nan(self) -> Self {
            intrinsic!(_mm_cmpunord_ps(self, self))
        }
        #[inline(always)]
        fn select(m: Self, a: Self, b: Self) -> Self {
            intrinsic!(_mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, b)))
        }
        #[inline(always)]
        fn to_bits(self) -> __m128i {
            intrinsic!(_mm_castps_si128(self))
        }
        #[inline(always)]
        fn from_bits(i: __m128i) -> Self {
            intrinsic!(_mm_castsi128_ps(i))
        }
        #[inline(always)]
        fn int_splat(v: i32) -> __m128i {
            intrinsic!(_mm_set1_epi32(v))
        }
        #[inline(always)]
        fn int_sub(a: __m128i, b: __m128i) -> __m128i {
            intrinsic!(_mm_sub_epi32(a, b))
        }
        #[inline(always)]
        fn int_and(a: __m128i, b: __m128i) -> __m128i {
            intrinsic!(_mm_and_si128(a, b))
        }
        #[inline(always)]
        fn int_or(a: __m128i, b: __m128i) -> __m128i {
            intrinsic!(_mm_or_si128(a, b))
        }
        #[inline(always)]
        fn int_xor(a: __m128i, b: __m128i) -> __m128i {
            intrinsic!(_mm_xor_si128(a, b))
        }
        #[inline(always)]
        fn int_shl23(a: __m128i) -> __m128i {
            intrinsic!(_mm_slli_epi32::<23>(a))
        }
        #[inline(always)]
        fn int_shr23(a: __m128i) -> __m128i {
            intrinsic!(_mm_srai_epi32::<23>(a))
        }
        #[inline(always)]
        fn int_to_f32(a: __m128i) -> Self {
            intrinsic!(_mm_cvtepi32_ps(a))
        }
    }

    impl Lanes for __m256 {
        const WIDTH: usize = 8;
        type Mask = __m256;
        type Int = __m256i;

        #[inline(always)]
        fn splat(v: f32) -> Self {
            intrinsic!(_mm256_set1_ps(v))
        }
        #[inline(always)]
        fn load(s: &[f32]) -> Self {
            let s = &s[..8];
            intrinsic!(_mm256_loadu_ps(s.as_ptr()))
        }
        #[inline(always)]
        fn store(self, s: &mut [f32]) {
            let s = &mut s[..8];
            intrinsic!(_mm256_storeu_ps(s.as_mut_ptr(), self))
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            intrinsic!(_mm256_add_ps(self, o))
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            intrinsic!(_mm256_sub_ps(self, o))
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            intrinsic!(_mm256_mul_ps(self, o))
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            intrinsic!(_mm256_div_ps(self, o))
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            intrinsic!(_mm256_sqrt_ps(self))
        }
        #[inline(always)]
        fn lt(self, o: Self) -> Self {
            intrinsic!(_mm256_cmp_ps::<_CMP_LT_OQ>(self, o))
        }
        #[inline(always)]
        fn le(self, o: Self) -> Self {
            intrinsic!(_mm256_cmp_ps::<_CMP_LE_OQ>(self, o))
        }
        #[inline(always)]
        fn eq(self, o: Self) -> Self {
            intrinsic!(_mm256_cmp_ps::<_CMP_EQ_OQ>(self, o))
        }
        #[inline(always)]
        fn is_nan(self) -> Self {
            intrinsic!(_mm256_cmp_ps::<_CMP_UNORD_Q>(self, self))
        }
        #[inline(always)]
        fn select(m: Self, a: Self, b: Self) -> Self {
            intrinsic!(_mm256_blendv_ps(b, a, m))
        }
        #[inline(always)]
        fn to_bits(self) -> __m256i {
            intrinsic!(_mm256_castps_si256(self))
        }
        #[inline(always)]
        fn from_bits(i: __m256i) -> Self {
            intrinsic!(_mm256_castsi256_ps(i))
        }
        #[inline(always)]
        fn int_splat(v: i32) -> __m256i {
            intrinsic!(_mm256_set1_epi32(v))
        }
        #[inline(always)]
        fn int_sub(a: __m256i, b: __m256i) -> __m256i {
            intrinsic!(_mm256_sub_epi32(a, b))
        }
        #[inline(always)]
        fn int_and(a: __m256i, b: __m256i) -> __m256i {
            intrinsic!(_mm256_and_si256(a, b))
        }
        #[inline(always)]
        fn int_or(a: __m256i, b: __m256i) -> __m256i {
            intrinsic!(_mm256_or_si256(a, b))
        }
        #[inline(always)]
        fn int_xor(a: __m256i, b: __m256i) -> __m256i {
            intrinsic!(_mm256_xor_si256(a, b))
        }
        #[inline(always)]
        fn int_shl23(a: __m256i) -> __m256i {
            intrinsic!(_mm256_slli_epi32::<23>(a))
        }
        #[inline(always)]
        fn int_shr23(a: __m256i) -> __m256i {
            intrinsic!(_mm256_srai_epi32::<23>(a))
        }
        #[inline(always)]
        fn int_to_f32(a: __m256i) -> Self {
            intrinsic!(_mm256_cvtepi32_ps(a))
        }
    }

    impl Lanes for __m512 {
        const WIDTH: usize = 16;
        type Mask = __mmask16;
        type Int = __m512i;

        #[inline(always)]
        fn splat(v: f32) -> Self {
            intrinsic!(_mm512_set1_ps(v))
        }
        #[inline(always)]
        fn load(s: &[f32]) -> Self {
            let s = &s[..16];
            intrinsic!(_mm512_loadu_ps(s.as_ptr()))
        }
        #[inline(always)]
        fn store(self, s: &mut [f32]) {
            let s = &mut s[..16];
            intrinsic!(_mm512_storeu_ps(s.as_mut_ptr(), self))
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            intrinsic!(_mm512_add_ps(self, o))
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            intrinsic!(_mm512_sub_ps(self, o))
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            intrinsic!(_mm512_mul_ps(self, o))
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            intrinsic!(_mm512_div_ps(self, o))
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            intrinsic!(_mm512_sqrt_ps(self))
        }
        #[inline(always)]
        fn lt(self, o: Self) -> __mmask16 {
            intrinsic!(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(self, o))
        }
        #[inline(always)]
        fn le(self, o: Self) -> __mmask16 {
            intrinsic!(_mm512_cmp_ps_mask::<_CMP_LE_OQ>(self, o))
        }
        #[inline(always)]
        fn eq(self, o: Self) -> __mmask16 {
            intrinsic!(_mm512_cmp_ps_mask::<_CMP_EQ_OQ>(self, o))
        }
        #[inline(always)]
        fn is_nan(self) -> __mmask16 {
            intrinsic!(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(self, self))
        }
        #[inline(always)]
        fn select(m: __mmask16, a: Self, b: Self) -> Self {
            intrinsic!(_mm512_mask_blend_ps(m, b, a))
        }
        #[inline(always)]
        fn to_bits(self) -> __m512i {
            intrinsic!(_mm512_castps_si512(self))
        }
        #[inline(always)]
        fn from_bits(i: __m512i) -> Self {
            intrinsic!(_mm512_castsi512_ps(i))
        }
        #[inline(always)]
        fn int_splat(v: i32) -> __m512i {
            intrinsic!(_mm512_set1_epi32(v))
        }
        #[inline(always)]
        fn int_sub(a: __m512i, b: __m512i) -> __m512i {
            intrinsic!(_mm512_sub_epi32(a, b))
        }
        #[inline(always)]
        fn int_and(a: __m512i, b: __m512i) -> __m512i {
            intrinsic!(_mm512_and_si512(a, b))
        }
        #[inline(always)]
        fn int_or(a: __m512i, b: __m512i) -> __m512i {
            intrinsic!(_mm512_or_si512(a, b))
        }
        #[inline(always)]
        fn int_xor(a: __m512i, b: __m512i) -> __m512i {
            intrinsic!(_mm512_xor_si512(a, b))
        }
        #[inline(always)]
        fn int_shl23(a: __m512i) -> __m512i {
            intrinsic!(_mm512_slli_epi32::<23>(a))
        }
        #[inline(always)]
        fn int_shr23(a: __m512i) -> __m512i {
            intrinsic!(_mm512_srai_epi32::<23>(a))
        }
        #[inline(always)]
        fn int_to_f32(a: __m512i) -> Self {
            intrinsic!(_mm512_cvtepi32_ps(a))
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use super::Lanes;
    use std::arch::aarch64::*;

    impl Lanes for float32x4_t {
        const WIDTH: usize = 4;
        type Mask = uint32x4_t;
        type Int = int32x4_t;

        #[inline(always)]
        fn splat(v: f32) -> Self {
            intrinsic!(vdupq_n_f32(v))
        }
        #[inline(always)]
        fn load(s: &[f32]) -> Self {
            let s = &s[..4];
            intrinsic!(vld1q_f32(s.as_ptr()))
        }
        #[inline(always)]
        fn store(self, s: &mut [f32]) {
            let s = &mut s[..4];
            intrinsic!(vst1q_f32(s.as_mut_ptr(), self))
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            intrinsic!(vaddq_f32(self, o))
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            intrinsic!(vsubq_f32(self, o))
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            intrinsic!(vmulq_f32(self, o))
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            intrinsic!(vdivq_f32(self, o))
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            intrinsic!(vsqrtq_f32(self))
        }
        #[inline(always)]
        fn lt(self, o: Self) -> uint32x4_t {
            intrinsic!(vcltq_f32(self, o))
        }
        #[inline(always)]
        fn le(self, o: Self) -> uint32x4_t {
            intrinsic!(vcleq_f32(self, o))
        }
        #[inline(always)]
        fn eq(self, o: Self) -> uint32x4_t {
            intrinsic!(vceqq_f32(self, o))
        }
        #[inline(always)]
        fn is_nan(self) -> uint32x4_t {
            intrinsic!(vmvnq_u32(vceqq_f32(self, self)))
        }
        #[inline(always)]
        fn select(m: uint32x4_t, a: Self, b: Self) -> Self {
            intrinsic!(vbslq_f32(m, a, b))
        }
        #[inline(always)]
        fn to_bits(self) -> int32x4_t {
            intrinsic!(vreinterpretq_s32_f32(self))
        }
        #[inline(always)]
        fn from_bits(i: int32x4_t) -> Self {
            intrinsic!(vreinterpretq_f32_s32(i))
        }
        #[inline(always)]
        fn int_splat(v: i32) -> int32x4_t {
            intrinsic!(vdupq_n_s32(v))
        }
        #[inline(always)]
        fn int_sub(a: int32x4_t, b: int32x4_t) -> int32x4_t {
            intrinsic!(vsubq_s32(a, b))
        }
        #[inline(always)]
        fn int_and(a: int32x4_t, b: int32x4_t) -> int32x4_t {
            intrinsic!(vandq_s32(a, b))
        }
        #[inline(always)]
        fn int_or(a: int32x4_t, b: int32x4_t) -> int32x4_t {
            intrinsic!(vorrq_s32(a, b))
        }
        #[inline(always)]
        fn int_xor(a: int32x4_t, b: int32x4_t) -> int32x4_t {
            intrinsic!(veorq_s32(a, b))
        }
        #[inline(always)]
        fn int_shl23(a: int32x4_t) -> int32x4_t {
            intrinsic!(vshlq_n_s32::<23>(a))
        }
        #[inline(always)]
        fn int_shr23(a: int32x4_t) -> int32x4_t {
            intrinsic!(vshrq_n_s32::<23>(a))
        }
        #[inline(always)]
        fn int_to_f32(a: int32x4_t) -> Self {
            intrinsic!(vcvtq_f32_s32(a))
        }
    }
}
