//! Elementary functions written once over [`Lanes`], using only `+ - * /`, compares,
//! selects and exact bit manipulation, each in one fixed order of evaluation. The scalar
//! instantiation (`f32`) is the reference; every vector instantiation gives its bits.
//!
//! [`pow`] is the exception: it runs the `f64` scalar [`super::math64::powf`] lane by lane
//! (one algorithm for every path, so also the same bits).
//!
//! Formulas, coefficient fits (`examples/fit_transcendentals.rs`) and measured errors are in
//! `docs/transcendentals.md`. NaN inputs give a NaN (of any payload: the lane loops
//! canonicalise it in exact mode).

use super::simd::Lanes;

/// `1.5 * 2^23`: adding and subtracting it rounds a float of magnitude < 2^22 to the
/// nearest integer (ties to even), exactly, on every instruction set.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// exp: inputs are clamped to `[EXP_MIN, EXP_MAX]`; the results there are 0 and +inf.
const EXP_MIN: f32 = -104.0;
const EXP_MAX: f32 = 89.0;
/// Cody–Waite split of ln 2: `LN2_HI` has 9 significant bits, so `n * LN2_HI` is exact.
const EXP_LN2_HI: f32 = 355.0 / 512.0;
const EXP_LN2_LO: f32 = -2.121_944_4e-4;
/// `(e^r - 1 - r) / r^2` on `|r| <= 0.347`, degree 4.
const EXP_P: [f32; 5] = [
    f32::from_bits(0x3efffffe),
    f32::from_bits(0x3e2aaa48),
    f32::from_bits(0x3d2aac7b),
    f32::from_bits(0x3c091d47),
    f32::from_bits(0x3ab5118c),
];

/// log: ln 2 split with 12 significant bits in `LN2_HI`, so `k * LN2_HI` is exact.
const LOG_LN2_HI: f32 = f32::from_bits(0x3f317000);
const LOG_LN2_LO: f32 = (std::f64::consts::LN_2 - 0.693_115_234_375) as f32;
/// `(2 atanh(s)/s - 2) / s^2` as a polynomial in `z = s^2 <= 0.0295`, degree 3.
const LOG_Q: [f32; 4] = [f32::from_bits(0x3f2aaaaa), f32::from_bits(0x3ecccd3e), f32::from_bits(0x3e921c3a), f32::from_bits(0x3e71831e)];

/// tanh: below `TANH_SPLIT` an odd polynomial, above it `1 - 2/(e^(2|x|) + 1)`.
const TANH_SPLIT: f32 = 0.625;
/// `(tanh(x) - x) / x^3` in `z = x^2`, `|x| <= 0.625`, degree 5.
const TANH_P: [f32; 6] = [
    f32::from_bits(0xbeaaaaaa),
    f32::from_bits(0x3e088833),
    f32::from_bits(0xbd5cf748),
    f32::from_bits(0x3cb1c5ac),
    f32::from_bits(0xbc05fa7f),
    f32::from_bits(0x3b0c70ef),
];

/// erf: below `ERF_SPLIT` `a + a P(a^2)`, above it `1 - erfc(a)`.
const ERF_SPLIT: f32 = 0.875;
/// Past this erfc is 0 in `f32` (erf is 1); larger arguments are clamped to it.
const ERF_MAX: f32 = 10.1;
/// `erf(a)/a - 1` in `z = a^2`, `a < 0.875`, degree 6.
const ERF_P: [f32; 7] = [
    f32::from_bits(0x3e0375d4),
    f32::from_bits(0xbec093a2),
    f32::from_bits(0x3de71742),
    f32::from_bits(0xbcdc0cd3),
    f32::from_bits(0x3baa9d5d),
    f32::from_bits(0xba573fc9),
    f32::from_bits(0x38b5efa8),
];
/// `ln(erfc(a) e^(a^2) / t)` in `t = 1/(1 + a/2)`, `0.875 <= a <= 10.1`, degree 9.
const ERFC_G: [f32; 10] = [
    f32::from_bits(0xbfa1fcf0),
    f32::from_bits(0x3f801312),
    f32::from_bits(0x3ebc1e9c),
    f32::from_bits(0x3e0f2a8b),
    f32::from_bits(0xbeb3efb3),
    f32::from_bits(0x3f2bf3f1),
    f32::from_bits(0xbfdbc72f),
    f32::from_bits(0x400081ba),
    f32::from_bits(0xbf89c0b9),
    f32::from_bits(0x3e63ff66),
];

