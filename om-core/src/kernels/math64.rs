//! Fixed double-precision `exp` and `log` (the CTC recursions use them), built only from IEEE
//! `+ − × ÷`, comparisons and exact bit manipulation of the exponent, so their results are
//! the same on every platform and in every arithmetic mode (unlike the platform libm behind
//! `f64::exp`/`f64::ln`). The algorithms and coefficients are those of fdlibm's `e_exp.c`
//! and `e_log.c` (as in musl); `docs/ctc.md` gives the formulas and the measured accuracy.
//! [`powf`], the `f32` power of the `pow` operators, is built on them
//! (`docs/transcendentals.md`, section pow).

#![allow(clippy::excessive_precision)]

const LN2_HI: f64 = 6.93147180369123816490e-01;
const LN2_LO: f64 = 1.90821492927058770002e-10;
const P1: f64 = 1.66666666666666019037e-01;
const P2: f64 = -2.77777777770155933842e-03;
const P3: f64 = 6.61375632143793436117e-05;
const P4: f64 = -1.65339022054652515390e-06;
const P5: f64 = 4.13813679705723846039e-08;
const LG1: f64 = 6.666666666666735130e-01;
const LG2: f64 = 3.999999999940941908e-01;
const LG3: f64 = 2.857142874366239149e-01;
const LG4: f64 = 2.222219843214978396e-01;
const LG5: f64 = 1.818357216161805012e-01;
const LG6: f64 = 1.531383769920937332e-01;
const LG7: f64 = 1.479819860511658591e-01;
/// Above this `exp` overflows.
const EXP_OVERFLOW: f64 = 7.09782712893383973096e+02;
/// Below this `exp` underflows to 0.
const EXP_UNDERFLOW: f64 = -7.45133219101941108420e+02;
/// 1.5·2⁵²: adding and subtracting it rounds to the nearest integer (ties to even).
const ROUND: f64 = 6_755_399_441_055_744.0;

/// `2^k` for `k` in `-1022..=1023`, built from its bits.
fn pow2(k: i64) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `eˣ`: `x = k·ln2 + r` with `k = round(x/ln2)` (Cody–Waite: `k·ln2_hi` is exact),
/// `|r| ≤ ln2/2`; `eʳ = 1 + r + r·c/(2 − c)` with `c = r − r²(P1 + r²(P2 + … + r²P5))`
/// (a Remez fit of `r·(eʳ+1)/(eʳ−1)`), scaled by `2^k`.
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > EXP_OVERFLOW {
        return f64::INFINITY;
    }
    if x < EXP_UNDERFLOW {
        return 0.0;
    }
    let k = (x * std::f64::consts::LOG2_E + ROUND) - ROUND;
    let hi = x - k * LN2_HI;
    let lo = k * LN2_LO;
    let r = hi - lo;
    let t = r * r;
    let c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
    let y = 1.0 + ((r * c) / (2.0 - c) - lo + hi);
    let k = k as i64;
    if k > 1023 {
        y * pow2(k - 1) * 2.0
    } else if k < -1022 {
        y * pow2(k + 1000) * pow2(-1000)
    } else {
        y * pow2(k)
    }
}

/// Natural logarithm: `x = 2^k·(1+f)` with `√2/2 < 1+f < √2` (exact, from the bits);
/// with `s = f/(2+f)`, `log(1+f) = f − s·(f − R)` where `R ≈ 2s² + (2/3)s⁴ + …` is the
/// Remez polynomial `s²(Lg1 + s²(Lg2 + … + s²Lg7))`; plus `k·ln2` in two parts.
pub fn log(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x == f64::INFINITY {
        return x;
    }
    let mut k: i64 = 0;
    let mut bits = x.to_bits();
    if bits < 1 << 52 {
        // Subnormal: scale by 2⁵⁴ (exact).
        k -= 54;
        bits = (x * pow2(54)).to_bits();
    }
    let mut hx = (bits >> 32) as u32;
    // Reduce x into [√2/2, √2).
    hx += 0x3ff0_0000 - 0x3fe6_a09e;
    k += (hx >> 20) as i64 - 0x3ff;
    hx = (hx & 0x000f_ffff) + 0x3fe6_a09e;
    let xr = f64::from_bits(((hx as u64) << 32) | (bits & 0xffff_ffff));
    let f = xr - 1.0;
    let hfsq = 0.5 * f * f;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (LG2 + w * (LG4 + w * LG6));
    let t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
    let r = t2 + t1;
    let dk = k as f64;
    s * (hfsq + r) + dk * LN2_LO - hfsq + f + dk * LN2_HI
}

/// `log(eᵃ + eᵇ)`, exact when either is −∞; NaN propagates.
pub fn log_sum_exp2(a: f64, b: f64) -> f64 {
    log_sum_exp3(a, b, f64::NEG_INFINITY)
}

