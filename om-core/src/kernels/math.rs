//! Scalar elementary functions used by the activation operators.
//!
//! Interim implementations (f64 evaluation rounded to f32); the fixed-polynomial exact
//! transcendentals replace them with the same names.

/// `√(2/π)`
const K_TANH: f64 = 0.797_884_560_802_865_4;
/// `1/√(2π)`
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

fn erf64(x: f64) -> f64 {
    // erfc by a Chebyshev fit with fractional error below 1.2e-7 everywhere.
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07 + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 {
        1.0 - erfc
    } else {
        erfc - 1.0
    }
}

/// The error function.
pub fn erf(x: f32) -> f32 {
    erf64(x as f64) as f32
}

/// `1 / (1 + e^(−x))`.
pub fn sigmoid(x: f32) -> f32 {
    (1.0 / (1.0 + (-(x as f64)).exp())) as f32
}

/// Hyperbolic tangent.
pub fn tanh(x: f32) -> f32 {
    (x as f64).tanh() as f32
}

/// `x·Φ(x)`.
pub fn gelu_erf(x: f32) -> f32 {
    let x = x as f64;
    (0.5 * x * (1.0 + erf64(x * std::f64::consts::FRAC_1_SQRT_2))) as f32
}

/// `½x(1 + tanh(√(2/π)(x + 0.044715x³)))`.
pub fn gelu_tanh(x: f32) -> f32 {
    let x = x as f64;
    (0.5 * x * (1.0 + (K_TANH * (x + 0.044715 * x * x * x)).tanh())) as f32
}

/// Slope of [`gelu_erf`]: `Φ(x) + x·φ(x)`.
pub fn gelu_erf_grad(x: f32) -> f32 {
    let x = x as f64;
    let cdf = 0.5 * (1.0 + erf64(x * std::f64::consts::FRAC_1_SQRT_2));
    let pdf = INV_SQRT_2PI * (-0.5 * x * x).exp();
    (cdf + x * pdf) as f32
}

/// Slope of [`gelu_tanh`].
pub fn gelu_tanh_grad(x: f32) -> f32 {
    let x = x as f64;
    let t = (K_TANH * (x + 0.044715 * x * x * x)).tanh();
    (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * K_TANH * (1.0 + 3.0 * 0.044715 * x * x)) as f32
}
