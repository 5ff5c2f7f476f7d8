//! Gradient checking (spec section 6): analytic gradients against central float32
//! differences of `L = Σ W·f(x)`, with `W` fixed pseudo-random and `L` summed in f64.
//! [`run`] checks one case; [`check_op`] and [`check_all`] every registered case of one
//! operator or of all, in both compute modes.

use crate::autograd::no_grad;
use crate::compute::{Compute, Mode, Settings};
use crate::error::{Error, Result};
use crate::registry::{self, Case, OpEntry};
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

/// A case that failed its gradient check in one compute mode; it prints as
/// ``case `broadcast` (exact mode): input 1: 2 element(s) out of tolerance ..``.
///
/// # Examples
///
/// ```
/// use om_core::gradcheck::CaseFailure;
/// use om_core::Mode;
/// let f = CaseFailure { case: "broadcast".into(), mode: Mode::Exact, detail: "error: ..".into() };
/// assert_eq!(f.to_string(), "case `broadcast` (exact mode): error: ..");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct CaseFailure {
    /// The case's name.
    pub case: String,
    /// The compute mode it ran in.
    pub mode: Mode,
    /// What failed: the inputs out of tolerance with their worst errors, or the error the
    /// case returned.
    pub detail: String,
}

impl std::fmt::Display for CaseFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "case `{}` ({} mode): {}", self.case, self.mode, self.detail)
    }
}

/// One operator's gradient check: every registered case, in both compute modes (see
/// [`check_entry`] for an example).
#[derive(Clone, Debug, PartialEq)]
pub struct OpCheck {
    /// The operator's name.
    pub op: &'static str,
    /// Its registered cases (each runs once per mode).
    pub cases: usize,
    /// Largest absolute error over every case, input and mode.
    pub worst_abs: f64,
    /// Largest relative error over every case, input and mode.
    pub worst_rel: f64,
    /// The cases that failed (none when the operator passed).
    pub failures: Vec<CaseFailure>,
}

impl OpCheck {
    /// Whether every case passed in both modes (an operator without cases fails).
    pub fn passed(&self) -> bool {
        self.cases > 0 && self.failures.is_empty()
    }
}

/// Runs every case of a registered operator in both compute modes ([`Mode::Fast`] and
/// [`Mode::Exact`], on this thread's other settings) with [`run`].
///
/// # Examples
///
/// ```
/// use om_core::registry::{Case, OpEntry, OpKind};
/// use om_core::Tensor;
///
/// // `x·x` through `Tensor`'s arithmetic needs `om-ops`; a case of `x` itself does not.
/// static IDENTITY: OpEntry = OpEntry {
///     name: "identity",
///     kind: OpKind::Composition,
///     saved: &[],
///     signature: "identity(x: &Tensor)",
///     summary: "",
///     method: true,
///     cases: || vec![Case::new("one", vec![Case::input(&[3], -1.0, 1.0, 1)], |x| Ok(x[0].clone()))],
/// };
/// let check = om_core::gradcheck::check_entry(&IDENTITY);
/// assert_eq!((check.op, check.cases), ("identity", 1));
/// assert!(check.passed(), "{:?}", check.failures);
/// ```
pub fn check_entry(entry: &OpEntry) -> OpCheck {
    let cases = (entry.cases)();
    let mut check = OpCheck { op: entry.name, cases: cases.len(), worst_abs: 0.0, worst_rel: 0.0, failures: Vec::new() };
    for mode in [Mode::Fast, Mode::Exact] {
        let settings = Settings { mode, ..Compute::settings() };
        for case in &cases {
            let failure = |detail: String| CaseFailure { case: case.name.clone(), mode, detail };
            match Compute::with(settings, || run(case)) {
                Ok(rep) => {
                    check.worst_abs = check.worst_abs.max(rep.worst_abs());
                    check.worst_rel = check.worst_rel.max(rep.worst_rel());
                    let bad: Vec<String> = rep
                        .inputs
                        .iter()
                        .filter(|i| i.failures > 0)
                        .map(|i| {
                            format!(
                                "input {}: {} element(s) out of tolerance (atol {:e}, rtol {:e}), worst abs {:.3e}, worst rel {:.3e}",
                                i.index, i.failures, case.atol, case.rtol, i.worst_abs, i.worst_rel
                            )
                        })
                        .collect();
                    if !bad.is_empty() {
                        check.failures.push(failure(bad.join("; ")));
                    }
                }
                Err(e) => check.failures.push(failure(format!("error: {e}"))),
            }
        }
    }
    check
}

/// Checks one registered operator by name — a library operator or one declared with
/// `#[op]` in the calling program: every gradient-check case of its declaration, in both
/// compute modes. An `Error` names the operator, each failing case and mode, the input
/// and its worst error; or says that no operator has that name.
///
/// # Examples
///
/// ```
/// // `om_core` registers no operators itself (they live in `om-ops`): an unknown name.
/// let err = om_core::gradcheck::check_op("no_such_op").unwrap_err();
/// assert!(err.to_string().contains("no_such_op"));
/// ```
pub fn check_op(name: &str) -> Result<()> {
    const OP: &str = "check_op";
    let entries = registry::entries().map_err(|dups| Error::argument(OP, format!("operators registered more than once: {dups:?}")))?;
    let Some(entry) = entries.iter().find(|e| e.name == name) else {
        return Err(Error::argument(
            OP,
            format!("no registered operator is named `{name}` (is its `#[op]` module compiled into this program?)"),
        ));
    };
    let check = check_entry(entry);
    if check.cases == 0 {
        return Err(Error::argument(OP, format!("`{}` registers no gradient-check cases", entry.name)));
    }
    if check.passed() {
        return Ok(());
    }
    let list: Vec<String> = check.failures.iter().map(CaseFailure::to_string).collect();
    Err(Error::argument(OP, format!("`{}` failed its gradient check: {}", entry.name, list.join(" | "))))
}

/// Checks every registered operator as [`check_op`] does, one row per operator (sorted by
/// name); an `Error` only when a name is registered twice.
///
/// # Examples
///
/// ```
/// let rows = om_core::gradcheck::check_all()?;
/// assert!(rows.iter().all(|r| r.passed()));
/// # Ok::<(), om_core::Error>(())
/// ```
pub fn check_all() -> Result<Vec<OpCheck>> {
    let entries =
        registry::entries().map_err(|dups| Error::argument("check_all", format!("operators registered more than once: {dups:?}")))?;
    Ok(entries.iter().map(|e| check_entry(e)).collect())
}