/// GELU arguments are clamped to `±GELU_CLAMP`, where Φ is exactly 0 or 1 in `f32` and
/// the density terms are 0.
const GELU_CLAMP: f32 = 20.0;
const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// `1/sqrt(2 pi)`.
const INV_SQRT_2PI: f32 = 0.398_942_280_401_432_7_f64 as f32;
/// gelu_tanh constants: `K2 = 2 sqrt(2/pi)`, `K2C = K2 * 0.044715`, `K6C = 3 * K2C`.
const GELU_K2: f32 = (2.0 * 0.797_884_560_802_865_4_f64) as f32;
const GELU_K2C: f32 = (2.0 * 0.797_884_560_802_865_4_f64 * 0.044715) as f32;
const GELU_K6C: f32 = (6.0 * 0.797_884_560_802_865_4_f64 * 0.044715) as f32;

/// sin/cos: `π/2` as five pieces of at most 12 significant bits (so `n·PIO2[i]` is exact
/// for integers `n < 2^12`) and the rest rounded to `f32` (together 2^−92 relative).
const PIO2: [f32; 6] = [
    f32::from_bits(0x3fc90000),
    f32::from_bits(0x39fda000),
    f32::from_bits(0x33a22000),
    f32::from_bits(0x2c346000),
    f32::from_bits(0x248d3000),
    f32::from_bits(0x1d18cc51),
];
/// `2/π` rounded to `f32`, for the quadrant estimate.
const FRAC_2_PI: f32 = f32::from_bits(0x3f22f983);
/// Cody–Waite reduction below this magnitude (`n ≤ 2608`); the integer reduction at and
/// above it.
const TRIG_CW_MAX: f32 = 4096.0;
/// The first 320 bits of the fraction of `2/π`, most significant first (fdlibm's `ipio2`).
const FRAC_2_PI_BITS: [u64; 5] = [0xa2f9836e4e441529, 0xfc2757d1f534ddc0, 0xdb6295993c439041, 0xfe5163abdebbc561, 0xb7246e3a424dd2e0];
/// `sin(r) = r + r^3 (S1 + z S(z))`, `z = r^2`, `|r| <= π/4`: fdlibm's `k_sinf.c`.
const SIN_S: [f32; 6] = [
    f32::from_bits(0xbe2aaaab),
    f32::from_bits(0x3c088889),
    f32::from_bits(0xb9500d01),
    f32::from_bits(0x3638ef1b),
    f32::from_bits(0xb2d72f34),
    f32::from_bits(0x2f2ec9d3),
];
/// `cos(r) = 1 − z/2 + z^2 C(z)`, `|r| <= π/4`: fdlibm's `k_cosf.c`.
const COS_C: [f32; 6] = [
    f32::from_bits(0x3d2aaaab),
    f32::from_bits(0xbab60b61),
    f32::from_bits(0x37d00d01),
    f32::from_bits(0xb493f27c),
    f32::from_bits(0x310f74f6),
    f32::from_bits(0xad47d74e),
];

/// `c[0] + v (c[1] + v (c[2] + ...))`, innermost first.
#[inline(always)]
fn horner<L: Lanes>(v: L, c: &[f32]) -> L {
    let splat = |c: f32| L::splat(v.isa(), c);
    let (last, rest) = c.split_last().expect("non-empty coefficients");
    rest.iter().rev().fold(splat(*last), |acc, &ci| acc.mul(v).add(splat(ci)))
}

