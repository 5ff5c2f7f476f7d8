//! The `om` binary when its output goes nowhere or fails (issue 22): a closed pipe ends it
//! quietly (status 141, as a tool killed by SIGPIPE; never a panic's 101), a write error
//! exits 1 with a message, oversized `bench gemm` sizes are usage errors before any
//! allocation, a usage error found after `--out` was checked leaves no directory, and
//! `ONEMODEL_MAX_TENSOR_BYTES` sets the pool's limit (the `om` binary reads it; the library
//! reads no environment).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn spawn(args: &[&str], stdout: Stdio) -> Child {
    Command::new(env!("CARGO_BIN_EXE_om"))
        .args(args)
        .current_dir(std::env::temp_dir())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("the om binary runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("om-cli-robust-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// Waits for `child`, whose reader of stdout has gone, and checks it ended quietly.
#[track_caller]
fn assert_quiet_end(mut child: Child, what: &str) {
    let status = child.wait().expect("om ends");
    let mut stderr = String::new();
    child.stderr.take().expect("piped").read_to_string(&mut stderr).expect("stderr");
    assert!(!stderr.contains("panicked"), "{what}: panicked:\n{stderr}");
    assert!(stderr.is_empty(), "{what}: should end quietly, said:\n{stderr}");
    assert!(matches!(status.code(), Some(0 | 141)), "{what}: status {status:?}");
}

#[test]
fn a_closed_pipe_ends_every_command_quietly() {
    // `om ops | true`: the reader is gone before the first write.
    let mut ops = spawn(&["ops"], Stdio::piped());
    drop(ops.stdout.take());
    assert_quiet_end(ops, "om ops | true");

    // `om gradcheck | head -1`.
    let mut gc = spawn(&["gradcheck"], Stdio::piped());
    let mut line = String::new();
    BufReader::new(gc.stdout.take().expect("piped")).read_line(&mut line).expect("a first line");
    assert!(line.starts_with("op "), "{line}");
    assert_quiet_end(gc, "om gradcheck | head -1");

    // `om train | head -c1`.
    let dir = scratch("pipe");
    let out = dir.join("out");
    let mut train = spawn(&["train", "--epochs", "1", "--out", out.to_str().unwrap()], Stdio::piped());
    let mut byte = [0u8; 1];
    train.stdout.take().expect("piped").read_exact(&mut byte).expect("a first byte");
    assert_quiet_end(train, "om train | head -c1");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_write_error_exits_1_with_a_message() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full opens");
    let dir = scratch("full");
    let out = dir.join("out");
    let child = spawn(&["train", "--epochs", "1", "--out", out.to_str().unwrap()], Stdio::from(full));
    let o = child.wait_with_output().expect("om ends");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("cannot write"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn oversized_gemm_benchmarks_are_usage_errors() {
    for args in [["--m", "4294967296", "--k", "4294967296", "--n", "4294967296"], ["--m", "200000", "--k", "200000", "--n", "1"]] {
        let mut all = vec!["bench", "gemm"];
        all.extend(args);
        let o = spawn(&all, Stdio::piped()).wait_with_output().expect("om ends");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "om {all:?}: {stderr}");
        assert!(stderr.contains("memory limit"), "{stderr}");
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn late_usage_errors_leave_no_directories() {
    let dir = scratch("late");
    let out = dir.join("new").join("deeper");
    // Found before anything is created.
    let o = spawn(&["train", "--shards", "64", "--batch", "32", "--out", out.to_str().unwrap()], Stdio::piped())
        .wait_with_output()
        .expect("om ends");
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!dir.join("new").exists(), "--shards: a usage error left {}", dir.join("new").display());
    // Found after --out was checked (and its directories made): --save cannot be written.
    let file = dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let save = file.join("w.safetensors");
    let o = spawn(&["train", "--out", out.to_str().unwrap(), "--save", save.to_str().unwrap()], Stdio::piped())
        .wait_with_output()
        .expect("om ends");
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!dir.join("new").exists(), "--save: a usage error left {}", dir.join("new").display());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_environment_sets_the_limit_of_the_om_binary() {
    let run = |value: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_om"))
            .args(args)
            .current_dir(std::env::temp_dir())
            .env("ONEMODEL_MAX_TENSOR_BYTES", value)
            .output()
            .expect("the om binary runs")
    };
    // 4 MiB operands under a 1 MiB limit: refused before any allocation.
    let o = run("1048576", &["bench", "gemm", "--m", "1024", "--k", "1024", "--n", "1024"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("memory limit") && stderr.contains("1048576"), "{stderr}");
    // A value that is not a positive number of bytes is a usage error naming the variable.
    for bad in ["lots", "0", "-5"] {
        let o = run(bad, &["ops"]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("ONEMODEL_MAX_TENSOR_BYTES must be a positive number of bytes"), "{stderr}");
        assert!(o.stdout.is_empty());
    }
}
