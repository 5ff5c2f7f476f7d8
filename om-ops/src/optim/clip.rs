//! Gradient clipping as `torch.nn.utils.clip_grad_norm_` / `clip_grad_value_`: in place,
//! on the accumulated gradients of the given parameters (those without one are skipped).

use om_core::{no_grad, DType, Error, Result, Tensor};

/// The gradients of `params` (those that have one), each a contiguous `f32` tensor.
fn grads(op: &'static str, params: &[Tensor]) -> Result<Vec<Tensor>> {
    let grads: Vec<Tensor> = params.iter().filter_map(Tensor::grad).collect();
    if let Some(i) = grads.iter().position(|g| g.dtype() != DType::F32 || !g.is_contiguous()) {
        return Err(Error::argument(op, format!("gradient {i} must be a contiguous f32 tensor")));
    }
    Ok(grads)
}

/// Scales the gradients of `params` so that their joint `norm_type`-norm is at most
/// `max_norm`, and returns the norm they had (`torch.nn.utils.clip_grad_norm_`).
///
/// The norm is over all gradients as one vector: `(Σ |g|ᵖ)^(1/p)` accumulated in `f64`
/// in parameter order then element order (so it does not depend on the thread count),
/// or `max |g|` for `norm_type = ∞`; it is returned rounded to `f32`. Each gradient is
/// multiplied by `min(1, max_norm / (norm + 1e-6))` computed in `f32`, as PyTorch does
/// (also when that is 1). A NaN or infinite norm is an error when `error_if_nonfinite`,
/// the gradients untouched; otherwise the gradients are scaled by the NaN factor, as in
/// PyTorch. `norm_type` must be positive (any p, or `f32::INFINITY`), `max_norm` ≥ 0.
/// PyTorch's defaults are `norm_type=2.0, error_if_nonfinite=False`.
///
/// # Examples
///
/// ```
/// use om_ops::optim::clip_grad_norm;
/// use om_ops::methods::*;
/// use om_ops::Tensor;
/// let w = Tensor::from_vec(vec![3.0, 4.0], &[2])?.requires_grad()?;
/// w.mul(&w)?.sum(None, false)?.mul_scalar(0.5)?.backward()?; // gradient w = [3, 4], norm 5
/// let norm = clip_grad_norm(&[w.clone()], 1.0, 2.0, false)?;
/// assert_eq!(norm, 5.0);
/// let g = w.grad().unwrap().to_vec();
/// assert!((g[0] - 0.6).abs() < 1e-6 && (g[1] - 0.8).abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
pub fn clip_grad_norm(params: &[Tensor], max_norm: f32, norm_type: f32, error_if_nonfinite: bool) -> Result<f32> {
    const OP: &str = "clip_grad_norm";
    if !(max_norm >= 0.0 && max_norm.is_finite()) {
        return Err(Error::argument(OP, format!("max_norm must be a finite number ≥ 0, got {max_norm}")));
    }
    if norm_type.is_nan() || norm_type <= 0.0 {
        return Err(Error::argument(OP, format!("norm_type must be above 0 (or infinity), got {norm_type}")));
    }
    let grads = grads(OP, params)?;
    let p = norm_type as f64;
    let mut acc = 0.0f64;
    for g in &grads {
        g.with_f32(|v| {
            for &x in v {
                let a = (x as f64).abs();
                if norm_type == f32::INFINITY {
                    // NaN propagates, as torch's max does
                    acc = if a.is_nan() || acc.is_nan() { f64::NAN } else { acc.max(a) };
                } else if p == 2.0 {
                    acc += a * a;
                } else if p == 1.0 {
                    acc += a;
                } else {
                    acc += a.powf(p);
                }
            }
        });
    }
    let total = if norm_type == f32::INFINITY || p == 1.0 {
        acc
    } else if p == 2.0 {
        acc.sqrt()
    } else {
        acc.powf(1.0 / p)
    } as f32;
    if error_if_nonfinite && !total.is_finite() {
        return Err(Error::argument(
            OP,
            format!("the total norm of order {norm_type} of the gradients is {total}; the gradients are left as they were"),
        ));
    }
    let coef = (max_norm / (total + 1e-6)).min(1.0);
    // f32::min returns the other operand for NaN; torch.clamp keeps NaN.
    let coef = if coef.is_nan() || total.is_nan() { f32::NAN } else { coef };
    no_grad(|| grads.iter().try_for_each(|g| g.update_f32(OP, |v| v.iter_mut().for_each(|x| *x *= coef))))?;
    Ok(total)
}

/// Clamps every gradient element of `params` to `[−clip_value, clip_value]`
/// (`torch.nn.utils.clip_grad_value_`); NaN stays NaN. `clip_value` must be ≥ 0.
///
/// # Examples
///
/// ```
/// use om_ops::optim::clip_grad_value;
/// use om_ops::methods::*;
/// use om_ops::Tensor;
/// let w = Tensor::from_vec(vec![3.0, -0.5], &[2])?.requires_grad()?;
/// w.mul(&w)?.sum(None, false)?.backward()?; // gradient [6, -1]
/// clip_grad_value(&[w.clone()], 2.0)?;
/// assert_eq!(w.grad().unwrap().to_vec(), [2.0, -1.0]);
/// # Ok::<(), om_ops::Error>(())
/// ```
pub fn clip_grad_value(params: &[Tensor], clip_value: f32) -> Result<()> {
    const OP: &str = "clip_grad_value";
    if clip_value.is_nan() || clip_value < 0.0 {
        return Err(Error::argument(OP, format!("clip_value must be ≥ 0, got {clip_value}")));
    }
    let grads = grads(OP, params)?;
    no_grad(|| grads.iter().try_for_each(|g| g.update_f32(OP, |v| v.iter_mut().for_each(|x| *x = x.clamp(-clip_value, clip_value)))))
}