/// Nearest integer (ties to even) of `v`, for `|v| < 2^22`.
#[inline(always)]
fn round_int<L: Lanes>(v: L) -> L {
    let splat = |c: f32| L::splat(v.isa(), c);
    v.add(splat(ROUND_MAGIC)).sub(splat(ROUND_MAGIC))
}

/// `2^k` for integer-valued `k` in `[-126, 127]`, built in the exponent field.
#[inline(always)]
fn pow2<L: Lanes>(k: L) -> L {
    let splat = |c: f32| L::splat(k.isa(), c);
    let biased = L::int_sub(k.add(splat(ROUND_MAGIC)).to_bits(), L::int_splat(k.isa(), ROUND_MAGIC.to_bits() as i32 - 127));
    L::from_bits(L::int_shl23(biased))
}

/// `e^x`.
#[inline(always)]
pub(crate) fn exp<L: Lanes>(x: L) -> L {
    let splat = |c: f32| L::splat(x.isa(), c);
    let x = x.clamp(EXP_MIN, EXP_MAX);
    let n = round_int(x.mul(splat(std::f32::consts::LOG2_E)));
    let r = x.sub(n.mul(splat(EXP_LN2_HI))).sub(n.mul(splat(EXP_LN2_LO)));
    let p = splat(1.0).add(r.add(r.mul(r).mul(horner(r, &EXP_P))));
    // 2^n in two factors so that n in [-150, 128] never leaves the normal range; the
    // first product is exact, the second rounds once (also into the subnormals).
    let n1 = round_int(n.mul(splat(0.5)));
    p.mul(pow2(n1)).mul(pow2(n.sub(n1)))
}

/// [`exp`] of `v` for `|v| <= 1`, with its bits: there `n = round(v log2 e)` is -1, 0 or
/// 1, so the clamp is the identity and `n1 = round(n/2) = 0` (ties to even), whose factor
/// `2^0` multiplies exactly; what is left is the same operations on the same values.
#[inline(always)]
pub(crate) fn exp_unit<L: Lanes>(v: L) -> L {
    let splat = |c: f32| L::splat(v.isa(), c);
    let n = round_int(v.mul(splat(std::f32::consts::LOG2_E)));
    let r = v.sub(n.mul(splat(EXP_LN2_HI))).sub(n.mul(splat(EXP_LN2_LO)));
    let p = splat(1.0).add(r.add(r.mul(r).mul(horner(r, &EXP_P))));
    p.mul(pow2(n))
}

/// [`exp`] of `v` for `|v| <= 0.34`, with its bits: there `n = 0`, so `r = v`
/// exactly (also for `-0`) and both `2^0` factors multiply exactly.
#[inline(always)]
pub(crate) fn exp_near0<L: Lanes>(v: L) -> L {
    let splat = |c: f32| L::splat(v.isa(), c);
    splat(1.0).add(v.add(v.mul(v).mul(horner(v, &EXP_P))))
}

/// The domain of [`exp_near0`]: `0.34 log2 e < 0.5`, so `round(v log2 e) = 0`.
#[cfg(test)]
pub(crate) const EXP_NEAR0_MAX: f32 = 0.34;

