//! The operator registry: every `#[op]` item submits one [`OpEntry`] through `inventory`;
//! the test suite, `om gradcheck`, `om ops` and `docs/ops.md` all read [`entries`].
//! Also the list of operator rows of spec section 5 (`SPEC_ROWS`) that the registry is
//! checked against.

use crate::error::Result;
use crate::tensor::Tensor;

/// Whether the operator has its own record or is built from other operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// Has a generated record and backward rule.
    Primitive,
    /// Composed of other operators; its gradient comes from theirs.
    Composition,
}

/// What one `#[op]` declaration registers (all `const` data).
pub struct OpEntry {
    /// snake_case operator name (`om ops` prints it).
    pub name: &'static str,
    /// Primitive or composition.
    pub kind: OpKind,
    /// Saved slots as declared (e.g. `a if b`).
    pub saved: &'static [&'static str],
    /// The generated public function's call signature, parameters in order
    /// (`resize2d(x: &Tensor, out_h: usize, ..)`); see `signature` for operators whose
    /// public function is hand-written.
    pub signature: &'static str,
    /// The backward rule: the operator's documentation paragraph from the word `Backward` on
    /// (`Backward: g·b`), after that word; empty for a composition that states none (its
    /// gradient comes from the operators it calls).
    pub summary: &'static str,
    /// Whether the operator is also a `Tensor` method (its first parameter is a `&Tensor`).
    pub method: bool,
    /// The operator's gradient-check cases.
    pub cases: fn() -> Vec<Case>,
}

inventory::collect!(OpEntry);

/// A hand-written public function that is an operator's entry point (`#[op_wrapper]`), for
/// an operator whose generated wrapper is private.
#[doc(hidden)]
pub struct OpWrapper {
    /// The operator's name.
    pub op: &'static str,
    /// The public function's call signature.
    pub signature: &'static str,
    /// Whether the public function is also a `Tensor` method (its first parameter is a
    /// `&Tensor`).
    pub method: bool,
}

inventory::collect!(OpWrapper);

/// The call signature users call the operator by: its `#[op_wrapper]` function's, or the
/// generated wrapper's.
#[doc(hidden)]
pub fn signature(entry: &OpEntry) -> &'static str {
    inventory::iter::<OpWrapper>.into_iter().find(|w| w.op == entry.name).map_or(entry.signature, |w| w.signature)
}

/// Whether users can call the operator as a `Tensor` method: its `#[op_wrapper]`
/// function's first parameter is a `&Tensor`, or, without one, the generated wrapper's.
///
/// # Examples
///
/// ```
/// use om_core::registry::{has_method, OpEntry, OpKind};
/// static CONCAT: OpEntry = OpEntry {
///     name: "concat_like",
///     kind: OpKind::Composition,
///     saved: &[],
///     signature: "concat_like(xs: &[Tensor], axis: isize)",
///     summary: "",
///     method: false, // the first parameter is a list of tensors
///     cases: Vec::new,
/// };
/// assert!(!has_method(&CONCAT));
/// ```
pub fn has_method(entry: &OpEntry) -> bool {
    inventory::iter::<OpWrapper>.into_iter().find(|w| w.op == entry.name).map_or(entry.method, |w| w.method)
}

/// A function of the case's inputs, checked by [`crate::gradcheck::run`].
pub type CaseFn = Box<dyn Fn(&[Tensor]) -> Result<Tensor> + Send + Sync>;

/// One gradient-check case: inputs (those that require gradients are checked) and the
/// function of them.
pub struct Case {
    /// Short name, unique within the operator (e.g. `broadcast`, `transposed`).
    pub name: String,
    /// Inputs; build them with [`Case::input`] (checked) or pass constants.
    pub inputs: Vec<Tensor>,
    /// The function under test.
    pub f: CaseFn,
    /// Finite-difference step.
    pub eps: f32,
    /// Absolute tolerance, scaled down for a gradient smaller than 1: an element's
    /// allowed error is `atol·min(1, S) + rtol·|numeric|`, with `S` the input's largest
    /// `|numeric|` ([`crate::gradcheck::allowed_error`]).
    pub atol: f64,
    /// Relative tolerance (per element).
    pub rtol: f64,
    /// Why the case overrides the default step or tolerances (`None` if it does not);
    /// `om gradcheck` and the gradient-check log print it.
    pub why: Option<&'static str>,
}

