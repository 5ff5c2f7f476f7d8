//! `om`: the command-line face of OneModel (clap; `om <command> --help` lists every option
//! with its default and allowed values).
//!
//! - `om train` — trains a model on built-in or generated data (`--task digits|ocr|add`; [`train`]).
//! - `om gradcheck` — runs every registered gradient-check case in fast and exact mode
//!   (`--mode`), one row per operator and mode, then the tolerance overrides with their
//!   reasons.
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
use onemodel::Mode;
use std::process::ExitCode;

mod args;
mod bench;
mod plot;
mod train;

const EXIT_CODES: &str = "Exit codes: 0 success, 1 runtime failure (a failed gradient check, an error while training or \
benchmarking), 2 usage error (unknown command or option, invalid value, unwritable output path; nothing has run).

Environment: ONEMODEL_MAX_TENSOR_BYTES=<bytes> sets the largest buffer the pool hands out (default: the machine's \
memory); a larger tensor is an out-of-memory error.";

/// The environment variable `om` maps to `pool::set_max_buffer_bytes` (the library itself
/// reads no environment: its settings are explicit).
const MAX_TENSOR_BYTES_VAR: &str = "ONEMODEL_MAX_TENSOR_BYTES";

/// Applies `ONEMODEL_MAX_TENSOR_BYTES` if it is set: a positive number of bytes, else a
/// usage error.
fn apply_environment() -> Outcome {
    let Some(value) = std::env::var_os(MAX_TENSOR_BYTES_VAR) else { return Ok(()) };
    match value.to_str().and_then(|v| v.trim().parse::<usize>().ok()).filter(|&n| n > 0) {
        Some(bytes) => {
            onemodel::core::pool::set_max_buffer_bytes(bytes);
            Ok(())
        }
        None => Err(Failure::Usage(format!("{MAX_TENSOR_BYTES_VAR} must be a positive number of bytes, got {value:?}"))),
    }
}

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
    /// Run every registered gradient-check case, one row per operator and mode
    Gradcheck(GradcheckArgs),
    /// Print the operator registry as Markdown (docs/ops.md)
    Ops,
    /// Benchmarks printing key=value lines (docs/performance.md)
    #[command(subcommand)]
    Bench(bench::Bench),
}

/// The options of `om gradcheck`.
#[derive(clap::Args, Debug)]
struct GradcheckArgs {
    /// Compute modes to check in (exact mode runs at 1 thread and compares its bits with 2 threads')
    #[arg(long, value_enum, default_value_t = args::ModesArg::Both)]
    mode: args::ModesArg,
}

/// Counts heap allocations for `om bench memory` and the activation scopes of `om train`.
#[global_allocator]
static ALLOC: onemodel::core::alloc_count::CountingAlloc = onemodel::core::alloc_count::CountingAlloc;

fn main() -> ExitCode {
    // clap prints --help and --version (exit 0) and usage errors (exit 2) itself.
    let cli = Cli::parse();
    let (name, outcome) = match apply_environment() {
        Err(e) => (cli.command.name(), Err(e)),
        Ok(()) => (cli.command.name(), run(&cli.command)),
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

impl Command {
    /// The command's name in messages (`om <name>: ...`).
    fn name(&self) -> &'static str {
        match self {
            Command::Train(_) => "train",
            Command::Gradcheck(_) => "gradcheck",
            Command::Ops => "ops",
            Command::Bench(b) => b.name(),
        }
    }
}

/// Runs a command.
fn run(command: &Command) -> Outcome {
    match command {
        Command::Train(a) => train::run(a),
        Command::Gradcheck(a) => run_gradcheck(a.mode.modes()),
        Command::Ops => {
            let md = registry::markdown();
            outln!("{}", md.strip_suffix('\n').unwrap_or(&md));
            Ok(())
        }
        Command::Bench(b) => bench::run(b),
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

/// `om gradcheck`: every registered operator through `gradcheck::check_entry` in `modes`.
fn run_gradcheck(modes: &[Mode]) -> Outcome {
    let entries = onemodel::ops::registered_ops().map_err(|dups| Failure::Run(format!("operators registered more than once: {dups:?}")))?;
    outln!("{:<32} {:<5} {:>5} {:>10} {:>12} {:>6}  status", "op", "mode", "cases", "worst abs", "worst scaled", "ratio");
    let (mut n_cases, mut failed, mut notes, mut details) = (0usize, Vec::new(), Vec::new(), Vec::new());
    for e in &entries {
        let check = gradcheck::check_entry(e, modes);
        n_cases += check.cases;
        for m in &check.modes {
            let mut names: Vec<&str> = check.failures.iter().filter(|f| f.mode == m.mode).map(|f| f.case.as_str()).collect();
            names.dedup();
            let status = if check.cases == 0 {
                "FAILED: no cases".to_string()
            } else if names.is_empty() {
                "ok".to_string()
            } else {
                format!("FAILED: {}", names.join(", "))
            };
            outln!(
                "{:<32} {:<5} {:>5} {:>10.3e} {:>12.3e} {:>6.3}  {status}",
                e.name,
                m.mode.name(),
                check.cases,
                m.worst_abs,
                m.worst_scaled,
                m.worst_ratio
            );
        }
        let mut cases: Vec<&str> = check.failures.iter().map(|f| f.case.as_str()).collect();
        cases.sort_unstable();
        cases.dedup();
        failed.extend(cases.iter().map(|c| format!("{}::{c}", e.name)));
        if check.cases == 0 {
            failed.push(format!("{} (no cases)", e.name));
        }
        notes.extend(check.notes.iter().map(|(c, n)| format!("  {}::{c}: {n}", e.name)));
        details.extend(check.failures.iter().map(|f| format!("  {}: {f}", e.name)));
    }
    outln!(
        "worst scaled = worst |analytic - numeric| / the input's largest |numeric|; ratio = worst error / allowed error (passes at most 1)"
    );
    if notes.is_empty() {
        outln!("tolerance overrides: none");
    } else {
        outln!("tolerance overrides:\n{}", notes.join("\n"));
    }
    if !details.is_empty() {
        outln!("failures:\n{}", details.join("\n"));
    }
    let missing = registry::missing_spec_names();
    let missing = if missing.is_empty() { "none".to_string() } else { missing.join(" ") };
    let names: Vec<&str> = modes.iter().map(|m| m.name()).collect();
    outln!(
        "gradcheck ({}): {} ops, {n_cases} cases, {} failed, spec rows missing: {missing}",
        names.join(", "),
        entries.len(),
        failed.len()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::Run(format!("{} of {n_cases} cases failed: {}", failed.len(), failed.join(", "))))
    }
}