/// Natural logarithm.
#[inline(always)]
pub(crate) fn log<L: Lanes>(x: L) -> L {
    let splat = |c: f32| L::splat(x.isa(), c);
    let subnormal = x.lt(splat(f32::MIN_POSITIVE));
    let xs = L::select(subnormal, x.mul(splat(33_554_432.0)), x); // 2^25
    let bits = xs.to_bits();
    let mut m = L::from_bits(L::int_or(L::int_and(bits, L::int_splat(x.isa(), 0x007f_ffff)), L::int_splat(x.isa(), 0x3f80_0000)));
    let high = splat(std::f32::consts::SQRT_2).lt(m);
    m = L::select(high, m.mul(splat(0.5)), m);
    let bias = L::select(subnormal, splat(-152.0), splat(-127.0)); // 127 (+ 25)
    let carry = L::select(high, splat(1.0), splat(0.0));
    let k = L::int_to_f32(L::int_shr23(bits)).add(bias).add(carry);
    let f = m.sub(splat(1.0));
    let s = f.div(splat(2.0).add(f));
    let z = s.mul(s);
    let r = z.mul(horner(z, &LOG_Q));
    let hfsq = splat(0.5).mul(f).mul(f);
    let inner = hfsq.sub(s.mul(hfsq.add(r)).add(k.mul(splat(LOG_LN2_LO))));
    let y = k.mul(splat(LOG_LN2_HI)).sub(inner.sub(f));
    let y = L::select(x.eq(splat(f32::INFINITY)), x, y);
    let y = L::select(x.eq(splat(0.0)), splat(f32::NEG_INFINITY), y);
    L::select(x.ge(splat(0.0)), y, splat(f32::NAN))
}

/// Hyperbolic tangent.
#[inline(always)]
pub(crate) fn tanh<L: Lanes>(x: L) -> L {
    let splat = |c: f32| L::splat(x.isa(), c);
    let a = x.abs();
    let z = a.mul(a);
    let small = a.add(a.mul(z.mul(horner(z, &TANH_P))));
    let one = splat(1.0);
    let large = one.sub(splat(2.0).div(exp(a.add(a)).add(one)));
    L::select(a.lt(splat(TANH_SPLIT)), small, large).copysign(x)
}

/// `1 / (1 + e^-x)`, as `1/(1+e)` for `x >= 0` and `e/(1+e)` below, with `e = e^-|x|`.
#[inline(always)]
pub(crate) fn sigmoid<L: Lanes>(x: L) -> L {
    let splat = |c: f32| L::splat(x.isa(), c);
    let e = exp(x.abs().neg());
    let num = L::select(x.ge(splat(0.0)), splat(1.0), e);
    num.div(splat(1.0).add(e))
}

/// `erf(a) = a + a P(a^2)` for `0 <= a < ERF_SPLIT`.
#[inline(always)]
fn erf_small<L: Lanes>(a: L) -> L {
    a.add(a.mul(horner(a.mul(a), &ERF_P)))
}

/// Splits `a^2 = hi + lo` with `hi` exact: `ah` keeps the top 12 significant bits of `a`,
/// so `hi = ah^2` is exact and `lo = (a - ah)(a + ah)` is small.
#[inline(always)]
fn square_split<L: Lanes>(a: L) -> (L, L) {
    let ah = L::from_bits(L::int_and(a.to_bits(), L::int_splat(a.isa(), 0xffff_f000_u32 as i32)));
    (ah.mul(ah), a.sub(ah).mul(a.add(ah)))
}

/// `erfc(a) / e^(-hi)` for `a >= ERF_SPLIT`, given `a^2 = hi + lo` from
/// [`square_split`]: `t e^(G(t) - lo)` with `t = 1/(1 + a/2)`. The factor `e^(-hi)` is
/// left to the caller so that it can be applied last.
#[inline(always)]
fn erfc_large_head<L: Lanes>(a: L, lo: L) -> L {
    let splat = |c: f32| L::splat(a.isa(), c);
    let t = splat(1.0).div(splat(1.0).add(a.mul(splat(0.5))));
    t.mul(exp(horner(t, &ERFC_G).sub(lo)))
}

/// The error function (no lane-loop op uses it yet; the ulp tests measure it).
#[allow(dead_code)]
#[inline(always)]
pub(crate) fn erf<L: Lanes>(x: L) -> L {
    let splat = |c: f32| L::splat(x.isa(), c);
    let a = x.abs().clamp(0.0, ERF_MAX);
    let (hi, lo) = square_split(a);
    let large = splat(1.0).sub(erfc_large_head(a, lo).mul(exp(hi.neg())));
    L::select(a.lt(splat(ERF_SPLIT)), erf_small(a), large).copysign(x)
}

