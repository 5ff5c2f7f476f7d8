//! The operators declared in `om-ops`'s sources, found by reading them as text: each
//! `#[op]` or `#[op(..)]` attribute line followed (after its arguments, doc lines and
//! attributes) by `pub mod NAME {`. Shared by `gradcheck_all` (every declared operator is
//! registered) and `gradcheck_mutation` (each operator's family from its source file).

use std::path::{Path, PathBuf};

/// `om-ops/src`.
pub fn ops_sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../om-ops/src")
}

/// Every operator declared under `dir` (recursively), with the file declaring it.
pub fn declared_in_sources(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(declared_in_sources(&path));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut after_op = false;
        for line in text.lines().map(str::trim) {
            if line == "#[op]" || line.starts_with("#[op(") {
                after_op = true;
            } else if let Some(name) = line.strip_prefix("pub mod ").and_then(|r| r.strip_suffix(" {")).filter(|_| after_op) {
                found.push((name.to_string(), path.clone()));
                after_op = false;
            }
        }
    }
    found
}
