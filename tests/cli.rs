//! The `om` binary as a user meets it (a test of the root `onemodel` package, run by
//! `cargo test --release --workspace` or `cargo test --release --test cli`): `--version`,
//! `--help` of every command, usage errors exiting with 2 before any work, the checks of
//! `om train`'s options, and a one-epoch training run writing its curve and weights to
//! `--out`. It runs the built binary (`CARGO_BIN_EXE_om`) with `std::process::Command`:
//! the standard library is all this needs, so no test-only dependency is added.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `om args...` in `dir`.
fn om_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_om")).args(args).current_dir(dir).output().expect("the om binary runs")
}

fn om(args: &[&str]) -> Output {
    om_in(&std::env::temp_dir(), args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fresh directory of this test's own.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("om-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

#[track_caller]
fn assert_usage_error(args: &[&str], stderr_mentions: &str) {
    let out = om(args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "om {args:?} should be a usage error:\n{stdout}\n{stderr}");
    assert!(stderr.contains(stderr_mentions), "om {args:?}: stderr should mention `{stderr_mentions}`:\n{stderr}");
    assert!(stdout.is_empty(), "om {args:?} did work before failing:\n{stdout}");
}

#[test]
fn version_prints_the_package_version() {
    let out = om(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout).trim(), format!("om {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn help_lists_the_commands_and_the_exit_codes() {
    let out = om(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for needle in ["train", "gradcheck", "ops", "bench", "Exit codes: 0 success, 1 runtime failure", "2 usage error"] {
        assert!(help.contains(needle), "om --help lacks `{needle}`:\n{help}");
    }
}

#[test]
fn train_help_lists_every_option_with_defaults_and_values() {
    let out = om(&["train", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for needle in [
        "--task",
        "digits",
        "ocr",
        "--epochs",
        "--seed",
        "[default: 7]",
        "--threads",
        "--mode",
        "fast",
        "exact",
        "--batch",
        "[default: 32]",
        "--lr",
        "--out",
        "[default: target/om]",
        "--save",
    ] {
        assert!(help.contains(needle), "om train --help lacks `{needle}`:\n{help}");
    }
}

#[test]
fn gradcheck_help_lists_the_modes() {
    let out = om(&["gradcheck", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for needle in ["--mode", "fast", "exact", "both", "[default: both]"] {
        assert!(help.contains(needle), "om gradcheck --help lacks `{needle}`:\n{help}");
    }
}

#[test]
fn gradcheck_runs_every_operator_in_the_modes_asked() {
    for (mode, rows) in [("exact", &["exact"][..]), ("both", &["fast", "exact"][..])] {
        let out = om(&["gradcheck", "--mode", mode]);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "om gradcheck --mode {mode}:\n{stdout}\n{stderr}");
        let summary = stdout.lines().last().unwrap_or("");
        assert!(summary.starts_with(&format!("gradcheck ({}): ", rows.join(", "))), "{summary}");
        assert!(summary.contains(" cases, 0 failed,"), "{summary}");
        // One row per operator and mode: `matmul` once per mode, each passing.
        let matmul: Vec<&str> = stdout.lines().filter(|l| l.starts_with("matmul ")).collect();
        let modes: Vec<&str> = matmul.iter().filter_map(|l| l.split_whitespace().nth(1)).collect();
        assert_eq!(modes, rows, "{stdout}");
        assert!(matmul.iter().all(|l| l.ends_with(" ok")), "{stdout}");
    }
}

#[test]
fn every_benchmark_has_help() {
    for bench in ["gemm", "step", "conv", "norm-pool", "lstm", "attention", "memory", "sweep"] {
        let out = om(&["bench", bench, "--help"]);
        let help = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "om bench {bench} --help");
        assert!(help.contains("--threads") && help.contains("--mode"), "om bench {bench} --help:\n{help}");
    }
}

#[test]
fn unknown_or_extra_arguments_are_usage_errors() {
    assert_usage_error(&[], "Usage: om <COMMAND>");
    assert_usage_error(&["fly"], "unrecognized subcommand 'fly'");
    assert_usage_error(&["gradcheck", "extra"], "unexpected argument 'extra'");
    assert_usage_error(&["ops", "--bogus"], "unexpected argument '--bogus'");
    assert_usage_error(&["train", "extra"], "unexpected argument 'extra'");
    assert_usage_error(&["train", "--help-me"], "unexpected argument '--help-me'");
    assert_usage_error(&["bench", "warp"], "unrecognized subcommand 'warp'");
    assert_usage_error(&["bench", "gemm", "--m"], "a value is required for '--m <M>'");
}

#[test]
fn invalid_values_say_what_is_accepted() {
    assert_usage_error(&["train", "--mode", "quick"], "[possible values: fast, exact]");
    assert_usage_error(&["gradcheck", "--mode", "quick"], "[possible values: fast, exact, both]");
    assert_usage_error(&["train", "--task", "chess"], "[possible values: digits, ocr, add]");
    assert_usage_error(&["train", "--epochs", "0"], "expected a whole number of at least 1");
    assert_usage_error(&["train", "--batch", "1"], "expected a whole number of at least 2");
    assert_usage_error(&["train", "--lr", "0"], "expected a finite number above 0");
    assert_usage_error(&["train", "--lr=-0.1"], "expected a finite number above 0");
    assert_usage_error(&["train", "--threads", "0"], "--threads");
    assert_usage_error(&["train", "--threads", "100000"], "--threads");
    assert_usage_error(&["bench", "step", "--model", "resnet"], "[possible values: convnet, encoder, crnn_ctc]");
    assert_usage_error(&["bench", "conv", "--layer", "4"], "--layer");
    assert_usage_error(&["bench", "norm-pool", "--case", "nope"], "possible values: bn_32x32x32x32");
    assert_usage_error(&["bench", "memory", "--model", "convnet", "--cache-limit", "lots"], "auto, unlimited or a number of bytes");
    assert_usage_error(&["bench", "sweep", "--sizes", "64by512"], "expected BATCHxWIDTH");
    assert_usage_error(&["bench", "sweep", "--sizes", "0x32"], "batch and width must be at least 1");
    assert_usage_error(&["bench", "sweep", "--sizes", "1x99999"], "must be at most 16777216");
}

#[test]
fn unwritable_outputs_are_refused_before_training() {
    let dir = scratch("unwritable");
    let file = dir.join("a-file");
    std::fs::write(&file, b"not a directory").expect("a file");
    let under_file = file.join("weights.safetensors");
    assert_usage_error(&["train", "--save", under_file.to_str().expect("utf-8 path")], "--save");
    assert_usage_error(&["train", "--save", dir.to_str().expect("utf-8 path")], "is a directory");
    assert_usage_error(&["train", "--out", file.to_str().expect("utf-8 path")], "--out");
    assert!(!under_file.exists());
    assert_eq!(std::fs::read(&file).expect("the file"), b"not a directory", "the probe must leave files as they were");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_epoch_writes_the_curve_and_weights_under_out() {
    let dir = scratch("one-epoch");
    let out = om_in(&dir, &["train", "--epochs", "1", "--threads", "1", "--out", "runs", "--save"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("1 epochs") && stdout.contains("epoch   1  loss"), "{stdout}");
    assert!(!stdout.contains("train: train") && !stderr.contains("train: train"), "{stdout}\n{stderr}");
    let (png, weights) = (dir.join("runs/train.png"), dir.join("runs/digits.safetensors"));
    assert!(stdout.contains(&format!("curve: {}", png.display())), "the curve's full path:\n{stdout}");
    assert!(stdout.contains(&format!("weights: {}", weights.display())), "the weights' full path:\n{stdout}");
    assert_eq!(std::fs::read(&png).expect("the curve").get(1..4), Some(&b"PNG"[..]));
    let saved = onemodel::core::io::load(&weights).expect("the weights load");
    assert!(saved.keys().any(|k| k.ends_with("weight")), "{:?}", saved.keys());
    let _ = std::fs::remove_dir_all(&dir);
}