/// Gaussian quantities of `x` (`|x| <= GELU_CLAMP`) as products whose last factor
/// carries the underflow, so that a product with `x` taken before that factor rounds
/// only once, also in the subnormal range.
struct Gauss<L> {
    /// `Φ(-|x|) = tail * tail_scale`.
    tail: L,
    tail_scale: L,
    /// `φ(x) = density * scale`.
    density: L,
    scale: L,
}

impl<L: Lanes> Gauss<L> {
    #[inline(always)]
    fn new(x: L) -> Self {
        let splat = |c: f32| L::splat(x.isa(), c);
        let ax = x.abs();
        let a = ax.mul(splat(FRAC_1_SQRT_2));
        // (x/√2)^2 = x^2/2, split exactly as in `square_split` and halved.
        let (hi2, lo2) = square_split(ax);
        let (hi, lo) = (hi2.mul(splat(0.5)), lo2.mul(splat(0.5)));
        let scale = exp(hi.neg());
        let small = a.lt(splat(ERF_SPLIT));
        // The large-argument head (a division, an exponential, a degree-9 polynomial) only
        // when a lane takes it (the vectors of a GELU layer's input are often all small).
        let head_small = splat(1.0).sub(erf_small(a));
        let erfc_head = if L::all(small) { head_small } else { L::select(small, head_small, erfc_large_head(a, lo)) };
        Gauss {
            tail: erfc_head.mul(splat(0.5)),
            tail_scale: L::select(small, splat(1.0), scale),
            density: splat(INV_SQRT_2PI).mul(exp(lo.neg())),
            scale,
        }
    }

    /// Φ(x).
    #[inline(always)]
    fn cdf(&self, x: L) -> L {
        let splat = |c: f32| L::splat(x.isa(), c);
        let lower = self.tail.mul(self.tail_scale);
        L::select(x.ge(splat(0.0)), splat(1.0).sub(lower), lower)
    }
}

/// `x Φ(x)`; `-0` below `-GELU_CLAMP` (including -inf).
#[inline(always)]
pub(crate) fn gelu_erf<L: Lanes>(x: L) -> L {
    let c = x.clamp(-GELU_CLAMP, GELU_CLAMP);
    gelu_erf_from(x, c, &Gauss::new(c))
}

/// `d/dx x Φ(x) = Φ(x) + x φ(x)`.
#[inline(always)]
pub(crate) fn gelu_erf_grad<L: Lanes>(x: L) -> L {
    let c = x.clamp(-GELU_CLAMP, GELU_CLAMP);
    gelu_erf_grad_from(c, &Gauss::new(c))
}

/// `(gelu_erf(x), gelu_erf_grad(x))` from one evaluation of the Gaussian terms (the
/// expensive part of both): the same operations on the same values, so the bits of the two
/// functions.
#[inline(always)]
pub(crate) fn gelu_erf_with_grad<L: Lanes>(x: L) -> (L, L) {
    let c = x.clamp(-GELU_CLAMP, GELU_CLAMP);
    let g = Gauss::new(c);
    (gelu_erf_from(x, c, &g), gelu_erf_grad_from(c, &g))
}