/// `log(eᵃ + eᵇ + eᶜ) = m + log(e^(a−m) + e^(b−m) + e^(c−m))`, `m` the largest; −∞ if
/// all are −∞; NaN propagates.
pub fn log_sum_exp3(a: f64, b: f64, c: f64) -> f64 {
    let mut m = a;
    if b > m {
        m = b;
    }
    if c > m {
        m = c;
    }
    if m == f64::NEG_INFINITY {
        return if a.is_nan() || b.is_nan() || c.is_nan() { f64::NAN } else { m };
    }
    m + log(exp(a - m) + exp(b - m) + exp(c - m))
}

/// `xʸ` for `f32` operands with C99/IEEE-754 `pow`'s special values (those of PyTorch's
/// `torch.pow`), computed as `exp(y·log|x|)` in `f64` with the fixed [`exp`] and [`log`]:
/// the relative error of the `f64` value is below 2⁻⁴⁴; it is rounded to 40 bits and then to
/// `f32`, so the result is within `0.5 + 2⁻¹⁶` ulp: exact whenever `xʸ` is an `f32`, ties
/// to even when `xʸ` lies halfway between two, correctly rounded except within 2⁻¹⁶ ulp of
/// such a midpoint, and the same bits on every machine.
///
/// Special values: `x⁰ = 1` and `1ʸ = 1` for every `x`, `y` (NaN too); otherwise a NaN
/// operand gives NaN; a finite negative `x` with a finite non-integer `y` gives NaN; a
/// negative `x` (`−0` and `−∞` included) with an odd integer `y` gives the negated power of
/// `|x|`; `(−1)^±∞ = 1`; `|x| < 1` gives `+0` at `y = +∞` and `+∞` at `y = −∞` (the reverse
/// for `|x| > 1`); `±0` and `±∞` give `0` or `∞` by the sign of `y`.
///
/// # Examples
///
/// ```
/// use om_core::kernels::math64::powf;
/// assert_eq!(powf(2.0, 10.0), 1024.0);
/// assert_eq!(powf(-2.0, 3.0), -8.0);
/// assert!(powf(-2.0, 0.5).is_nan());
/// assert_eq!(powf(f32::NAN, 0.0), 1.0);
/// assert_eq!(powf(-0.0, -1.0), f32::NEG_INFINITY);
/// ```
pub fn powf(x: f32, y: f32) -> f32 {
    if y == 0.0 || x == 1.0 {
        return 1.0;
    }
    if x.is_nan() || y.is_nan() {
        return f32::NAN;
    }
    let integer = y.trunc() == y; // exact; true for ±∞
                                  // Every f32 of magnitude ≥ 2²⁴ is an even integer.
    let odd = integer && y.abs() < 16_777_216.0 && (y as i32) & 1 == 1;
    if x < 0.0 && x.is_finite() && !integer {
        return f32::NAN;
    }
    if x == -1.0 {
        // y = ±∞ (log 1 = 0 would give ∞·0 below) or an integer.
        return if odd { -1.0 } else { 1.0 };
    }
    // |x| = 0 or ∞ and y = ±∞ need no case: y·log|x| is ±∞ with the right sign.
    let wide = exp(y as f64 * log(x.abs() as f64));
    // Round to 40 significant bits (half up, on the bits of a non-negative double; +∞
    // stays +∞) before rounding to f32: an f32 or a midpoint between two f32s (≤ 25 bits)
    // within 2⁻⁴⁴ of `wide` becomes exact, so exact results and ties (to even) come out
    // as if correctly rounded, at a cost of at most 2⁻⁴¹ relative elsewhere.
    let magnitude = f64::from_bits((wide.to_bits() + (1 << 11)) & !0xfff) as f32;
    if odd && x.is_sign_negative() {
        -magnitude
    } else {
        magnitude
    }
}

#[cfg(test)]
mod tests {
    use super::{exp, log, log_sum_exp2, log_sum_exp3, powf};

