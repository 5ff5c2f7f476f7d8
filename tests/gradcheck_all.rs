//! One named test per registered gradient-check case (`<op>::<case>`), built from the
//! registry: adding an `#[op]` adds its cases here with no list to keep by hand.

use libtest_mimic::{Arguments, Failed, Trial};
use om_core::registry;

fn main() {
    let args = Arguments::from_args();
    let declared = om_ops::declared_names();
    let entries = match registry::entries() {
        Ok(e) => e,
        Err(dups) => {
            eprintln!("operators registered more than once: {dups:?}");
            std::process::exit(101);
        }
    };
    let mut trials = vec![Trial::test("registry::every_declared_op_is_registered", move || {
        let names: Vec<&str> = registry::entries().map_err(|d| format!("duplicates {d:?}"))?.iter().map(|e| e.name).collect();
        let missing: Vec<&&str> = declared.iter().filter(|n| !names.contains(n)).collect();
        if !missing.is_empty() {
            return Err(format!("declared but not registered (dropped by the linker?): {missing:?}").into());
        }
        if names.len() != declared.len() {
            return Err(format!("{} registered, {} declared", names.len(), declared.len()).into());
        }
        Ok(())
    })];
    let mut seen = std::collections::BTreeSet::new();
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
            let cases_fn = entry.cases;
            trials.push(Trial::test(name, move || {
                let case = cases_fn().into_iter().nth(i).ok_or("case vanished")?;
                let rep = om_core::gradcheck::run(&case).map_err(|e| e.to_string())?;
                if rep.passed() {
                    Ok(())
                } else {
                    Err(format!("gradient mismatch: {:?}", rep.inputs).into())
                }
            }));
        }
    }
    trials.sort_by(|a, b| a.name().cmp(b.name()));
    libtest_mimic::run(&args, trials).exit();
}