impl Case {
    /// Default finite-difference step.
    pub const EPS: f32 = 1e-2;
    /// Default absolute tolerance (times `min(1, S)`, see [`Case::atol`]).
    pub const ATOL: f64 = 2e-3;
    /// Default relative tolerance.
    pub const RTOL: f64 = 2e-3;

    /// A case with the default step and tolerances.
    pub fn new(name: impl Into<String>, inputs: Vec<Tensor>, f: impl Fn(&[Tensor]) -> Result<Tensor> + Send + Sync + 'static) -> Case {
        Case { name: name.into(), inputs, f: Box::new(f), eps: Case::EPS, atol: Case::ATOL, rtol: Case::RTOL, why: None }
    }

    /// Overrides the step and tolerances for a case that needs them, saying why (with the
    /// measured error); `om gradcheck` and the gradient-check log print the reason.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Case;
    /// let case = Case::new("steep", vec![Case::input(&[3], -1.0, 1.0, 1)], |x| Ok(x[0].clone()))
    ///     .with_tolerance(1e-3, 2e-3, 2e-3, "a kink 5e-3 from an input: a smaller step");
    /// assert_eq!((case.eps, case.why), (1e-3, Some("a kink 5e-3 from an input: a smaller step")));
    /// ```
    pub fn with_tolerance(mut self, eps: f32, atol: f64, rtol: f64, why: &'static str) -> Case {
        self.why = Some(why);
        self.eps = eps;
        self.atol = atol;
        self.rtol = rtol;
        self
    }

    /// A checked input: deterministic values uniform in `[lo, hi)`, requiring gradients.
    pub fn input(shape: &[usize], lo: f32, hi: f32, seed: u64) -> Tensor {
        Tensor::rand_uniform(shape, lo, hi, seed)
            .and_then(|t| t.requires_grad())
            .unwrap_or_else(|e| panic!("building a gradcheck input: {e}"))
    }

    /// A checked input whose values are at least `gap` away from zero in magnitude (for
    /// kinks and poles): uniform magnitudes in `[gap, hi)` with pseudo-random signs.
    pub fn input_away_from_zero(shape: &[usize], gap: f32, hi: f32, seed: u64) -> Tensor {
        let mut rng = crate::rng::Rng::new(seed);
        let n = crate::layout::numel(shape);
        let v: Vec<f32> = (0..n)
            .map(|_| {
                let m = rng.uniform(gap, hi);
                if rng.next_u64() & 1 == 0 {
                    m
                } else {
                    -m
                }
            })
            .collect();
        Tensor::from_vec(v, shape).and_then(|t| t.requires_grad()).unwrap_or_else(|e| panic!("building a gradcheck input: {e}"))
    }

    /// A checked input of distinct values at least 0.05 apart in a pseudo-random order, so
    /// every window or row has one clear extreme and central differences with the default
    /// step stay valid (pooling, max/min reductions).
    pub fn distinct_input(shape: &[usize], seed: u64) -> Tensor {
        let n = crate::layout::numel(shape);
        let mut v: Vec<f32> = (0..n).map(|i| (i as f32 - n as f32 / 2.0) * 0.05).collect();
        let mut rng = crate::rng::Rng::new(seed);
        for i in (1..n).rev() {
            v.swap(i, rng.below(i + 1));
        }
        Tensor::from_vec(v, shape).and_then(|t| t.requires_grad()).unwrap_or_else(|e| panic!("building a gradcheck input: {e}"))
    }
}

/// The registered operators sorted by name, or the names registered more than once.
pub fn entries() -> std::result::Result<Vec<&'static OpEntry>, Vec<&'static str>> {
    let mut v: Vec<&'static OpEntry> = inventory::iter::<OpEntry>.into_iter().collect();
    v.sort_by_key(|e| e.name);
    let dups: Vec<&'static str> = v.windows(2).filter(|w| w[0].name == w[1].name).map(|w| w[0].name).collect();
    if dups.is_empty() {
        Ok(v)
    } else {
        Err(dups)
    }
}

