//! Scalar forms of the fixed-polynomial elementary functions, for kernels that work one
//! element at a time (recurrent cell updates, losses). Each is the width-1 instantiation
//! of the generic function in `transcendentals`, so it gives the same bits as the lane
//! loops on every path, in both modes.

use super::transcendentals as tr;

/// `e^x`.
pub fn exp(x: f32) -> f32 {
    tr::exp(x)
}

/// Natural logarithm.
pub fn log(x: f32) -> f32 {
    tr::log(x)
}

/// The error function.
pub fn erf(x: f32) -> f32 {
    tr::erf(x)
}

/// `1 / (1 + e^(−x))`.
pub fn sigmoid(x: f32) -> f32 {
    tr::sigmoid(x)
}

/// Hyperbolic tangent.
pub fn tanh(x: f32) -> f32 {
    tr::tanh(x)
}

/// `x·Φ(x)`.
pub fn gelu_erf(x: f32) -> f32 {
    tr::gelu_erf(x)
}

/// `½x(1 + tanh(√(2/π)(x + 0.044715x³)))`.
pub fn gelu_tanh(x: f32) -> f32 {
    tr::gelu_tanh(x)
}

/// Slope of [`gelu_erf`]: `Φ(x) + x·φ(x)`.
pub fn gelu_erf_grad(x: f32) -> f32 {
    tr::gelu_erf_grad(x)
}

/// Slope of [`gelu_tanh`].
pub fn gelu_tanh_grad(x: f32) -> f32 {
    tr::gelu_tanh_grad(x)
}

/// `x^y` with C99 `pow`'s special values: [`super::math64::powf`] (fixed `f64` `exp` and
/// `log`, the same bits as the `Pow` lane op on every path).
///
/// # Examples
///
/// ```
/// use om_core::kernels::math::pow;
/// assert_eq!(pow(3.0, 2.0), 9.0);
/// assert_eq!(pow(f32::NAN, 0.0), 1.0);
/// ```
pub fn pow(x: f32, y: f32) -> f32 {
    super::math64::powf(x, y)
}