/// [`gelu_erf_with_grad`] for the lanes with `|x|/√2 < ERF_SPLIT` (set in the returned
/// mask; the other lanes' values are meaningless, and NaN lanes are never set), with its
/// bits and less work. On those lanes `x = clamp(x)`, Φ's tail takes the small-argument
/// head, and its scale factor 1 multiplies exactly, so `x Φ(x)` is `x·cdf` on both sides
/// of 0; `x²/2 = hi + lo` has `hi <= 0.77` and `0 <= lo < 0.001` (`square_split`), so
/// `e^(-hi)` and `e^(-lo)` are [`exp_unit`] and [`exp_near0`]; and `hi·(-0.5)` is the
/// exact negation of `hi·0.5` (rounding is symmetric in sign).
#[inline(always)]
pub(crate) fn gelu_erf_with_grad_small<L: Lanes>(x: L) -> (L, L, L::Mask) {
    let splat = |c: f32| L::splat(x.isa(), c);
    let ax = x.abs();
    let a = ax.mul(splat(FRAC_1_SQRT_2));
    let small = a.lt(splat(ERF_SPLIT));
    let (hi2, lo2) = square_split(ax);
    let scale = exp_unit(hi2.mul(splat(-0.5)));
    let density = splat(INV_SQRT_2PI).mul(exp_near0(lo2.mul(splat(-0.5))));
    let tail = splat(1.0).sub(erf_small(a)).mul(splat(0.5));
    let cdf = L::select(x.ge(splat(0.0)), splat(1.0).sub(tail), tail);
    (x.mul(cdf), cdf.add(x.mul(density).mul(scale)), small)
}

/// [`gelu_erf`] of `x` given `c = clamp(x, ±GELU_CLAMP)` and `g = Gauss::new(c)`.
#[inline(always)]
fn gelu_erf_from<L: Lanes>(x: L, c: L, g: &Gauss<L>) -> L {
    let splat = |v: f32| L::splat(x.isa(), v);
    let left = x.mul(g.tail).mul(g.tail_scale);
    let y = L::select(x.ge(splat(0.0)), x.mul(g.cdf(c)), left);
    L::select(x.lt(splat(-GELU_CLAMP)), splat(-0.0), y)
}

/// [`gelu_erf_grad`] given `c = clamp(x, ±GELU_CLAMP)` and `g = Gauss::new(c)`.
#[inline(always)]
fn gelu_erf_grad_from<L: Lanes>(c: L, g: &Gauss<L>) -> L {
    g.cdf(c).add(c.mul(g.density).mul(g.scale))
}

/// `v = 2u = 2 sqrt(2/pi) (x + 0.044715 x^3)`, so that `0.5 (1 + tanh u) = sigmoid(v)`.
#[inline(always)]
fn gelu_tanh_arg<L: Lanes>(x: L) -> L {
    let splat = |c: f32| L::splat(x.isa(), c);
    x.mul(splat(GELU_K2).add(splat(GELU_K2C).mul(x.mul(x))))
}

/// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, evaluated as `x sigmoid(2u)`.
#[inline(always)]
pub(crate) fn gelu_tanh<L: Lanes>(x: L) -> L {
    let splat = |c: f32| L::splat(x.isa(), c);
    let s = sigmoid(gelu_tanh_arg(x.clamp(-GELU_CLAMP, GELU_CLAMP)));
    L::select(x.lt(splat(-GELU_CLAMP)), splat(-0.0), x.mul(s))
}

/// Slope of [`gelu_tanh`]: `s + x s (1 - s) (K2 + 3 K2C x^2)` with `s = sigmoid(v)`,
/// which equals `0.5(1+t) + 0.5 x (1-t^2) k (1 + 3 * 0.044715 x^2)`, `t = tanh(v/2)`.
/// `s(1-s) = e/(1+e)^2` with `e = e^-|v|`, free of cancellation.
#[inline(always)]
pub(crate) fn gelu_tanh_grad<L: Lanes>(x: L) -> L {
    let splat = |c: f32| L::splat(x.isa(), c);
    let x = x.clamp(-GELU_CLAMP, GELU_CLAMP);
    let v = gelu_tanh_arg(x);
    let e = exp(v.abs().neg());
    let d = splat(1.0).add(e);
    let s = L::select(v.ge(splat(0.0)), splat(1.0), e).div(d);
    let s1s = e.div(d.mul(d));
    let slope = splat(GELU_K2).add(splat(GELU_K6C).mul(x.mul(x)));
    s.add(x.mul(s1s).mul(slope))
}

