//! Gradient checking (spec section 6): analytic gradients against central float32
//! differences of `L = Σ W·f(x)`, with `W` fixed pseudo-random and `L` summed in f64.

use crate::autograd::no_grad;
use crate::error::{Error, Result};
use crate::registry::Case;
use crate::tensor::Tensor;

/// The worst errors found for one checked input.
#[derive(Clone, Debug, PartialEq)]
pub struct InputReport {
    /// Position of the input in the case.
    pub index: usize,
    /// Largest `|analytic − numeric|`.
    pub worst_abs: f64,
    /// Largest `|analytic − numeric| / max(|numeric|, |analytic|, 1e-6)` .
    pub worst_rel: f64,
    /// Elements outside `atol + rtol·|numeric|`.
    pub failures: usize,
}

/// The outcome of one case.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// One entry per input that requires gradients.
    pub inputs: Vec<InputReport>,
}

impl Report {
    /// Whether every element of every input was within tolerance.
    pub fn passed(&self) -> bool {
        self.inputs.iter().all(|i| i.failures == 0)
    }

    /// Largest absolute error over the inputs.
    pub fn worst_abs(&self) -> f64 {
        self.inputs.iter().map(|i| i.worst_abs).fold(0.0, f64::max)
    }

    /// Largest relative error over the inputs.
    pub fn worst_rel(&self) -> f64 {
        self.inputs.iter().map(|i| i.worst_rel).fold(0.0, f64::max)
    }
}

/// Seed of the fixed weights `W`.
const WEIGHT_SEED: u64 = 0x5EED_0FC0_FFEE;

fn weighted_sum(out: &Tensor, w: &[f32]) -> Result<f64> {
    out.try_with_f32(|o| o.iter().zip(w).map(|(&a, &b)| a as f64 * b as f64).sum())
}

/// The values of `t` in row-major order, or an error if a gathered copy is refused.
fn values(t: &Tensor) -> Result<Vec<f32>> {
    t.try_with_f32(<[f32]>::to_vec)
}

/// Runs one case: analytic gradients by `backward`, numeric ones by central differences.
pub fn run(case: &Case) -> Result<Report> {
    const OP: &str = "gradcheck";
    let checked: Vec<usize> = (0..case.inputs.len()).filter(|&i| case.inputs[i].needs_grad()).collect();
    if checked.is_empty() {
        return Err(Error::argument(OP, format!("case `{}` has no input that requires gradients", case.name)));
    }
    // Fresh leaves so repeated runs do not accumulate into the case's tensors.
    let inputs: Vec<Tensor> = case
        .inputs
        .iter()
        .map(|t| if t.needs_grad() { crate::kernels::basic::copy_contiguous(t)?.requires_grad() } else { Ok(t.clone()) })
        .collect::<Result<_>>()?;
    let out = (case.f)(&inputs)?;
    if !out.needs_grad() {
        return Err(Error::argument(OP, format!("case `{}`: the output does not depend on a checked input", case.name)));
    }
    let w = Tensor::randn_with_seed(out.shape(), WEIGHT_SEED)?;
    let wv = values(&w)?;
    out.backward_with(Some(&w), false)?;

    let mut reports = Vec::new();
    for &i in &checked {
        let analytic = match inputs[i].grad() {
            Some(g) => values(&g)?,
            None => vec![0.0; inputs[i].numel()],
        };
        let base = values(&inputs[i])?;
        let mut rep = InputReport { index: i, worst_abs: 0.0, worst_rel: 0.0, failures: 0 };
        for e in 0..base.len() {
            let eval = |v: f32| -> Result<f64> {
                let mut x = base.clone();
                x[e] = v;
                let xt = Tensor::from_vec(x, inputs[i].shape())?;
                let args: Vec<Tensor> = inputs.iter().enumerate().map(|(j, t)| if j == i { xt.clone() } else { t.detach() }).collect();
                let y = no_grad(|| (case.f)(&args))?;
                weighted_sum(&y, &wv)
            };
            let plus = base[e] + case.eps;
            let minus = base[e] - case.eps;
            let numeric = (eval(plus)? - eval(minus)?) / (plus as f64 - minus as f64);
            let a = analytic[e] as f64;
            let abs = (a - numeric).abs();
            let rel = abs / numeric.abs().max(a.abs()).max(1e-6);
            rep.worst_abs = rep.worst_abs.max(abs);
            rep.worst_rel = rep.worst_rel.max(rel);
            let within = abs <= case.atol + case.rtol * numeric.abs();
            if !within {
                rep.failures += 1;
            }
        }
        reports.push(rep);
    }
    Ok(Report { inputs: reports })
}