    /// Distance in units in the last place between two finite doubles of the same sign.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn fixed_exp_and_log_match_libm_closely() {
        let mut rng = crate::rng::Rng::new(7);
        let (mut worst_exp, mut worst_log) = (0u64, 0u64);
        let (mut diff_exp, mut diff_log, mut n_exp) = (0usize, 0usize, 0usize);
        const N: usize = 2_000_000;
        for i in 0..N {
            let u = rng.next_f64();
            // exp over its whole finite range, denser near 0.
            let x = if i % 2 == 0 { (u - 0.5) * 1400.0 } else { (u - 0.5) * 8.0 };
            let (ours, libm) = (exp(x), x.exp());
            if libm.is_normal() {
                worst_exp = worst_exp.max(ulps(ours, libm));
                diff_exp += (ours != libm) as usize;
                n_exp += 1;
            }
            // log over many binades, and near 1.
            let y = if i % 2 == 0 { 2f64.powf((u - 0.5) * 2000.0) } else { 0.5 + u };
            worst_log = worst_log.max(ulps(log(y), y.ln()));
            diff_log += (log(y) != y.ln()) as usize;
        }
        println!(
            "fixed exp: worst {worst_exp} ulp ({diff_exp} of {n_exp} differ), fixed log: worst {worst_log} ulp ({diff_log} of {N} differ) vs libm"
        );
        assert!(worst_exp <= 1 && worst_log <= 1, "exp {worst_exp} ulp, log {worst_log} ulp");
    }

    #[test]
    fn fixed_exp_and_log_special_values() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp(710.0), f64::INFINITY);
        assert_eq!(exp(-746.0), 0.0);
        assert!(exp(-740.0) > 0.0 && exp(-740.0) < f64::MIN_POSITIVE);
        assert!(exp(f64::NAN).is_nan());
        assert_eq!(log(1.0), 0.0);
        assert_eq!(log(0.0), f64::NEG_INFINITY);
        assert_eq!(log(f64::INFINITY), f64::INFINITY);
        assert!(log(-1.0).is_nan() && log(f64::NAN).is_nan());
        let sub = 3e-320;
        assert!(ulps(log(sub), sub.ln()) <= 1);
        assert_eq!(log_sum_exp3(f64::NEG_INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY), f64::NEG_INFINITY);
        assert_eq!(log_sum_exp2(f64::NEG_INFINITY, -3.5), -3.5);
        assert!(log_sum_exp2(f64::NAN, -1.0).is_nan());
        assert!(log_sum_exp2(f64::NEG_INFINITY, f64::NAN).is_nan());
    }

    /// C99 Annex F.9.4.4 `pow` special values, checked against the f64 libm `powf` too.
    #[test]
    fn powf_special_values() {
        let (inf, nan) = (f32::INFINITY, f32::NAN);
        let sub = f32::from_bits(1);
        #[rustfmt::skip]
        let cases: &[(f32, f32, f32)] = &[
            (nan, 0.0, 1.0), (nan, -0.0, 1.0), (inf, 0.0, 1.0), (-inf, 0.0, 1.0), (0.0, 0.0, 1.0), (-3.0, -0.0, 1.0),
            (1.0, nan, 1.0), (1.0, inf, 1.0), (1.0, -inf, 1.0), (1.0, 7.5, 1.0),
            (-1.0, inf, 1.0), (-1.0, -inf, 1.0), (-1.0, 3.0, -1.0), (-1.0, 4.0, 1.0), (-1.0, 1e30, 1.0),
            (0.0, -3.0, inf), (-0.0, -3.0, -inf), (0.0, -2.0, inf), (-0.0, -2.0, inf), (-0.0, -0.5, inf), (-0.0, -inf, inf),
            (0.0, 3.0, 0.0), (-0.0, 3.0, -0.0), (-0.0, 2.0, 0.0), (-0.0, 0.5, 0.0), (-0.0, inf, 0.0),
            (0.5, inf, 0.0), (-0.5, inf, 0.0), (0.5, -inf, inf), (-0.5, -inf, inf),
            (2.0, inf, inf), (-2.0, inf, inf), (2.0, -inf, 0.0), (-2.0, -inf, 0.0),
            (-inf, -3.0, -0.0), (-inf, -2.0, 0.0), (-inf, -0.5, 0.0), (-inf, 3.0, -inf), (-inf, 2.0, inf), (-inf, 0.5, inf),
            (inf, -1.0, 0.0), (inf, 0.5, inf), (inf, inf, inf), (inf, -inf, 0.0),
            (-2.0, 3.0, -8.0), (-2.0, 2.0, 4.0), (-2.0, -1.0, -0.5), (-2.0, 16_777_216.0, inf), (-0.5, 3.0e7, 0.0), (-0.5, -3.0e7, inf), (-3.0, 3.0e7, inf),
            (2.0, 10.0, 1024.0), (2.0, -149.0, sub), (2.0, -150.0, 0.0), (2.0, 128.0, inf), (2.0, 127.0, f32::MAX / (2.0 - f32::EPSILON)),
            (sub, 1.0, sub), (f32::from_bits(2), 0.5, f32::from_bits((127 - 74) << 23)), (4.0, 0.5, 2.0), (9.0, 1.5, 27.0), (10.0, -1.0, 1.0 / 10.0),
        ];
        for &(x, y, want) in cases {
            let got = powf(x, y);
            assert_eq!(got.to_bits(), want.to_bits(), "powf({x:e}, {y:e}) = {got:e}, want {want:e}");
            assert_eq!(got.to_bits(), x.powf(y).to_bits(), "powf({x:e}, {y:e}) differs from libm's {:e}", x.powf(y));
        }
        for (x, y) in [(nan, 1.0), (2.0, nan), (nan, nan), (-2.0, 0.5), (-2.0, -1.5), (-f32::MIN_POSITIVE, 1e-3), (-sub, 0.5)] {
            assert!(powf(x, y).is_nan(), "powf({x:e}, {y:e}) = {:e}, want NaN", powf(x, y));
        }
    }
}