/// `(s, e)` with `s = a + b` rounded and `s + e = a + b` exactly (Knuth's TwoSum).
#[inline(always)]
fn two_sum<L: Lanes>(a: L, b: L) -> (L, L) {
    let s = a.add(b);
    let bb = s.sub(a);
    (s, a.sub(s.sub(bb)).add(b.sub(bb)))
}

/// `a = |x|` reduced: `(hi, lo, q)` with `a = (4k + q)·π/2 + hi + lo`, `|hi + lo| ≲ π/4`,
/// `q ∈ {0, 1, 2, 3}` (as `f32`). Below [`TRIG_CW_MAX`]: `n = round(a·2/π)` and
/// `a − n·π/2` over the six pieces of [`PIO2`], each difference kept exactly by TwoSum
/// (`lo` collects the errors). Finite lanes at or above it go, one at a time, through
/// [`reduce_large`] (the same scalar code on every path). ±inf and NaN give NaN.
#[inline(always)]
fn reduce_pio2<L: Lanes>(a: L) -> (L, L, L) {
    let splat = |c: f32| L::splat(a.isa(), c);
    let shifted = a.mul(splat(FRAC_2_PI)).add(splat(ROUND_MAGIC));
    let q = L::int_to_f32(L::int_and(shifted.to_bits(), L::int_splat(a.isa(), 3)));
    let n = shifted.sub(splat(ROUND_MAGIC));
    let mut t = a.sub(n.mul(splat(PIO2[0])));
    let mut lo = splat(0.0);
    for &c in &PIO2[1..] {
        let (s, e) = two_sum(t, n.mul(splat(c)).neg());
        t = s;
        lo = lo.add(e);
    }
    let (mut hi, mut lo) = two_sum(t, lo);
    let mut q = q;
    let finite = L::select(a.lt(splat(f32::INFINITY)), a, splat(0.0));
    let large = L::select(splat(TRIG_CW_MAX).le(finite), splat(1.0), splat(0.0));
    let mut flags = [0.0f32; 16];
    large.store(&mut flags);
    if flags[..L::WIDTH].iter().any(|&f| f != 0.0) {
        let (mut av, mut hv, mut lv, mut qv) = ([0.0f32; 16], [0.0f32; 16], [0.0f32; 16], [0.0f32; 16]);
        a.store(&mut av);
        hi.store(&mut hv);
        lo.store(&mut lv);
        q.store(&mut qv);
        for i in (0..L::WIDTH).filter(|&i| flags[i] != 0.0) {
            (hv[i], lv[i], qv[i]) = reduce_large(av[i]);
        }
        (hi, lo, q) = (L::load(a.isa(), &hv), L::load(a.isa(), &lv), L::load(a.isa(), &qv));
    }
    (hi, lo, q)
}

/// Payne–Hanek reduction of a finite `a >= TRIG_CW_MAX` in integers: with `a = m·2^k`
/// (`m` the 24-bit significand), `y = m·W mod 2^128` where `W` holds the bits `k − 1 ..
/// k + 126` of `2/π`, is `a·2/π mod 4` with 126 fraction bits (the dropped leading bits
/// contribute multiples of 4; the truncated tail less than `2^−102`). `q = round(y) mod 4`,
/// and the fraction `y − q` (in `[−½, ½)`) times `π/2` is formed in `f64` and split into
/// `hi + lo`. Integer and f64 operations are exact or correctly rounded, so this is the same
/// on every machine.
fn reduce_large(a: f32) -> (f32, f32, f32) {
    let bits = a.to_bits();
    let m = ((bits & 0x007f_ffff) | 0x0080_0000) as u128;
    let k = ((bits >> 23) & 0xff) as i32 - 150;
    // floor(2/π · 2^s) mod 2^128 with s = k + 126 (115 <= s <= 230).
    let shift = 320 - (k + 126);
    let mut w = 0u128;
    for (j, &word) in FRAC_2_PI_BITS.iter().enumerate() {
        let pos = 320 - 64 * (j as i32 + 1) - shift; // the word's lowest bit in `w`
        if pos >= 128 || pos <= -64 {
            continue;
        }
        w |= if pos >= 0 { (word as u128) << pos } else { (word as u128) >> -pos };
    }
    let y = m.wrapping_mul(w);
    let q = (y.wrapping_add(1 << 125) >> 126) & 3;
    let frac = y.wrapping_sub(q << 126) as i128;
    let r = frac as f64 * (std::f64::consts::FRAC_PI_2 / (1u128 << 126) as f64);
    let hi = r as f32;
    (hi, (r - hi as f64) as f32, q as f32)
}

