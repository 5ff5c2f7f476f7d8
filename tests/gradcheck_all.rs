//! One named test per registered gradient-check case (`<op>::<case>`), built from the
//! registry: adding an `#[op]` adds its cases here with no list to keep by hand. Each runs
//! `om_core::gradcheck::check_case` in both compute modes (exact mode at one thread, its
//! values and analytic gradients then compared bit for bit with two threads'). A first
//! trial checks that every `#[op]` declared in the sources of `om-ops` is registered (none
//! dropped by the linker) and nothing else is. With `ONEMODEL_GRADCHECK_LOG=<file>` set,
//! the table of worst errors per operator and mode (`gradcheck::log_table`) is written to
//! that file after the trials ran (spec section 6).

mod declared;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use libtest_mimic::{Arguments, Failed, Trial};
use om_core::gradcheck::{self, OpCheck};
use om_core::{registry, Mode};

/// The modes every case is checked in.
const MODES: [Mode; 2] = [Mode::Fast, Mode::Exact];

fn main() {
    let args = Arguments::from_args();
    let declared: Vec<String> = declared::declared_in_sources(&declared::ops_sources()).into_iter().map(|(name, _)| name).collect();
    let entries = match om_ops::registered_ops() {
        Ok(e) => e,
        Err(dups) => {
            eprintln!("operators registered more than once: {dups:?}");
            std::process::exit(101);
        }
    };
    let mut trials = vec![Trial::test("registry::every_declared_op_is_registered", move || {
        let names: Vec<&str> = registry::entries().map_err(|d| format!("duplicates {d:?}"))?.iter().map(|e| e.name).collect();
        if declared.len() < 50 {
            return Err(format!("the source scan found only {} operators: {declared:?}", declared.len()).into());
        }
        let missing: Vec<&String> = declared.iter().filter(|n| !names.contains(&n.as_str())).collect();
        if !missing.is_empty() {
            return Err(format!("declared but not registered (dropped by the linker?): {missing:?}").into());
        }
        let undeclared: Vec<&&str> = names.iter().filter(|n| !declared.iter().any(|d| d == *n)).collect();
        if !undeclared.is_empty() {
            return Err(format!("registered but not found in the sources: {undeclared:?}").into());
        }
        Ok(())
    })];
    let mut seen = std::collections::BTreeSet::new();
    let log: Arc<Mutex<BTreeMap<&'static str, OpCheck>>> = Arc::default();
    for entry in entries {
        let cases = (entry.cases)();
        if cases.is_empty() {
            trials.push(Trial::test(format!("{}::has_cases", entry.name), || Err(Failed::from("no gradient-check cases"))));
        }
        for (i, _) in cases.iter().enumerate() {
            let name = format!("{}::{}", entry.name, cases[i].name);
            if !seen.insert(name.clone()) {
                trials.push(Trial::test(format!("{name}::unique"), || Err(Failed::from("duplicate case name"))));
                continue;
            }
            let (cases_fn, op, log) = (entry.cases, entry.name, log.clone());
            trials.push(Trial::test(name, move || {
                let case = cases_fn().into_iter().nth(i).ok_or("case vanished")?;
                let check = gradcheck::check_case(&case, &MODES);
                let failures: Vec<String> = check.failures.iter().map(ToString::to_string).collect();
                let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
                log.entry(op).or_insert_with(|| OpCheck::new(op, &MODES)).add(check);
                if failures.is_empty() {
                    Ok(())
                } else {
                    Err(failures.join("\n").into())
                }
            }));
        }
    }
    trials.sort_by(|a, b| a.name().cmp(b.name()));
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(path) = std::env::var_os("ONEMODEL_GRADCHECK_LOG") {
        let rows: Vec<OpCheck> = std::mem::take(&mut *log.lock().unwrap_or_else(|e| e.into_inner())).into_values().collect();
        if let Err(e) = std::fs::write(&path, gradcheck::log_table(&rows)) {
            eprintln!("ONEMODEL_GRADCHECK_LOG={}: {e}", Path::new(&path).display());
            std::process::exit(101);
        }
    }
    conclusion.exit();
}
