//! The one crate-path policy of `#[op]` and `#[derive(Module)]`: which path their
//! expansions use for the core crate. Both name only items under `<core>::__private`, so
//! the core crate's internal modules can stay hidden.
//!
//! 1. An explicit `crate = path` option (`#[op(crate = path, ..)]`,
//!    `#[module(crate = path)]`) wins.
//! 2. Else `::om_core` when the manifest of the crate being compiled
//!    (`$CARGO_MANIFEST_DIR/Cargo.toml`) lists `om-core` (or `om_core`) as a dependency:
//!    the workspace's own crates.
//! 3. Else the facade's path `::onemodel::__private::core`: a crate whose only dependency is
//!    `onemodel`.

use syn::Path;

/// The core crate's path when the declaration does not say.
pub fn default_core() -> Path {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").map(|d| std::path::PathBuf::from(d).join("Cargo.toml"));
    let text = manifest.and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
    if lists_core(&text) {
        syn::parse_quote!(::om_core)
    } else {
        syn::parse_quote!(::onemodel::__private::core)
    }
}

/// Whether a manifest lists `om-core` in one of its dependency tables: as a key
/// (`om-core = ..`, `om-core.workspace = true`) of `[dependencies]`,
/// `[dev-dependencies]`, `[build-dependencies]` or a `[target.'..'.dependencies]` table,
/// or as its own table (`[dependencies.om-core]`).
fn lists_core(manifest: &str) -> bool {
    let is_core = |name: &str| matches!(name.trim().trim_matches('"'), "om-core" | "om_core");
    let is_deps = |table: &str| table.ends_with("dependencies");
    let mut in_deps = false;
    for line in manifest.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[') {
            let table = header.trim_end_matches(']').trim();
            // `[dependencies.om-core]`: the dependency's own table.
            if let Some((parent, name)) = table.rsplit_once('.') {
                if is_deps(parent) && is_core(name) {
                    return true;
                }
            }
            in_deps = is_deps(table);
            continue;
        }
        if in_deps {
            let key = line.split(['=', '.']).next().unwrap_or("");
            if !line.starts_with('#') && is_core(key) {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::lists_core;

    #[test]
    fn finds_the_core_crate_only_in_dependency_tables() {
        assert!(lists_core("[dependencies]\nom-core.workspace = true\n"));
        assert!(lists_core("[dev-dependencies]\nom_core = { path = \"x\" }\n"));
        assert!(lists_core("[target.'cfg(unix)'.dependencies]\n\"om-core\" = \"0.1\"\n"));
        assert!(lists_core("[dependencies.om-core]\npath = \"../om-core\"\n"));
        assert!(!lists_core("[dependencies]\nonemodel = { path = \"../..\" }\n"));
        assert!(!lists_core("[package]\nname = \"om-core\"\n[dependencies]\nrayon = \"1\"\n"));
        assert!(!lists_core("[dependencies]\n# om-core = \"0.1\"\nonemodel = \"0.1\"\n"));
        assert!(!lists_core("[dependencies]\nom-core-extra = \"1\"\n"));
    }
}
