//! `om`: the command-line face of OneModel.
//!
//! - `om train` — trains a model on built-in data (`--task digits|ocr`, see `--help`).
//! - `om gradcheck` — runs every registered gradient-check case, one row per operator.
//! - `om ops` — prints the operator registry as the Markdown kept in `docs/ops.md`.

use onemodel::core::{gradcheck, registry};
use std::process::ExitCode;

mod bench;
mod ocr;
mod train;

const USAGE: &str = "usage: om <command> [options]

commands:
  train        train a conv net on the built-in digits, or with --task ocr a CRNN + CTC reading
               strings of 4-8 digits (options: --task digits|ocr --epochs N --seed S
               --threads T --mode fast|exact --batch B --lr LR --save FILE)
  gradcheck    run every registered gradient-check case
  ops          print the operator registry as Markdown (docs/ops.md)
  bench gemm   --m M --k K --n N [--ta] [--tb]   one GEMM, GFLOP/s
  bench step   --model convnet|encoder|crnn_ctc [--steps N] [--warmup W]
               the training steps of BENCHMARKS.md, median and fastest ms
  bench conv   [--layer 1|2|3] [--stat median|min]   the convnet's convolutions
  bench norm-pool  [--case NAME] [--inner I]   pooling and norms on the benchmark shapes
  bench lstm|attention   crnn_ctc's LSTM stack, the encoder's attention (fwd + bwd)
               every bench also takes --threads T --mode fast|exact --path P, and all but
               step take --reps R
  bench memory --model convnet|encoder|crnn_ctc [--then MODEL2] [--cache-limit auto|unlimited|B]
               [--steps N] [--warmup W]   pool, heap and RSS figures of a warm step";

/// Counts heap allocations for `om bench memory` and the activation scopes of `om train`.
#[global_allocator]
static ALLOC: onemodel::core::alloc_count::CountingAlloc = onemodel::core::alloc_count::CountingAlloc;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    match cmd.as_str() {
        "ops" => {
            print!("{}", registry::markdown());
            ExitCode::SUCCESS
        }
        "gradcheck" => run_gradcheck(),
        "train" => match train::Options::parse(&args[1..]).and_then(|o| train::run(&o)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("om train: {e}");
                ExitCode::FAILURE
            }
        },
        "bench" => match bench::run(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("om {e}");
                ExitCode::from(2)
            }
        },
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("om: unknown command `{other}`\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run_gradcheck() -> ExitCode {
    let entries = match onemodel::ops::registered_ops() {
        Ok(e) => e,
        Err(dups) => {
            eprintln!("om gradcheck: operators registered more than once: {dups:?}");
            return ExitCode::FAILURE;
        }
    };
    println!("{:<20} {:>5} {:>12} {:>12}  status", "op", "cases", "worst abs", "worst rel");
    let (mut n_cases, mut n_failed) = (0usize, 0usize);
    for e in &entries {
        let cases = (e.cases)();
        let (mut abs, mut rel, mut failed) = (0.0f64, 0.0f64, Vec::new());
        for c in &cases {
            match gradcheck::run(c) {
                Ok(r) => {
                    abs = abs.max(r.worst_abs());
                    rel = rel.max(r.worst_rel());
                    if !r.passed() {
                        failed.push(c.name.clone());
                    }
                }
                Err(err) => failed.push(format!("{} ({err})", c.name)),
            }
        }
        n_cases += cases.len();
        n_failed += failed.len();
        let status = if failed.is_empty() { "ok".to_string() } else { format!("FAILED: {}", failed.join("; ")) };
        println!("{:<20} {:>5} {:>12.3e} {:>12.3e}  {status}", e.name, cases.len(), abs, rel);
    }
    let missing = registry::missing_spec_names();
    let missing = if missing.is_empty() { "none".to_string() } else { missing.join(" ") };
    println!("gradcheck: {} ops, {n_cases} cases, {n_failed} failed, spec rows missing: {missing}", entries.len());
    if n_failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
