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
    /// The input's gradient magnitude `S`: the largest `|numeric|` over its elements.
    pub scale: f64,
    /// Largest `|analytic − numeric|`.
    pub worst_abs: f64,
    /// `worst_abs / S`: the error relative to the gradient's magnitude (0 when both are 0,
    /// infinite when only the gradient is 0).
    pub worst_scaled: f64,
    /// Largest `|analytic − numeric|` over the element's allowed error (see
    /// [`allowed_error`]): at most 1 when the input passed.
    pub worst_ratio: f64,
    /// Elements outside their allowed error.
    pub failures: usize,
    /// The analytic gradient, row-major.
    pub analytic: Vec<f32>,
}

/// The outcome of one case.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// One entry per input that requires gradients.
    pub inputs: Vec<InputReport>,
    /// The case's output values, row-major.
    pub output: Vec<f32>,
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

    /// Largest scaled error ([`InputReport::worst_scaled`]) over the inputs.
    pub fn worst_scaled(&self) -> f64 {
        self.inputs.iter().map(|i| i.worst_scaled).fold(0.0, f64::max)
    }

    /// Largest error over its allowed error ([`InputReport::worst_ratio`]) over the inputs.
    pub fn worst_ratio(&self) -> f64 {
        self.inputs.iter().map(|i| i.worst_ratio).fold(0.0, f64::max)
    }

    /// Where the output values or analytic gradients of `self` and `other` differ in
    /// their bits (the first element of each that does), or `None` if none does.
    pub fn bit_difference(&self, other: &Report) -> Option<String> {
        let first = |a: &[f32], b: &[f32]| -> Option<String> {
            if a.len() != b.len() {
                return Some(format!("{} against {} elements", a.len(), b.len()));
            }
            let k = a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits())?;
            Some(format!("element {k}: {:e} against {:e}", a[k], b[k]))
        };
        let mut diffs = Vec::new();
        if let Some(d) = first(&self.output, &other.output) {
            diffs.push(format!("output {d}"));
        }
        for (a, b) in self.inputs.iter().zip(&other.inputs) {
            if let Some(d) = first(&a.analytic, &b.analytic) {
                diffs.push(format!("gradient of input {} {d}", a.index));
            }
        }
        (!diffs.is_empty()).then(|| diffs.join(", "))
    }
}

/// The error allowed in one element of an input's gradient:
/// `max(atol·min(1, S), min(atol, floor)) + rtol·|numeric|`, with `S` the input's largest
/// `|numeric|`. The absolute part shrinks with a gradient smaller than 1, so a small
/// gradient (a mean over many elements, a CTC loss) is held to the same relative standard
/// as one around 1: with the default tolerances a 1% error in the largest element of any
/// gradient fails. `floor` is the case's noise floor: the larger of [`NOISE_FLOOR`] times
/// the largest gradient of any of its inputs (spec section 6 holds a gradient that is zero
/// in theory to the same bound), the rounding noise of the central difference (one
/// float32 epsilon of `Σ|W·f(x)|` over the step `2·eps`) and that of the backward (one
/// float32 epsilon of the largest weight `|W|`), never more than `atol`.
///
/// # Examples
///
/// ```
/// use om_core::gradcheck::allowed_error;
/// use om_core::Case;
/// // A gradient of magnitude 1e-2: 1% of it (1e-4) is more than is allowed.
/// let allowed = allowed_error(Case::ATOL, Case::RTOL, 1e-2, 0.0, 1e-2);
/// assert!(allowed < 1e-4 && allowed > 1e-5);
/// assert_eq!(allowed_error(Case::ATOL, Case::RTOL, 10.0, 0.0, 0.0), Case::ATOL);
/// // A gradient zero in theory: rounding noise is allowed.
/// assert_eq!(allowed_error(Case::ATOL, Case::RTOL, 0.0, 5e-7, 0.0), 5e-7);
/// ```
pub fn allowed_error(atol: f64, rtol: f64, scale: f64, floor: f64, numeric: f64) -> f64 {
    (atol * scale.min(1.0)).max(atol.min(floor)) + rtol * numeric.abs()
}

