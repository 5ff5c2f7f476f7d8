//! The registry as a whole: `docs/ops.md` matches it, it covers the spec's operator rows
//! (or `docs/ops.md` says which are not built yet), and the spec's operator table (section
//! 5: operators, Saved and Attributes columns) matches it row by row. The table is read from
//! the spec beside the repository, or else from its copy in `testdata/` (a clone on its own,
//! such as CI's, has no spec beside it); a test fails when the two differ.

use om_core::registry::{self, SPEC_ROWS};
use std::path::PathBuf;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn docs_ops_md_matches_the_registry() {
    let path = repo_root().join("docs/ops.md");
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = registry::markdown();
    if on_disk != generated {
        panic!("docs/ops.md differs from the registry; regenerate it with `cargo run --release -- ops > docs/ops.md`\n--- generated ---\n{generated}");
    }
}

/// Every operator the spec's table requires is registered. Operators beyond the spec
/// (what PyTorch users reach for daily) are welcome: the registry, `om gradcheck` and
/// `docs/ops.md` cover them the same way.
#[test]
fn every_spec_operator_is_registered() {
    let entries = om_ops::registered_ops().expect("no duplicate registrations");
    for name in registry::spec_names() {
        assert!(entries.iter().any(|e| e.name == name), "the spec's operator `{name}` is not registered");
    }
}

/// `docs/ops.md` is the one-page table of backward rules: every primitive states its rule
/// in a `Backward:` paragraph of its documentation.
#[test]
fn every_primitive_documents_its_backward_rule() {
    let entries = om_ops::registered_ops().expect("no duplicate registrations");
    let undocumented: Vec<&str> =
        entries.iter().filter(|e| e.kind == registry::OpKind::Primitive && e.summary.is_empty()).map(|e| e.name).collect();
    assert!(undocumented.is_empty(), "add a `Backward: ..` paragraph to the documentation of {undocumented:?}");
}

/// The call column is the public function users call, parameters in argument order: the
/// generated wrapper's, or the hand-written `#[op_wrapper]` function's (`ctc_loss` validates
/// and decodes its arguments before calling its private primitive).
#[test]
fn calls_show_the_public_function_in_argument_order() {
    let entries = om_ops::registered_ops().expect("no duplicate registrations");
    let call = |name: &str| registry::signature(entries.iter().find(|e| e.name == name).expect("registered"));
    assert_eq!(call("resize2d"), "resize2d(x: &Tensor, options: impl Into<Interpolate>)");
    assert_eq!(call("conv2d"), "conv2d(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, options: Conv2dOptions)");
    assert_eq!(
        call("ctc_loss"),
        "ctc_loss(log_probs: &Tensor, targets: &Tensor, input_lengths: impl Into<Lengths<'a>>, \
         target_lengths: impl Into<Lengths<'b>>, blank: usize, reduction: Reduction, zero_infinity: bool)"
    );
    assert_eq!(call("matmul"), "matmul(a: &Tensor, b: &Tensor)");
}

#[test]
fn missing_spec_rows_are_listed_in_docs() {
    let generated = registry::markdown();
    for name in registry::missing_spec_names() {
        assert!(generated.contains(name), "missing operator `{name}` is not listed");
    }
}

// ===== the spec's operator table (section 5) =====

/// The spec's path beside the repository (`/work/shared/spec/autograd.md` for a checkout in
/// `/work/main`); absent in a clone on its own, such as CI's.
fn spec_path() -> PathBuf {
    repo_root().join("../shared/spec/autograd.md")
}

/// The vendored copy of the spec's section 5, so the cross-check runs in every clone.
const VENDORED: &str = "testdata/spec_autograd_section5.md";

/// Section 5 of the spec text: from its heading to the next section's.
fn section5(text: &str) -> Option<&str> {
    let start = text.find("## 5.")?;
    let end = start + text[start..].find("## 6.")?;
    Some(&text[start..end])
}

/// The vendored section, which must exist (the cross-check never passes without checking).
fn vendored_section() -> String {
    let path = repo_root().join(VENDORED);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}; copy section 5 of the spec there", path.display()))
}

/// The rows of the table: (operator column, Saved column, Attributes column).
fn table_rows(section: &str) -> Vec<[String; 3]> {
    section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Operator"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            [1, 2, 3].map(|i| cells.get(i).copied().unwrap_or("").to_string())
        })
        .collect()
}

