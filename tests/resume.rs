//! `om train --checkpoint DIR` / `--resume DIR` (a test of the root `onemodel` package:
//! `cargo test --release --test resume`): in exact mode a run stopped after epoch 1
//! (`--stop-after-epoch 1`, hidden, as an interruption) and resumed prints the same final
//! bits — the last epoch's mean loss and the last batch's loss — as the same run
//! uninterrupted, for every task; and a checkpoint of another task, of other settings, of
//! another model shape, truncated or damaged is refused with an error naming the file,
//! before anything is trained or written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn om(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_om")).args(args).output().expect("the om binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("om-resume-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// Runs `om train ARGS...` successfully and returns its standard output.
#[track_caller]
fn train(args: &[&str]) -> String {
    let all: Vec<&str> = ["train", "--mode", "exact", "--epochs", "2"].into_iter().chain(args.iter().copied()).collect();
    let out = om(&all);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "om {all:?} failed:\n{stdout}\n{}", text(&out.stderr));
    stdout
}

/// The `final ...` line (the bits of the last epoch's mean loss and of the last batch's).
#[track_caller]
fn final_line(stdout: &str) -> String {
    stdout.lines().find(|l| l.starts_with("final ")).unwrap_or_else(|| panic!("no final line in:\n{stdout}")).to_string()
}

/// Trains `task` for 2 epochs uninterrupted, then stopped after epoch 1 and resumed (at
/// another thread count), and checks the final bits agree; returns the scratch directory
/// with the checkpoint in `ckpt/`.
fn interrupted_equals_uninterrupted(task: &str) -> PathBuf {
    let dir = scratch(task);
    let out = |name: &str| path(&dir).to_string() + "/" + name;
    let whole = train(&["--task", task, "--threads", "1", "--out", &out("whole")]);
    let first = train(&["--task", task, "--threads", "2", "--out", &out("parts"), "--checkpoint", &out("ckpt"), "--stop-after-epoch", "1"]);
    assert!(!first.contains("final "), "the run did not stop after epoch 1:\n{first}");
    assert!(first.contains("stopped after epoch 1 of 2"), "{first}");
    assert!(Path::new(&out("ckpt/checkpoint.txt")).is_file() && Path::new(&out("ckpt/model-1.safetensors")).is_file());
    let rest = train(&["--task", task, "--threads", "1", "--out", &out("parts"), "--resume", &out("ckpt")]);
    assert!(rest.contains("resumed from") && !rest.contains("epoch   1 "), "{rest}");
    assert_eq!(final_line(&rest), final_line(&whole), "resumed:\n{rest}\nuninterrupted:\n{whole}");
    // The resumed run went on checkpointing into the directory it resumed from.
    assert!(Path::new(&out("ckpt/model-2.safetensors")).is_file() && !Path::new(&out("ckpt/model-1.safetensors")).exists());
    dir
}

#[test]
fn digits_resumed_equals_uninterrupted_in_exact_mode() {
    let dir = interrupted_equals_uninterrupted("digits");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "minutes unoptimised: cargo test --release --test resume")]
fn ocr_resumed_equals_uninterrupted_in_exact_mode() {
    let dir = interrupted_equals_uninterrupted("ocr");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "minutes unoptimised: cargo test --release --test resume")]
fn add_resumed_equals_uninterrupted_in_exact_mode() {
    // AdamW, the per-step warm-up + cosine schedule (rebuilt and stepped past the steps
    // done) and gradient clipping continue bit for bit
    let dir = interrupted_equals_uninterrupted("add");
    // an add checkpoint does not resume another task
    refused(&dir, &["--task", "digits"], "checkpoint.txt: it is a checkpoint of --task add");
    let _ = std::fs::remove_dir_all(dir);
}

/// Every file of `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir).expect("the directory").flatten().map(|e| e.path()).collect();
    files.sort();
    files.into_iter().map(|p| (p.clone(), std::fs::read(p).expect("a file"))).collect()
}