/// The error always allowed in a gradient, as a fraction of the case's largest gradient
/// (see [`allowed_error`]).
pub const NOISE_FLOOR: f64 = 1e-5;

/// Seed of the fixed weights `W`.
const WEIGHT_SEED: u64 = 0x5EED_0FC0_FFEE;

fn weighted_sum(out: &Tensor, w: &[f32]) -> Result<f64> {
    out.try_with_f32(|o| o.iter().zip(w).map(|(&a, &b)| a as f64 * b as f64).sum())
}

/// The values of `t` in row-major order, or an error if a gathered copy is refused.
fn values(t: &Tensor) -> Result<Vec<f32>> {
    t.try_with_f32(<[f32]>::to_vec)
}

/// The analytic half of a check: fresh leaves for the checked inputs, the output's values,
/// the weights `W` and each checked input's gradient of `Σ W·f`.
struct Analytic {
    inputs: Vec<Tensor>,
    output: Vec<f32>,
    weights: Vec<f32>,
    grads: Vec<(usize, Vec<f32>)>,
}

fn analytic(case: &Case) -> Result<Analytic> {
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
    out.backward_with(Some(&w), false)?;
    let grads = checked
        .iter()
        .map(|&i| {
            let g = match inputs[i].grad() {
                Some(g) => values(&g)?,
                None => vec![0.0; inputs[i].numel()],
            };
            Ok((i, g))
        })
        .collect::<Result<_>>()?;
    Ok(Analytic { output: values(&out)?, weights: values(&w)?, inputs, grads })
}

/// The output values and analytic gradients of a case without the finite differences (a
/// [`Report`] whose errors are all 0), to compare bits across settings.
fn analytic_only(case: &Case) -> Result<Report> {
    let a = analytic(case)?;
    let inputs = a
        .grads
        .into_iter()
        .map(|(index, analytic)| InputReport {
            index,
            scale: 0.0,
            worst_abs: 0.0,
            worst_scaled: 0.0,
            worst_ratio: 0.0,
            failures: 0,
            analytic,
        })
        .collect();
    Ok(Report { inputs, output: a.output })
}

