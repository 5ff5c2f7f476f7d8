//! Mutation test of the gradient check: for every registered operator, deliberately wrong
//! backward rules must each make every case they affect fail
//! `om_core::gradcheck::check_case`. The mutants are applied where the engine receives an
//! operator's input gradients (`om_core::autograd::mutation`, a test-only hook), so no
//! operator's code is edited:
//!
//! - `scale`: the gradient times 1.01 (a 1% error),
//! - `drop`: the gradient replaced by zeros (an input's gradient forgotten),
//! - `permute`: the last two axes transposed in memory (a transposed operand), or the
//!   elements reversed for a gradient with fewer than two axes longer than one.
//!
//! A primitive is mutated in its own record, for each input its cases route a gradient to;
//! a composition in every record its cases' graphs contain. A mutant that changes no value
//! in any case (permuting a constant gradient) is equivalent to the operator and not
//! counted. A mutant is killed when every case it changes a gradient of fails (not just
//! one of the operator's cases): each case can see a 1% error in each gradient it routes.
//! Operators without a backward ([`NO_BACKWARD`]) have nothing to mutate; their trial
//! checks that no case routes a gradient through them. One trial per operator
//! (`mutation::<op>`) fails if any counted mutant survives; the count of mutants and kills
//! per operator family is printed at the end (and with `ONEMODEL_MUTATION_LOG=<file>`
//! written there).

mod declared;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use libtest_mimic::{Arguments, Trial};
use om_core::autograd::mutation::{self, Kind, Mutant};
use om_core::gradcheck::check_case;
use om_core::registry::{Case, OpEntry, OpKind};
use om_core::Mode;

/// The wrong backwards tried on every (record, input) gradient.
const KINDS: [(&str, Kind); 3] = [("scale", Kind::Scale(1.01)), ("drop", Kind::Drop), ("permute", Kind::Permute)];

/// Operators whose result is never recorded (an Int32 index), so they have no backward.
const NO_BACKWARD: &[&str] = &["argmax", "argmin"];

/// Counts of one operator's mutants.
#[derive(Clone, Copy, Default)]
struct Count {
    /// Mutants that changed some gradient (the ones counted).
    mutants: usize,
    /// Of those, the ones every case they changed a gradient in failed on.
    killed: usize,
    /// (mutant, case) pairs where the mutant changed a gradient of the case.
    runs: usize,
    /// Of those, the ones whose check failed.
    failed_runs: usize,
    /// Mutants that changed no bit in any case (equivalent, not counted).
    equivalent: usize,
    /// Counted mutants of each kind of [`KINDS`].
    per_kind: [usize; 3],
}

fn main() {
    let args = Arguments::from_args();
    let families = families();
    let entries = match om_ops::registered_ops() {
        Ok(e) => e,
        Err(dups) => {
            eprintln!("operators registered more than once: {dups:?}");
            std::process::exit(101);
        }
    };
    let counts: Arc<Mutex<BTreeMap<&'static str, Count>>> = Arc::default();
    let mut trials: Vec<Trial> = entries
        .into_iter()
        .map(|entry| {
            let counts = counts.clone();
            Trial::test(format!("mutation::{}", entry.name), move || {
                let (count, survivors) = mutate_op(entry)?;
                if NO_BACKWARD.contains(&entry.name) {
                    return Ok(());
                }
                counts.lock().unwrap_or_else(|e| e.into_inner()).insert(entry.name, count);
                // Every operator gets at least a scale and a drop mutant that changes something.
                if count.per_kind[0] == 0 || count.per_kind[1] == 0 {
                    return Err(format!("no scale or no drop mutant changed a gradient ({:?} counted per kind)", count.per_kind).into());
                }
                if survivors.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{} of {} mutants survived: {}", survivors.len(), count.mutants, survivors.join("; ")).into())
                }
            })
        })
        .collect();
    trials.push(Trial::test("mutation::hook_is_inert_without_a_mutant", inert_without_a_mutant));
    trials.sort_by(|a, b| a.name().cmp(b.name()));
    let conclusion = libtest_mimic::run(&args, trials);
    let counts = counts.lock().unwrap_or_else(|e| e.into_inner());
    if !counts.is_empty() {
        let summary = summary(&counts, &families);
        eprintln!("{summary}");
        if let Some(path) = std::env::var_os("ONEMODEL_MUTATION_LOG") {
            if let Err(e) = std::fs::write(&path, &summary) {
                eprintln!("ONEMODEL_MUTATION_LOG={}: {e}", Path::new(&path).display());
                std::process::exit(101);
            }
        }
    }
    conclusion.exit();
}

