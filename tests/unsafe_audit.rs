//! The `unsafe` audit, run on every test run so it cannot go stale: in the library `unsafe`
//! appears only under `om-core/src/kernels/`; every `unsafe` block and `unsafe impl` is
//! preceded by a `// SAFETY:` comment (on its line, or directly above it with only comments
//! and attributes in between); every `unsafe fn` states its contract, in a `# Safety` doc
//! section, a `# Safety` contract in its module's doc, or as a method of an `unsafe impl`.
//! Test code (files under a `tests/` directory) follows the same comment rules.
//!
//! The CPU is asked which instruction sets it runs (`is_x86_feature_detected!`,
//! `is_aarch64_feature_detected!`) only in `om-core/src/kernels/simd.rs`, where the
//! capability tokens are made: every other piece of code reaches an instruction set through
//! a token, so a path cannot run on a CPU without it.

use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Every `.rs` file of the workspace (not `target/`).
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The code part of a line (before a `//` comment; string contents are not special-cased,
/// which is fine for this codebase: no string literal spells the keyword).
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

fn has_unsafe(code: &str) -> bool {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|w| w == "unsafe")
}

/// Whether the lines above `i` (skipping comments, attributes and blank lines) say `SAFETY`.
fn justified(lines: &[&str], i: usize, marker: &str) -> bool {
    if lines[i].contains(marker) {
        return true;
    }
    for line in lines[..i].iter().rev() {
        let t = line.trim();
        if t.contains(marker) {
            return true;
        }
        if !(t.starts_with("//") || t.starts_with("#[") || t.is_empty()) {
            return false;
        }
    }
    false
}

/// The problems found in one file's text (`in_kernels`: the file may use `unsafe`).
fn audit(text: &str, in_kernels: bool, is_test: bool) -> Vec<(usize, &'static str)> {
    let lines: Vec<&str> = text.lines().collect();
    let module_contract = lines.iter().take_while(|l| l.starts_with("//!") || l.trim().is_empty()).any(|l| l.contains("# Safety"));
    let mut problems = Vec::new();
    let mut impl_depth: Option<usize> = None; // brace depth at which an `unsafe impl` opened
    let mut depth = 0usize;
    for (i, line) in lines.iter().enumerate() {
        let c = code(line);
        if has_unsafe(c) {
            if !in_kernels && !is_test {
                problems.push((i + 1, "`unsafe` outside om-core/src/kernels/"));
            }
            let is_fn = c.contains("unsafe fn");
            let is_impl = c.contains("unsafe impl");
            if is_impl {
                impl_depth = Some(depth);
            }
            let ok = if is_fn {
                impl_depth.is_some() || module_contract || justified(&lines, i, "# Safety") || justified(&lines, i, "SAFETY")
            } else {
                justified(&lines, i, "SAFETY")
            };
            if !ok {
                problems
                    .push((i + 1, if is_fn { "`unsafe fn` without a stated contract" } else { "`unsafe` without a `// SAFETY:` line" }));
            }
        }
        for ch in c.chars() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if impl_depth == Some(depth) {
                        impl_depth = None;
                    }
                }
                _ => {}
            }
        }
    }
    problems
}

#[test]
fn every_unsafe_is_in_a_kernel_and_justified() {
    let root = workspace_root();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 50, "the scan found only {} files under {}", files.len(), root.display());
    let kernels = root.join("om-core/src/kernels");
    let this_file = root.join("tests/unsafe_audit.rs");
    let mut report = Vec::new();
    let mut blocks = 0;
    for f in files.iter().filter(|f| **f != this_file) {
        let text = std::fs::read_to_string(f).unwrap();
        blocks += text.lines().filter(|l| has_unsafe(code(l))).count();
        let is_test = f.components().any(|c| c.as_os_str() == "tests");
        for (line, what) in audit(&text, f.starts_with(&kernels), is_test) {
            report.push(format!("{}:{line}: {what}", f.strip_prefix(&root).unwrap().display()));
        }
    }
    assert!(blocks > 50, "found only {blocks} lines with `unsafe`: is the scan reading the sources?");
    assert!(report.is_empty(), "unsafe audit:\n{}", report.join("\n"));
}

#[test]
fn the_audit_catches_what_it_should() {
    let bare = "fn f() {\n    let x = 1;\n    unsafe { g() }\n}\n";
    assert_eq!(audit(bare, true, false), vec![(3, "`unsafe` without a `// SAFETY:` line")]);
    assert_eq!(audit(bare, false, false).len(), 2, "outside kernels and unjustified");
    let justified_block = "fn f() {\n    // SAFETY: g has no preconditions.\n    #[allow(unused)]\n    unsafe { g() }\n}\n";
    assert!(audit(justified_block, true, false).is_empty());
    let far = "// SAFETY: stale\nfn f() {\n    unsafe { g() }\n}\n";
    assert_eq!(audit(far, true, false).len(), 1, "a comment above other code does not count");
    let bare_fn = "/// Does things.\nunsafe fn f() {}\n";
    assert_eq!(audit(bare_fn, true, false), vec![(2, "`unsafe fn` without a stated contract")]);
    let documented_fn = "/// Does things.\n///\n/// # Safety\n/// Needs AVX.\nunsafe fn f() {}\n";
    assert!(audit(documented_fn, true, false).is_empty());
    let trait_impl = "// SAFETY: forwards.\nunsafe impl A for B {\n    unsafe fn f() {}\n}\nunsafe fn g() {}\n";
    assert_eq!(audit(trait_impl, true, false), vec![(5, "`unsafe fn` without a stated contract")]);
}

/// The file that makes the capability tokens: the only one that may ask the CPU.
const TOKEN_MODULE: &str = "om-core/src/kernels/simd.rs";

/// The lines of `text` whose code (comments aside) asks the CPU for a feature.
fn feature_detection(text: &str) -> Vec<usize> {
    let detects = |c: &str| c.contains("is_x86_feature_detected") || c.contains("is_aarch64_feature_detected");
    text.lines().enumerate().filter(|(_, l)| detects(code(l))).map(|(i, _)| i + 1).collect()
}

#[test]
fn feature_detection_only_where_tokens_are_made() {
    let root = workspace_root();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let (token_module, this_file) = (root.join(TOKEN_MODULE), root.join("tests/unsafe_audit.rs"));
    let mut report = Vec::new();
    for f in files.iter().filter(|f| **f != token_module && **f != this_file) {
        for line in feature_detection(&std::fs::read_to_string(f).unwrap()) {
            report.push(format!("{}:{line}", f.strip_prefix(&root).unwrap().display()));
        }
    }
    assert!(
        report.is_empty(),
        "feature detection outside {TOKEN_MODULE} (take the capability token instead, `Avx::detect()` etc.):\n{}",
        report.join("\n")
    );
    let tokens = std::fs::read_to_string(&token_module).unwrap();
    assert!(!feature_detection(&tokens).is_empty(), "{TOKEN_MODULE} makes no token: is the scan reading the sources?");
}

#[test]
fn the_detection_scan_catches_what_it_should() {
    let inline = "fn f() -> bool {\n    std::arch::is_x86_feature_detected!(\"avx\")\n}\n";
    assert_eq!(feature_detection(inline), vec![2]);
    let aarch64 = "let neon = is_aarch64_feature_detected!(\"neon\");\n";
    assert_eq!(feature_detection(aarch64), vec![1]);
    let comment = "// `is_x86_feature_detected!` is asked in simd.rs only\nlet avx = Avx::detect();\n";
    assert!(feature_detection(comment).is_empty(), "comments do not count");
}