/// Runs one case on this thread's compute settings: analytic gradients by `backward`,
/// numeric ones by central differences, each element held to [`allowed_error`] with the
/// case's tolerances.
///
/// The central difference `D(h)` is off by about `c·h²` (its truncation error) plus the
/// float32 rounding of the two evaluations over `2h`. Where a gradient is small beside the
/// function's curvature or its values (a saturated `tanh` near 1), either can exceed the
/// tolerance, so an element that fails is measured again at `h/2`: it is then compared with
/// the Richardson extrapolation `(h²·D(h/2) − (h/2)²·D(h)) / (h² − (h/2)²)` (truncation
/// error `O(h⁴)`), with the floor raised to three times the rounding noise (the
/// extrapolation weighs `D(h/2)`, twice as noisy, by 4/3 and `D(h)` by 1/3) and the allowed
/// error widened by `|D(h) − D(h/2)|`, how far the two differences disagree: the reference
/// is known no better than that. Where the differences agree (a smooth function, a
/// gradient that is large beside the noise), a wrong backward still fails.
pub fn run(case: &Case) -> Result<Report> {
    let Analytic { inputs, output, weights, grads } = analytic(case)?;
    // `D` for element `e` of input `i` at step `eps`, and the half-width actually taken
    // (`x ± eps` rounds to float32; the numerator is divided by the width taken).
    let central = |i: usize, base: &[f32], e: usize, eps: f32| -> Result<(f64, f64)> {
        let eval = |v: f32| -> Result<f64> {
            let mut x = base.to_vec();
            x[e] = v;
            let xt = Tensor::from_vec(x, inputs[i].shape())?;
            let args: Vec<Tensor> = inputs.iter().enumerate().map(|(j, t)| if j == i { xt.clone() } else { t.detach() }).collect();
            let y = no_grad(|| (case.f)(&args))?;
            weighted_sum(&y, &weights)
        };
        let (plus, minus) = (base[e] + eps, base[e] - eps);
        let width = plus as f64 - minus as f64;
        Ok(((eval(plus)? - eval(minus)?) / width, width / 2.0))
    };
    let mut numerics = Vec::with_capacity(grads.len());
    for &(i, _) in &grads {
        let base = values(&inputs[i])?;
        let numeric = (0..base.len()).map(|e| Ok(central(i, &base, e, case.eps)?.0)).collect::<Result<Vec<f64>>>()?;
        numerics.push((base, numeric));
    }
    let largest = |v: &[f64]| v.iter().fold(0.0f64, |m, n| m.max(n.abs()));
    let case_scale = numerics.iter().map(|(_, n)| largest(n)).fold(0.0, f64::max);
    let rounding = output.iter().zip(&weights).map(|(&o, &w)| (o as f64 * w as f64).abs()).sum::<f64>() * f32::EPSILON as f64
        / (2.0 * case.eps as f64);
    // The analytic side rounds too: a backward that cancels terms the size of the seed `W`
    // (`x − x`, `mean(x) − mean(x)`) leaves about one float32 epsilon of `max|W|` where the
    // gradient is zero in theory.
    let seed_rounding = weights.iter().fold(0.0f64, |m, &w| m.max((w as f64).abs())) * f32::EPSILON as f64;
    let floor = (NOISE_FLOOR * case_scale).max(rounding).max(seed_rounding);
    let extrapolated_floor = (NOISE_FLOOR * case_scale).max(3.0 * rounding).max(seed_rounding);
    let mut reports = Vec::new();
    for ((i, analytic), (base, numeric)) in grads.into_iter().zip(numerics) {
        let scale = largest(&numeric);
        let mut rep = InputReport { index: i, scale, worst_abs: 0.0, worst_scaled: 0.0, worst_ratio: 0.0, failures: 0, analytic };
        for (e, (&a, &n)) in rep.analytic.iter().zip(&numeric).enumerate() {
            let mut err = (a as f64 - n).abs();
            let mut allowed = allowed_error(case.atol, case.rtol, scale, floor, n);
            if err > allowed && err.is_finite() {
                let h1 = ((base[e] + case.eps) as f64 - (base[e] - case.eps) as f64) / 2.0;
                let (d2, h2) = central(i, &base, e, case.eps / 2.0)?;
                let reference = (h1 * h1 * d2 - h2 * h2 * n) / (h1 * h1 - h2 * h2);
                err = (a as f64 - reference).abs();
                allowed = allowed_error(case.atol, case.rtol, scale, extrapolated_floor, reference) + (n - d2).abs();
            }
            rep.worst_abs = rep.worst_abs.max(err);
            // NaN errors count as failures (the comparison below is false for them).
            let ratio = if err == 0.0 { 0.0 } else { err / allowed };
            rep.worst_ratio = rep.worst_ratio.max(if ratio.is_nan() { f64::INFINITY } else { ratio });
            if err.is_nan() || err > allowed {
                rep.failures += 1;
            }
        }
        rep.worst_scaled = if rep.worst_abs == 0.0 {
            0.0
        } else if scale == 0.0 {
            f64::INFINITY
        } else {
            rep.worst_abs / scale
        };
        reports.push(rep);
    }
    Ok(Report { inputs: reports, output })
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

/// The compute settings a mode's check runs on: [`Mode::Fast`] on this thread's other
/// settings, [`Mode::Exact`] at one thread (its bits are then compared with two threads').
fn settings_for(mode: Mode, threads: usize) -> Settings {
    let s = Compute::settings();
    match mode {
        Mode::Fast => Settings { mode, ..s },
        Mode::Exact => Settings { mode, threads, ..s },
    }
}

/// One case checked in one or more compute modes (see [`check_case`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CaseCheck {
    /// The case's name.
    pub case: String,
    /// The report of each mode that ran to the end, in the order asked.
    pub reports: Vec<(Mode, Report)>,
    /// What failed: an error, elements out of tolerance, or (exact mode) bits that differ
    /// between one and two threads.
    pub failures: Vec<CaseFailure>,
    /// The case's tolerance override and its reason, as printed: ``eps 1e-2, atol 2e-3,
    /// rtol 2e-3: why`` (`None` for the default tolerances).
    pub note: Option<String>,
}

