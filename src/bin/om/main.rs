//! `om`: the command-line face of OneModel (clap; `om <command> --help` lists every option
//! with its default and allowed values).
//!
//! - `om train` — trains a model on built-in or generated data (`--task digits|ocr|add`; [`train`]).
//! - `om gradcheck` — runs every registered gradient-check case, one row per operator.
//! - `om ops` — prints the operator registry as the Markdown kept in `docs/ops.md`.
//! - `om bench ...` — the benchmarks of `docs/performance.md` ([`mod@bench`]).
//!
//! Exit codes: 0 success, 1 runtime failure (a failed gradient check, an error while
//! training or benchmarking), 2 usage error (unknown command or option, an invalid value,
//! an unwritable output path; nothing has run).

use args::{Failure, Outcome};
use std::io::Write;

/// `println!` for the command's output: a closed pipe (`om ops | head -1`) ends the program
/// quietly with status 141 (a shell's status for SIGPIPE, what a C tool killed by it
/// reports), any other write error (`> /dev/full`) exits 1 with a message; never a panic.
macro_rules! outln {
    ($($arg:tt)*) => {{
        let mut out = ::std::io::stdout().lock();
        if let Err(e) = writeln!(out, $($arg)*).and_then(|()| out.flush()) {
            $crate::stdout_failed(e);
        }
    }};
}
use clap::{Parser, Subcommand};
use onemodel::core::{gradcheck, registry};
use std::process::ExitCode;

mod args;
mod bench;
mod plot;
mod train;

const EXIT_CODES: &str = "Exit codes: 0 success, 1 runtime failure (a failed gradient check, an error while training or \
benchmarking), 2 usage error (unknown command or option, invalid value, unwritable output path; nothing has run).";

/// Float32 CPU tensors with autograd: train a model, check every operator's gradients,
/// list the operators, run the benchmarks.
#[derive(Parser, Debug)]
#[command(name = "om", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Train a conv net on the built-in digits, (--task ocr) a CRNN + CTC reading strings of 4-8 digits, or (--task add) a transformer learning sums
    Train(train::TrainArgs),
    /// Run every registered gradient-check case, one row per operator
    Gradcheck,
    /// Print the operator registry as Markdown (docs/ops.md)
    Ops,
    /// Benchmarks printing key=value lines (docs/performance.md)
    #[command(subcommand)]
    Bench(bench::Bench),
}

/// Counts heap allocations for `om bench memory` and the activation scopes of `om train`.
#[global_allocator]
static ALLOC: onemodel::core::alloc_count::CountingAlloc = onemodel::core::alloc_count::CountingAlloc;

fn main() -> ExitCode {
    // clap prints --help and --version (exit 0) and usage errors (exit 2) itself.
    let cli = Cli::parse();
    let (name, outcome) = match &cli.command {
        Command::Train(a) => ("train", train::run(a)),
        Command::Gradcheck => ("gradcheck", run_gradcheck()),
        Command::Ops => {
            let md = registry::markdown();
            outln!("{}", md.strip_suffix('\n').unwrap_or(&md));
            ("ops", Ok(()))
        }
        Command::Bench(b) => (b.name(), bench::run(b)),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(msg)) => {
            eprintln!("error: {msg}\n\nFor more information, try 'om {name} --help'.");
            ExitCode::from(2)
        }
        Err(Failure::Run(msg)) => {
            eprintln!("om {name}: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// Ends the program after a failed write to standard output (see [`outln!`]).
pub(crate) fn stdout_failed(e: std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(141);
    }
    // Writing the message may fail too (stderr closed as well): nothing more to do then.
    let _ = writeln!(std::io::stderr(), "om: cannot write the output: {e}");
    std::process::exit(1)
}

fn run_gradcheck() -> Outcome {
    let entries = onemodel::ops::registered_ops().map_err(|dups| Failure::Run(format!("operators registered more than once: {dups:?}")))?;
    outln!("{:<20} {:>5} {:>12} {:>12}  status", "op", "cases", "worst abs", "worst rel");
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
        outln!("{:<20} {:>5} {:>12.3e} {:>12.3e}  {status}", e.name, cases.len(), abs, rel);
    }
    let missing = registry::missing_spec_names();
    let missing = if missing.is_empty() { "none".to_string() } else { missing.join(" ") };
    outln!("gradcheck: {} ops, {n_cases} cases, {n_failed} failed, spec rows missing: {missing}", entries.len());
    if n_failed == 0 {
        Ok(())
    } else {
        Err(Failure::Run(format!("{n_failed} of {n_cases} cases failed")))
    }
}