/// The operator rows of spec section 5 and the operator names implementing each.
#[doc(hidden)]
pub const SPEC_ROWS: &[(&str, &[&str])] = &[
    ("Add, Sub", &["add", "sub"]),
    ("Mul", &["mul"]),
    ("Div", &["div"]),
    ("Neg", &["neg"]),
    ("Relu", &["relu"]),
    ("Gelu", &["gelu"]),
    ("Sigmoid", &["sigmoid"]),
    ("Tanh", &["tanh"]),
    ("MatMul", &["matmul"]),
    ("Linear", &["linear"]),
    ("Sum, Mean", &["sum", "mean"]),
    ("Softmax", &["softmax"]),
    ("LogSoftmax", &["log_softmax"]),
    ("LayerNorm", &["layer_norm"]),
    ("BatchNorm2d", &["batch_norm2d"]),
    ("Conv2d", &["conv2d"]),
    ("MaxPool2d", &["max_pool2d"]),
    ("AvgPool2d", &["avg_pool2d"]),
    ("GlobalAvgPool2d", &["global_avg_pool2d"]),
    ("Concat", &["concat"]),
    ("ConvTranspose2d", &["conv_transpose2d"]),
    ("Resize2d", &["resize2d"]),
    ("LstmLayer", &["lstm_layer", "lstm"]),
    ("GruLayer", &["gru_layer", "gru"]),
    ("CtcLoss", &["ctc_loss"]),
    ("Embedding", &["embedding"]),
    ("NllLoss", &["nll_loss"]),
    ("CrossEntropy", &["cross_entropy"]),
    ("Attention", &["attention"]),
    ("Views", &["slice", "select", "permute", "transpose", "reshape", "squeeze", "unsqueeze", "contiguous", "expand", "flip", "cast"]),
];

/// Every operator name the spec requires, in [`SPEC_ROWS`] order.
#[doc(hidden)]
pub fn spec_names() -> Vec<&'static str> {
    SPEC_ROWS.iter().flat_map(|(_, names)| names.iter().copied()).collect()
}

/// Spec operator names with no registered operator yet.
#[doc(hidden)]
pub fn missing_spec_names() -> Vec<&'static str> {
    let have: Vec<&str> = inventory::iter::<OpEntry>.into_iter().map(|e| e.name).collect();
    spec_names().into_iter().filter(|n| !have.contains(n)).collect()
}

/// The registry as the Markdown document kept in `docs/ops.md` (printed by `om ops`).
#[doc(hidden)]
pub fn markdown() -> String {
    let mut s = String::from(
        "# Operators\n\nGenerated from the registry by `om ops`; do not edit by hand (a test compares this file with the registry).\n\
         Each row is one `#[op]` declaration in `om-ops`: the public function's call in argument order, the backward rule \
         (from the `Backward:` paragraph of the operator's documentation), the tensors its record saves, and the number of \
         registered gradient-check cases. Like PyTorch's `derivatives.yaml`, it is the one-page table of every gradient.\n\n\
         | op | call | backward | saved | cases |\n|---|---|---|---|---|\n",
    );
    let entries = match entries() {
        Ok(e) => e,
        Err(dups) => return format!("error: operators registered more than once: {dups:?}\n"),
    };
    let list = |v: &[&str]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    let cell = |s: &str| s.replace('|', "\\|");
    for e in entries {
        let backward = match (e.kind, e.summary) {
            (OpKind::Composition, "") => "composition: through the operators it calls".to_string(),
            (OpKind::Composition, rule) => format!("composition: {rule}"),
            (OpKind::Primitive, "") => "(undocumented)".to_string(),
            (OpKind::Primitive, rule) => rule.to_string(),
        };
        s.push_str(&format!(
            "| {} | `{}` | {} | {} | {} |\n",
            e.name,
            cell(signature(e)),
            cell(&backward),
            list(e.saved),
            (e.cases)().len()
        ));
    }
    let missing = missing_spec_names();
    s.push_str("\n## Spec rows not built yet\n\n");
    if missing.is_empty() {
        s.push_str("None: every operator row of spec section 5 is registered.\n");
    } else {
        for (row, names) in SPEC_ROWS {
            let m: Vec<&str> = names.iter().copied().filter(|n| missing.contains(n)).collect();
            if !m.is_empty() {
                s.push_str(&format!("- {row}: {}\n", m.join(", ")));
            }
        }
    }
    s
}