impl CaseCheck {
    /// Whether the case passed in every mode.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Checks one case in each of `modes`: [`run`] in fast mode on this thread's other
/// settings, and in exact mode at one thread, where the output values and analytic
/// gradients must also be bit for bit those of the same case at two threads. This is
/// the one code path of [`check_op`], [`check_all`], `om gradcheck` and
/// `tests/gradcheck_all.rs`.
///
/// # Examples
///
/// ```
/// use om_core::{gradcheck::check_case, Case, Mode};
/// let case = Case::new("identity", vec![Case::input(&[3], -1.0, 1.0, 1)], |x| Ok(x[0].clone()));
/// let check = check_case(&case, &[Mode::Fast, Mode::Exact]);
/// assert!(check.passed(), "{:?}", check.failures);
/// assert_eq!(check.reports.len(), 2);
/// ```
pub fn check_case(case: &Case, modes: &[Mode]) -> CaseCheck {
    let mut check = CaseCheck { case: case.name.clone(), reports: Vec::new(), failures: Vec::new(), note: note(case) };
    for &mode in modes {
        let failure = |detail: String| CaseFailure { case: case.name.clone(), mode, detail };
        let rep = match Compute::with(settings_for(mode, 1), || run(case)) {
            Ok(rep) => rep,
            Err(e) => {
                check.failures.push(failure(format!("error: {e}")));
                continue;
            }
        };
        let bad: Vec<String> = rep
            .inputs
            .iter()
            .filter(|i| i.failures > 0)
            .map(|i| {
                format!(
                    "input {}: {} element(s) out of tolerance (atol {:e}·min(1, S) + rtol {:e}·|numeric|, S = {:.3e}; see gradcheck::allowed_error), worst abs {:.3e}, worst scaled {:.3e}, {:.2}× the allowed error",
                    i.index, i.failures, case.atol, case.rtol, i.scale, i.worst_abs, i.worst_scaled, i.worst_ratio
                )
            })
            .collect();
        if !bad.is_empty() {
            check.failures.push(failure(bad.join("; ")));
        }
        if mode == Mode::Exact {
            match Compute::with(settings_for(mode, 2), || analytic_only(case)) {
                Ok(two) => {
                    if let Some(d) = rep.bit_difference(&two) {
                        check.failures.push(failure(format!("1 and 2 threads differ in bits: {d}")));
                    }
                }
                Err(e) => check.failures.push(failure(format!("error at 2 threads: {e}"))),
            }
        }
        check.reports.push((mode, rep));
    }
    check
}

/// The printed tolerance override of a case with its reason.
fn note(case: &Case) -> Option<String> {
    case.why.map(|why| format!("eps {:e}, atol {:e}, rtol {:e}: {why}", case.eps, case.atol, case.rtol))
}

/// The worst errors of one operator in one compute mode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModeWorst {
    /// The compute mode.
    pub mode: Mode,
    /// Largest absolute error over every case and input.
    pub worst_abs: f64,
    /// Largest scaled error ([`InputReport::worst_scaled`]).
    pub worst_scaled: f64,
    /// Largest error over its allowed error ([`InputReport::worst_ratio`]; at most 1 when
    /// every case passed).
    pub worst_ratio: f64,
}

/// One operator's gradient check: every registered case in the modes asked (see
/// [`check_entry`] for an example).
#[derive(Clone, Debug, PartialEq)]
pub struct OpCheck {
    /// The operator's name.
    pub op: &'static str,
    /// Its cases checked (each runs once per mode).
    pub cases: usize,
    /// The worst errors in each mode, in the order asked.
    pub modes: Vec<ModeWorst>,
    /// The cases that failed (none when the operator passed).
    pub failures: Vec<CaseFailure>,
    /// The cases with their own tolerance: (case, [`CaseCheck::note`]).
    pub notes: Vec<(String, String)>,
}