/// The copy in `testdata/` is the spec's section 5, when the spec is beside the repository
/// (it fails when they differ; without the spec there is nothing to compare the copy with,
/// and the cross-check below still runs on the copy).
#[test]
fn the_vendored_spec_table_is_the_spec_s() {
    let copy = vendored_section();
    assert!(table_rows(&copy).len() >= 30, "{VENDORED} holds no operator table");
    let Ok(spec) = std::fs::read_to_string(spec_path()) else {
        eprintln!("{} is absent: the cross-check uses {VENDORED} alone", spec_path().display());
        return;
    };
    let section = section5(&spec).expect("the spec has sections 5 and 6");
    assert!(section == copy, "{VENDORED} differs from section 5 of {}; copy the section again", spec_path().display());
}

/// A primitive's saved slots and attributes, or a composition (no record: its gradient comes
/// from the operators it calls).
enum Ours {
    Primitive(&'static str, &'static [&'static str], &'static [&'static str]),
    Composition(&'static str),
}
use Ours::{Composition, Primitive};

/// Each spec row's Saved and Attributes columns as the spec writes them, and what the
/// registry holds for the row's operators: the saved slots as `#[op(saved = ..)]` declares
/// them (`docs/ops.md`'s saved column) and the attributes (the non-tensor parameters of the
/// generated function, which the macro requires to be exactly the declared `attrs`). The
/// names differ (`γ` is `gamma`, `1/σ` is `rstd`, `output` is `out`); where more differs,
/// the last column says why.
#[rustfmt::skip]
const ROWS: &[(&str, &str, &[Ours], &str)] = &[
    ("none", "", &[Primitive("add", &[], &[]), Primitive("sub", &[], &[])], ""),
    ("0 = a if b needs grad; 1 = b if a does", "", &[Primitive("mul", &["a if b", "b if a"], &[])], ""),
    ("0 = a (for b); 1 = b", "", &[Primitive("div", &["a if b", "b"], &[])], ""),
    ("none", "", &[Primitive("neg", &[], &[])], ""),
    ("0 = output", "", &[Primitive("relu", &["out"], &[])], ""),
    ("0 = input", "Ints [0 erf, 1 tanh]", &[Primitive("gelu", &["slope (owned)"], &["form"])], "the form is an enum, `GeluForm`; the forward writes the slope with the value (one evaluation of the erf form's Gaussian terms) and the record keeps it instead of the input: the same storage, the bits of recomputing it"),
    ("0 = output y", "", &[Primitive("sigmoid", &["out"], &[])], ""),
    ("0 = output y", "", &[Primitive("tanh", &["out"], &[])], ""),
    ("as Mul", "", &[Primitive("matmul", &["a if b", "b if a"], &[])], ""),
    ("(composition of Reshape, MatMul with `Wᵀ`, Add, Reshape)", "", &[Primitive("linear", &["x if w", "w if x"], &[])], "recorded as one operator with the composition's bits (the bias added inside the GEMM, `dW = gᵀ·x` without a transposed copy; docs/ops.md's `linear` row)"),
    ("none", "[axis or −1, keepDim]", &[Primitive("sum", &[], &["axes", "keep_dim"]), Primitive("mean", &[], &["axes", "keep_dim"])], "any set of axes, not one or all"),
    ("0 = output y", "", &[Primitive("softmax", &["out"], &["axis"])], "any axis, not only the last"),
    ("0 = output y", "", &[Primitive("log_softmax", &["out"], &["axis"])], "any axis, not only the last"),
    ("0 = x, 1 = γ, 2 = mean, 3 = 1/σ (owned)", "Floats [ε]", &[Primitive("layer_norm", &["x", "gamma", "mean (owned)", "rstd (owned)"], &["eps"])], "the mean is computed by forward too: owned"),
    ("0 = x, 1 = γ, 2 = mean, 3 = 1/σ (owned)", "Ints [training]", &[Primitive("batch_norm2d", &["x", "gamma", "mean (owned)", "rstd (owned)"], &["options"])], "training with PyTorch's momentum and eps of the running statistics, one `BatchNormOptions`"),
    ("0 = x, 1 = W", "[sH, sW, padT, padL, padB, padR, dH, dW, groups]", &[Primitive("conv2d", &["x", "w"], &["options"])], "the nine integers are one `Conv2dOptions`"),
    ("0 = Int32 flat input index of each winner", "window", &[Primitive("max_pool2d", &["idx (owned)"], &["options"])], "the window is one `Pool2d`"),
    ("none", "[kH, kW, sH, sW, padH, padW, countIncludePad]", &[Primitive("avg_pool2d", &[], &["options"])], "one `Pool2d`"),
    ("(composition: Reshape, Mean, Reshape)", "", &[Composition("global_avg_pool2d")], ""),
    ("none", "[axis]", &[Primitive("concat", &[], &["axis"])], ""),
    ("0 = x, 1 = W", "as `Conv2d`", &[Primitive("conv_transpose2d", &["x", "w"], &["options"])], "one `ConvTranspose2dOptions`"),
    ("none (input shape in the record)", "[mode, alignCorners, outH, outW]", &[Primitive("resize2d", &[], &["options"])], "one `Interpolate`"),
    (
        "0 = x, 1 = Wih, 2 = Whh, 3 = activated gates i,f,g,o `[T,B,4H]`, 4 = c `[T,B,H]`, 5 = tanh c, 6 = y, 7 = h0, 8 = c0 (7, 8 empty if not given)",
        "[reverse, T, B, I, H]",
        &[Primitive("lstm_layer", &["x", "w_ih", "w_hh", "gates (owned)", "c (owned)", "tanh_c (owned)", "out", "h0", "c0"], &["reverse", "final_cell"]), Composition("lstm")],
        "the sizes come from the saved shapes; `final_cell` returns c_n with its gradient",
    ),
    (
        "0 = x, 1 = Wih, 2 = Whh, 3 = activated r,z,n `[T,B,3H]`, 4 = hidden-side n part `Whn h + bhn`, 5 = y, 6 = h0",
        "[reverse, T, B, I, H]",
        &[Primitive("gru_layer", &["x", "w_ih", "w_hh", "gates (owned)", "hn (owned)", "out", "h0"], &["reverse"]), Composition("gru")],
        "the sizes come from the saved shapes",
    ),
    (
        "0 = log-probabilities `[T,B,C]`",
        "[blank, zeroInfinity, reduction, B, input lengths, target lengths, targets]",
        &[Primitive("ctc_loss", &["log_probs", "lengths_and_labels"], &["blank", "zero_infinity", "reduction"])],
        "lengths and labels are one pooled Int32 input, saved instead of three lists",
    ),
    ("0 = ids", "[paddingIndex]", &[Primitive("embedding", &["ids"], &["padding_idx"])], ""),
    ("0 = targets", "[mean, ignoreIndex]", &[Primitive("nll_loss", &["targets", "weight"], &["options"])], "class weights; reduction, ignore index and label smoothing are one `CrossEntropyOptions`"),
    ("(composition: LogSoftmax, NllLoss)", "", &[Composition("cross_entropy")], ""),
    ("0 = q, 1 = k, 2 = v, 3 = additive mask (or empty)", "Floats [scale]", &[Primitive("attention", &["q", "k", "v", "mask", "probs (owned)"], &["scale"])], "the forward keeps P for the backward when it holds no more values than q and k (Tq·Tk ≤ (Tq + Tk)·D; empty otherwise, and the backward recomputes it as the spec says): the same operations, the bits of recomputing it"),
    (
        "none",
        "as `tensors.md`",
        &[
            Primitive("slice", &[], &["axis", "start", "end", "step"]),
            Primitive("select", &[], &["axis", "index"]),
            Primitive("permute", &[], &["dims"]),
            Primitive("transpose", &[], &["dim0", "dim1"]),
            Primitive("reshape", &[], &["shape"]),
            Primitive("squeeze", &[], &["axes"]),
            Primitive("unsqueeze", &[], &["axis"]),
            Primitive("contiguous", &[], &[]),
            Primitive("expand", &[], &["shape"]),
            Primitive("flip", &[], &["axes"]),
            Primitive("cast", &[], &["dtype"]),
        ],
        "",
    ),
];

/// The parameters of a call signature `name(a: T, b: U) -> R`, split at top-level commas.
fn parameters(signature: &str) -> Vec<(String, String)> {
    let open = signature.find('(').expect("a call signature");
    let (mut depth, mut params, mut current) = (0i32, Vec::new(), String::new());
    for ch in signature[open + 1..].chars() {
        match ch {
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' if depth == 0 => break,
            ')' | '>' | ']' => depth -= 1,
            ',' if depth == 0 => {
                params.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(ch);
    }
    params.push(current);
    params
        .iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (name, ty) = p.split_once(':').expect("`name: type`");
            (name.trim().to_string(), ty.trim().to_string())
        })
        .collect()
}

/// The attributes of a primitive: the generated function's parameters that are not tensors.
fn attributes(entry: &registry::OpEntry) -> Vec<String> {
    let tensor = |ty: &str| ["&Tensor", "Option<&Tensor>", "&[Tensor]"].contains(&ty);
    parameters(entry.signature).into_iter().filter(|(_, ty)| !tensor(ty)).map(|(name, _)| name).collect()
}

/// Every difference between the table of `section` and [`ROWS`], [`SPEC_ROWS`] and the
/// registry: the operator column names the row's operators ([`SPEC_ROWS`]), the Saved and
/// Attributes columns are as [`ROWS`] records them, and so are the registry's saved slots and
/// attributes of each operator.
fn cross_check(section: &str) -> Vec<String> {
    let rows = table_rows(section);
    if rows.len() != SPEC_ROWS.len() || rows.len() != ROWS.len() {
        return vec![format!("{} rows, SPEC_ROWS has {}, ROWS {}: {rows:#?}", rows.len(), SPEC_ROWS.len(), ROWS.len())];
    }
    let entries = om_ops::registered_ops().expect("no duplicate registrations");
    let mut wrong = Vec::new();
    for (([op_col, saved_col, attrs_col], (row_name, names)), (saved, attrs, ours, _why)) in rows.iter().zip(SPEC_ROWS).zip(ROWS) {
        // The operator column: the names in backticks are the row's (the views row lists
        // every view operator).
        let mentioned: Vec<&str> = op_col.split('`').skip(1).step_by(2).collect();
        let expected: Vec<&str> = row_name.split(", ").collect();
        if *row_name == "Views" {
            if !op_col.starts_with("Views") || mentioned.len() < 7 {
                wrong.push(format!("{op_col}: expected the views row"));
            }
        } else if mentioned != expected {
            wrong.push(format!("{op_col}: names {mentioned:?}, SPEC_ROWS has {expected:?}"));
        }
        if saved_col != saved || attrs_col != attrs {
            wrong.push(format!("{op_col}: the spec's Saved `{saved_col}` and Attributes `{attrs_col}`, ROWS has `{saved}` and `{attrs}`"));
        }
        let name_of = |o: &Ours| match o {
            Primitive(n, ..) | Composition(n) => *n,
        };
        let ours_names: Vec<&str> = ours.iter().map(name_of).collect();
        if ours_names != *names {
            wrong.push(format!("{op_col}: ROWS lists {ours_names:?}, SPEC_ROWS {names:?}"));
        }
        for o in *ours {
            let name = name_of(o);
            let Some(e) = entries.iter().find(|e| e.name == name) else {
                wrong.push(format!("{name}: not registered"));
                continue;
            };
            match o {
                Composition(_) if e.kind != registry::OpKind::Composition => {
                    wrong.push(format!("{name}: the spec's row makes it a composition"))
                }
                Composition(_) => {}
                Primitive(_, want_saved, want_attrs) => {
                    if e.kind != registry::OpKind::Primitive {
                        wrong.push(format!("{name}: registered as a composition, the spec's row saves `{saved_col}`"));
                    }
                    if e.saved != *want_saved {
                        wrong.push(format!("{name}: saves {:?}, expected {want_saved:?} (spec: `{saved_col}`)", e.saved));
                    }
                    let got = attributes(e);
                    if got != *want_attrs {
                        wrong.push(format!("{name}: attributes {got:?}, expected {want_attrs:?} (spec: `{attrs_col}`; {})", e.signature));
                    }
                }
            }
        }
    }
    wrong
}

/// The spec's table against the registry, row by row, from the spec beside the repository or
/// else the vendored copy (never skipped); every difference is reported, not only the first.
#[test]
fn the_registry_matches_the_spec_table_operators_saved_slots_and_attributes() {
    let (section, source) = match std::fs::read_to_string(spec_path()) {
        Ok(spec) => (section5(&spec).expect("the spec has sections 5 and 6").to_string(), spec_path().display().to_string()),
        Err(_) => (vendored_section(), VENDORED.to_string()),
    };
    let wrong = cross_check(&section);
    assert!(wrong.is_empty(), "{source} against the registry:\n{}", wrong.join("\n"));
}

/// The cross-check can fail: a Saved cell, an Attributes cell or a row's operator changed in
/// the table is reported.
#[test]
fn a_changed_spec_cell_is_caught() {
    let section = vendored_section();
    for (from, to, says) in [
        ("| 0 = a if b needs grad; 1 = b if a does |", "| 0 = a; 1 = b |", "`Mul`: the spec's Saved `0 = a; 1 = b`"),
        ("| Floats [scale] |", "| Floats [scale, dropout] |", "`Attention`: the spec's Saved"),
        ("| `Neg` |", "| `Negate` |", "`Negate`: names [\"Negate\"]"),
    ] {
        assert!(section.contains(from), "{from}");
        let wrong = cross_check(&section.replacen(from, to, 1));
        assert!(wrong.len() == 1 && wrong[0].starts_with(says), "{from} → {to}: {wrong:?}");
    }
}