/// `sin(x + y)` for `|x| <= ~π/4`, `|y| <= ulp(x)`: fdlibm's `__kernel_sin` with tail.
#[inline(always)]
fn sin_kernel<L: Lanes>(x: L, y: L) -> L {
    let splat = |c: f32| L::splat(x.isa(), c);
    let z = x.mul(x);
    let v = z.mul(x);
    let r = horner(z, &SIN_S[1..]);
    x.sub(z.mul(splat(0.5).mul(y).sub(v.mul(r))).sub(y).sub(v.mul(splat(SIN_S[0]))))
}

/// `cos(x + y)` for `|x| <= ~π/4`, `|y| <= ulp(x)`: fdlibm's `__kernel_cos`, with the
/// rounding error of `1 − z/2` added back.
#[inline(always)]
fn cos_kernel<L: Lanes>(x: L, y: L) -> L {
    let splat = |c: f32| L::splat(x.isa(), c);
    let z = x.mul(x);
    let r = z.mul(horner(z, &COS_C));
    let hz = splat(0.5).mul(z);
    let w = splat(1.0).sub(hz);
    w.add(splat(1.0).sub(w).sub(hz).add(z.mul(r).sub(x.mul(y))))
}

/// `sin(q·π/2 + hi + lo)`: `sin`, `cos`, `−sin`, `−cos` of the reduced argument.
#[inline(always)]
fn quadrant<L: Lanes>(hi: L, lo: L, q: L) -> L {
    let splat = |c: f32| L::splat(q.isa(), c);
    let half = round_int(q.mul(splat(0.5)).sub(splat(0.25))); // floor(q / 2)
    let odd = q.sub(half.add(half));
    let v = L::select(odd.eq(splat(1.0)), cos_kernel(hi, lo), sin_kernel(hi, lo));
    L::select(half.eq(splat(1.0)), v.neg(), v)
}

/// Sine (argument reduction: [`reduce_pio2`]).
#[inline(always)]
pub(crate) fn sin<L: Lanes>(x: L) -> L {
    let (hi, lo, q) = reduce_pio2(x.abs());
    let sign = L::int_and(x.to_bits(), L::int_splat(x.isa(), i32::MIN));
    L::from_bits(L::int_xor(quadrant(hi, lo, q).to_bits(), sign))
}

/// Cosine (argument reduction: [`reduce_pio2`]); `cos(a) = sin(a + π/2)`.
#[inline(always)]
pub(crate) fn cos<L: Lanes>(x: L) -> L {
    let splat = |c: f32| L::splat(x.isa(), c);
    let (hi, lo, q) = reduce_pio2(x.abs());
    let q1 = q.add(splat(1.0));
    quadrant(hi, lo, L::select(q1.eq(splat(4.0)), splat(0.0), q1))
}

/// `a^b` lane by lane with [`super::math64::powf`] (fixed `f64` `exp` and `log`, the same
/// scalar code on every path; `docs/transcendentals.md`).
#[inline(always)]
pub(crate) fn pow<L: Lanes>(a: L, b: L) -> L {
    let (mut av, mut bv) = ([0.0f32; 16], [0.0f32; 16]);
    a.store(&mut av);
    b.store(&mut bv);
    for (x, &y) in av[..L::WIDTH].iter_mut().zip(&bv[..L::WIDTH]) {
        *x = super::math64::powf(*x, y);
    }
    L::load(a.isa(), &av)
}