impl OpCheck {
    /// An operator with no case checked yet, in `modes`.
    pub fn new(op: &'static str, modes: &[Mode]) -> OpCheck {
        let modes = modes.iter().map(|&mode| ModeWorst { mode, worst_abs: 0.0, worst_scaled: 0.0, worst_ratio: 0.0 }).collect();
        OpCheck { op, cases: 0, modes, failures: Vec::new(), notes: Vec::new() }
    }

    /// Adds one case's check ([`check_case`]).
    pub fn add(&mut self, check: CaseCheck) {
        self.cases += 1;
        for (mode, rep) in &check.reports {
            if let Some(m) = self.modes.iter_mut().find(|m| m.mode == *mode) {
                m.worst_abs = m.worst_abs.max(rep.worst_abs());
                m.worst_scaled = m.worst_scaled.max(rep.worst_scaled());
                m.worst_ratio = m.worst_ratio.max(rep.worst_ratio());
            }
        }
        self.failures.extend(check.failures);
        if let Some(n) = check.note {
            self.notes.push((check.case, n));
        }
    }

    /// Whether every case passed in every mode (an operator without cases fails).
    pub fn passed(&self) -> bool {
        self.cases > 0 && self.failures.is_empty()
    }
}

/// Runs every case of a registered operator in each of `modes` with [`check_case`].
///
/// # Examples
///
/// ```
/// use om_core::registry::{Case, OpEntry, OpKind};
/// use om_core::Mode;
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
/// let check = om_core::gradcheck::check_entry(&IDENTITY, &[Mode::Fast, Mode::Exact]);
/// assert_eq!((check.op, check.cases, check.modes.len()), ("identity", 1, 2));
/// assert!(check.passed(), "{:?}", check.failures);
/// ```
pub fn check_entry(entry: &OpEntry, modes: &[Mode]) -> OpCheck {
    let mut check = OpCheck::new(entry.name, modes);
    for case in (entry.cases)() {
        check.add(check_case(&case, modes));
    }
    check
}

/// The table of worst errors per operator and mode that `ONEMODEL_GRADCHECK_LOG` receives
/// (spec section 6), as Markdown: one row per operator and mode, then each tolerance
/// override with its reason.
///
/// # Examples
///
/// ```
/// use om_core::gradcheck::{log_table, OpCheck};
/// use om_core::Mode;
/// let table = log_table(&[OpCheck::new("relu", &[Mode::Fast, Mode::Exact])]);
/// assert!(table.contains("| relu | exact | 0 |"));
/// ```
pub fn log_table(rows: &[OpCheck]) -> String {
    let mut s = String::from(
        "# Gradient check: worst errors per operator and mode\n\n\
         Error = |analytic − numeric| per element; scaled = worst error / S (S = the input's largest |numeric|); \
         ratio = worst error over its allowed error (gradcheck::allowed_error: atol·min(1, S) + rtol·|numeric|, at least the case's noise floor; at most 1 passes).\n\n\
         | op | mode | cases | worst abs | worst scaled | ratio | failed |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        for m in &r.modes {
            let failed = r.failures.iter().filter(|f| f.mode == m.mode).count();
            s.push_str(&format!(
                "| {} | {} | {} | {:.3e} | {:.3e} | {:.3} | {failed} |\n",
                r.op, m.mode, r.cases, m.worst_abs, m.worst_scaled, m.worst_ratio
            ));
        }
    }
    let notes: Vec<String> = rows.iter().flat_map(|r| r.notes.iter().map(move |(c, n)| format!("- {}::{c}: {n}\n", r.op))).collect();
    s.push_str("\n## Tolerance overrides\n\n");
    if notes.is_empty() {
        s.push_str("None: every case uses the default tolerances.\n");
    } else {
        s.extend(notes);
    }
    let failures: Vec<String> = rows.iter().flat_map(|r| r.failures.iter().map(move |f| format!("- {}: {f}\n", r.op))).collect();
    if !failures.is_empty() {
        s.push_str("\n## Failures\n\n");
        s.extend(failures);
    }
    s
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
    let check = check_entry(entry, &[Mode::Fast, Mode::Exact]);
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
    Ok(entries.iter().map(|e| check_entry(e, &[Mode::Fast, Mode::Exact])).collect())
}
