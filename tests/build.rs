//! Extracts the example operator of `docs/adding-an-op.md` (its first ```rust block, up to
//! its `fn main`, without rustdoc's hidden `# ` lines) into
//! `$OUT_DIR/adding_an_op_example.rs`, which `adding_an_op.rs` includes: the guide's code is
//! the code the test compiles, so the two cannot drift apart.

use std::path::Path;

fn main() {
    let guide = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/adding-an-op.md");
    println!("cargo:rerun-if-changed={}", guide.display());
    let text = std::fs::read_to_string(&guide).unwrap_or_else(|e| panic!("reading {}: {e}", guide.display()));
    let block = text
        .split("```rust\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap_or_else(|| panic!("{} has no ```rust block", guide.display()));
    let block: String = block
        .lines()
        .take_while(|l| !l.starts_with("fn main") && !l.starts_with("# fn main"))
        .filter(|l| !l.starts_with("# ") && *l != "#")
        .map(|l| format!("{l}\n"))
        .collect();
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("adding_an_op_example.rs");
    std::fs::write(&out, block).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}