/// Every mutant of one operator: its count and the survivors, described.
fn mutate_op(entry: &OpEntry) -> Result<(Count, Vec<String>), String> {
    let cases = (entry.cases)();
    // The (record, input) gradients the cases route, in first-seen order.
    let mut targets: Vec<(&'static str, usize)> = Vec::new();
    for case in &cases {
        let (check, routed) = mutation::trace(|| check_case(case, &[Mode::Fast]));
        if !check.passed() {
            return Err(format!("the unmutated case `{}` fails: {:?}", case.name, check.failures));
        }
        for t in routed {
            let own = entry.kind == OpKind::Composition || t.0 == entry.name;
            if own && !targets.contains(&t) {
                targets.push(t);
            }
        }
    }
    match (targets.is_empty(), NO_BACKWARD.contains(&entry.name)) {
        (true, false) => return Err(format!("no case routes a gradient through a record of `{}`", entry.name)),
        (false, true) => return Err(format!("`{}` is listed as having no backward, but its cases route {targets:?}", entry.name)),
        _ => {}
    }
    let (mut count, mut survivors) = (Count::default(), Vec::new());
    for &(op, input) in &targets {
        for (k, (label, kind)) in KINDS.into_iter().enumerate() {
            let mutant = Mutant { op, input, kind };
            let (changed, passed) = run_mutant(&cases, mutant);
            if changed == 0 {
                count.equivalent += 1;
                continue;
            }
            count.mutants += 1;
            count.runs += changed;
            count.failed_runs += changed - passed.len();
            count.per_kind[k] += 1;
            if passed.is_empty() {
                count.killed += 1;
            } else {
                survivors.push(format!("{label} of `{op}` input {input} (passed: {})", passed.join(", ")));
            }
        }
    }
    Ok((count, survivors))
}

/// Runs every case with `mutant`: the number of cases it changed a gradient in, and those
/// of them whose check still passed.
fn run_mutant(cases: &[Case], mutant: Mutant) -> (usize, Vec<String>) {
    let (mut changed, mut passed) = (0, Vec::new());
    for case in cases {
        let (check, effect) = mutation::with_mutant(mutant, || check_case(case, &[Mode::Fast]));
        if effect.changed > 0 {
            changed += 1;
            if check.passed() {
                passed.push(case.name.clone());
            }
        }
    }
    (changed, passed)
}

/// The hook changes nothing unless a mutant is installed, and the unmutated check passes.
fn inert_without_a_mutant() -> Result<(), libtest_mimic::Failed> {
    let entries = om_ops::registered_ops().map_err(|d| format!("duplicates {d:?}"))?;
    let entry = entries.iter().find(|e| e.name == "matmul").ok_or("matmul is registered")?;
    let case = (entry.cases)().into_iter().next().ok_or("matmul has a case")?;
    let plain = check_case(&case, &[Mode::Exact]);
    // A mutant of another operator leaves the bits alone.
    let other = Mutant { op: "no_such_op", input: 0, kind: Kind::Drop };
    let (mutated, effect) = mutation::with_mutant(other, || check_case(&case, &[Mode::Exact]));
    if !plain.passed() || plain != mutated || effect.fired != 0 {
        return Err(format!("the hook changed an unmutated check: {:?} against {:?}", plain.failures, mutated.failures).into());
    }
    // The same mutant on matmul fails it.
    let scaled = Mutant { op: "matmul", input: 0, kind: Kind::Scale(1.01) };
    let (check, effect) = mutation::with_mutant(scaled, || check_case(&case, &[Mode::Exact]));
    if check.passed() || effect.changed == 0 {
        return Err("a 1% error in matmul's first gradient passed the check".into());
    }
    Ok(())
}

/// The family of each operator: the `om-ops` source file declaring it.
fn families() -> BTreeMap<String, &'static str> {
    declared::declared_in_sources(&declared::ops_sources()).into_iter().map(|(name, path)| (name, family_of(&path))).collect()
}

/// The family named after a source file of `om-ops`.
fn family_of(path: &Path) -> &'static str {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let parent = path.parent().and_then(|p| p.file_name()).and_then(|s| s.to_str()).unwrap_or("");
    match (parent, stem) {
        ("losses", _) => "losses (incl. CTC)",
        ("recurrent", _) => "recurrent",
        (_, "activations" | "arith" | "pointwise") => "element-wise",
        (_, "linalg") => "matmul/linear",
        (_, "reductions") => "reductions",
        (_, "conv" | "pooling" | "resize") => "conv/pool/resize",
        (_, "norm") => "norms",
        (_, "normalizers" | "attention") => "softmax/attention",
        (_, "indexing" | "selection" | "views" | "triangular") => "indexing/shape",
        (_, "random") => "random (dropout)",
        _ => "other",
    }
}

/// The counts per family and in total, as printed.
fn summary(counts: &BTreeMap<&'static str, Count>, families: &BTreeMap<String, &'static str>) -> String {
    let mut per_family: BTreeMap<&str, (usize, Count)> = BTreeMap::new();
    for (op, c) in counts {
        let f = per_family.entry(families.get(*op).copied().unwrap_or("other")).or_default();
        f.0 += 1;
        f.1.mutants += c.mutants;
        f.1.killed += c.killed;
        f.1.equivalent += c.equivalent;
        f.1.runs += c.runs;
        f.1.failed_runs += c.failed_runs;
    }
    let mut s = String::from("gradient-check mutation test (scale 1.01, drop, permute)\n");
    s.push_str(&format!(
        "{:<20} {:>4} {:>8} {:>7} {:>11} {:>17}\n",
        "family", "ops", "mutants", "killed", "equivalent", "case runs failed"
    ));
    let row = |name: &str, ops: usize, c: &Count| {
        format!(
            "{name:<20} {ops:>4} {:>8} {:>7} {:>11} {:>17}\n",
            c.mutants,
            c.killed,
            c.equivalent,
            format!("{}/{}", c.failed_runs, c.runs)
        )
    };
    let mut total = (0, Count::default());
    for (family, (ops, c)) in &per_family {
        s.push_str(&row(family, *ops, c));
        total.0 += ops;
        total.1.mutants += c.mutants;
        total.1.killed += c.killed;
        total.1.equivalent += c.equivalent;
        total.1.runs += c.runs;
        total.1.failed_runs += c.failed_runs;
    }
    s.push_str(&row("total", total.0, &total.1));
    s
}
