//! The registry as a whole: `docs/ops.md` matches it, it covers the spec's operator rows
//! (or `docs/ops.md` says which are not built yet), and the spec list itself matches the
//! rows of the spec's table when the spec is present beside the repository.

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

/// The spec's section-5 table, first column, when `../shared/spec/autograd.md` is present.
fn spec_table_rows() -> Option<Vec<String>> {
    let text = std::fs::read_to_string(repo_root().join("../shared/spec/autograd.md")).ok()?;
    let sec = text.split("## 5.").nth(1)?.split("## 6.").next()?.to_string();
    Some(
        sec.lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| Operator"))
            .map(|l| l.split('|').nth(1).unwrap_or("").trim().to_string())
            .collect(),
    )
}

#[test]
fn spec_rows_list_matches_the_spec_table() {
    let Some(rows) = spec_table_rows() else {
        eprintln!("../shared/spec/autograd.md not found beside the repository; nothing to compare");
        return;
    };
    assert_eq!(rows.len(), SPEC_ROWS.len(), "spec rows: {rows:#?}");
    for (row, (ours, names)) in rows.iter().zip(SPEC_ROWS) {
        // Every operator name the row mentions in backticks maps to one of ours.
        let mentioned: Vec<String> = row.split('`').skip(1).step_by(2).map(|s| s.to_string()).collect();
        let first = mentioned.first().cloned().unwrap_or_default();
        let ours_first = ours.split(',').next().unwrap_or("").trim();
        if *ours == "Views" {
            assert!(row.starts_with("Views"), "expected the views row, got {row}");
            continue;
        }
        assert_eq!(first, ours_first, "row {row} vs {ours}");
        assert!(!names.is_empty());
    }
}
