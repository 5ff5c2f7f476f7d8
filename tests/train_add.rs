//! `om train --task add` end to end (a test of the root `onemodel` package:
//! `cargo test --release --test train_add`): a short run of the decoder-only transformer
//! learns 3-digit sums well enough to answer at least 95% of the 1000 held-out sums exactly
//! by greedy decoding (3 epochs of 10,000 sums; seed 7 reaches about 99%), and in exact mode
//! a run gives the same bits — losses, accuracy and saved weights — at 1 and 2 threads.
//! It runs the built binary (`CARGO_BIN_EXE_om`), as `tests/cli.rs` does.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `om train --task add args...` writing under `dir`; returns its standard output.
fn train_add(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_om"))
        .args(["train", "--task", "add", "--out"])
        .arg(dir)
        .args(args)
        .output()
        .expect("the om binary runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "om train --task add {args:?}:\n{stdout}\n{stderr}");
    stdout
}

/// A fresh directory of this test's own.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("om-train-add-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// The percentage after `held-out exact match ` in `line`.
fn exact_match(line: &str) -> f64 {
    let rest = line.split("held-out exact match ").nth(1).unwrap_or_else(|| panic!("no accuracy in {line:?}"));
    rest.split('%').next().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no percentage in {line:?}"))
}

#[test]
fn a_short_run_answers_held_out_sums_exactly() {
    let dir = scratch("short");
    let stdout = train_add(&dir, &["--epochs", "3", "--save"]);
    eprintln!("{stdout}");
    assert!(stdout.contains("3-digit sums with reversed answers") && stdout.contains("AdamW"), "{stdout}");
    let epochs: Vec<&str> = stdout.lines().filter(|l| l.starts_with("epoch ")).collect();
    assert_eq!(epochs.len(), 3, "{stdout}");
    let summary = stdout.lines().find(|l| l.starts_with("held-out exact match")).expect("the closing line");
    let acc = exact_match(summary);
    assert!(acc >= 95.0, "held-out exact match {acc}% after 3 epochs (the bar is 95%):\n{stdout}");
    assert!(exact_match(epochs[0]) < acc, "the accuracy did not rise:\n{stdout}");
    assert_eq!(std::fs::read(dir.join("train_add.png")).expect("the curve").get(1..4), Some(&b"PNG"[..]));
    let weights = onemodel::core::io::load(dir.join("add.safetensors")).expect("the weights load");
    assert!(weights.contains_key("blocks.1.attn.in_proj_weight") && weights.contains_key("head.weight"), "{:?}", weights.keys());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn exact_mode_gives_the_same_bits_at_1_and_2_threads() {
    let runs: Vec<(Vec<String>, Vec<u8>)> = ["1", "2"]
        .iter()
        .map(|threads| {
            let dir = scratch(&format!("exact{threads}"));
            let stdout = train_add(&dir, &["--epochs", "1", "--mode", "exact", "--threads", threads, "--save"]);
            // the figures: the epoch line without its rate (`  N sums/s`), the final losses,
            // the closing line without the wall time
            let figures = stdout
                .lines()
                .filter_map(|l| match l {
                    _ if l.starts_with("epoch ") => l.rsplit_once("  ").map(|(figures, _rate)| figures.to_string()),
                    _ if l.starts_with("final") => Some(l.to_string()),
                    _ if l.starts_with("held-out") => l.split(", wall time").next().map(str::to_string),
                    _ => None,
                })
                .collect();
            let weights = std::fs::read(dir.join("add.safetensors")).expect("the weights");
            let _ = std::fs::remove_dir_all(&dir);
            (figures, weights)
        })
        .collect();
    assert_eq!(runs[0].0.len(), 3, "{:?}", runs[0].0);
    assert_eq!(runs[0].0, runs[1].0, "the printed figures differ between 1 and 2 threads");
    assert!(runs[0].1 == runs[1].1, "the saved weights differ between 1 and 2 threads");
}