/// `om train ARGS... --resume ckpt` fails with exit code 1 and a message naming `file`;
/// nothing in the checkpoint changes and no curve is drawn.
#[track_caller]
fn refused(dir: &Path, args: &[&str], file: &str) {
    let ckpt = dir.join("ckpt");
    let before = snapshot(&ckpt);
    let out_dir = dir.join("refused");
    let all: Vec<&str> =
        ["train", "--mode", "exact", "--out", path(&out_dir), "--resume", path(&ckpt)].into_iter().chain(args.iter().copied()).collect();
    let out = om(&all);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "om {all:?} should fail:\n{stdout}\n{stderr}");
    assert!(stderr.contains(file), "om {all:?}: the error should name {file}:\n{stderr}");
    assert!(!stdout.contains("epoch "), "om {all:?} trained:\n{stdout}");
    assert_eq!(snapshot(&ckpt), before, "om {all:?} changed the checkpoint");
    assert!(["train.png", "train_ocr.png", "train_add.png"].iter().all(|f| !out_dir.join(f).exists()));
}

/// FNV-1a of `bytes` (the checkpoint's hash), to forge a consistent checkpoint line.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

#[test]
fn mismatched_truncated_or_damaged_checkpoints_are_refused() {
    let dir = scratch("refused");
    let ckpt = dir.join("ckpt");
    train(&["--threads", "1", "--out", path(&dir.join("o")), "--checkpoint", path(&ckpt), "--stop-after-epoch", "1"]);
    let state = ckpt.join("checkpoint.txt");
    let original = std::fs::read_to_string(&state).expect("checkpoint.txt");

    // Another task, another seed or batch size than the checkpoint's.
    refused(&dir, &["--task", "ocr"], "checkpoint.txt");
    refused(&dir, &["--task", "add"], "checkpoint.txt: it is a checkpoint of --task digits");
    refused(&dir, &["--seed", "8"], "--seed");
    refused(&dir, &["--batch", "16"], "--batch");
    // Nothing left to train.
    refused(&dir, &["--epochs", "1"], "nothing left to train");

    // Truncated: the `end` line (or more) missing.
    std::fs::write(&state, &original[..original.len() / 2]).expect("write");
    refused(&dir, &[], "checkpoint.txt");
    std::fs::write(&state, original.replace("\nend\n", "\n")).expect("write");
    refused(&dir, &[], "truncated");
    // A field that does not parse.
    std::fs::write(&state, original.replacen("rng ", "rng zz", 1)).expect("write");
    refused(&dir, &[], "checkpoint.txt");
    std::fs::write(&state, &original).expect("write");

    // A damaged model file: one byte flipped.
    let model = ckpt.join("model-1.safetensors");
    let bytes = std::fs::read(&model).expect("model file");
    let mut flipped = bytes.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    std::fs::write(&model, &flipped).expect("write");
    refused(&dir, &[], "model-1.safetensors");
    std::fs::write(&model, &bytes).expect("write");

    // Another model's weights with a consistent length and hash: the shapes are checked.
    let other = std::fs::read(ckpt.join("optimizer-1.safetensors")).expect("optimizer file");
    std::fs::write(&model, &other).expect("write");
    let line = original.lines().find(|l| l.starts_with("model ")).expect("a model line");
    let forged = format!("model model-1.safetensors {} {:016x}", other.len(), fnv1a(&other));
    std::fs::write(&state, original.replace(line, &forged)).expect("write");
    refused(&dir, &[], "model-1.safetensors");
    std::fs::write(&model, &bytes).expect("write");
    std::fs::write(&state, &original).expect("write");

    // Restored, the checkpoint resumes.
    let rest = train(&["--threads", "1", "--out", path(&dir.join("o")), "--resume", path(&ckpt)]);
    assert!(rest.contains("final loss"), "{rest}");
    let _ = std::fs::remove_dir_all(dir);
}
