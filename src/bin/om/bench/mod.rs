//! `om bench`: benchmarks printing one `key=value` line per measurement, for same-run
//! comparison with PyTorch by the scripts in `tools/` (see `docs/performance.md`).
//!
//! - `om bench gemm` ([`gemm`]): one GEMM shape, GFLOP/s (`tools/compare.sh`).
//! - `om bench step` ([`step`]): the training steps of `shared/BENCHMARKS.md`
//!   (`tools/compare_steps.sh`).
//! - `om bench conv` ([`conv`]): the convnet benchmark's convolutions, per kernel.
//! - `om bench norm-pool` ([`norm_pool`]): pooling and normalisation on the benchmark shapes.
//! - `om bench lstm|attention` ([`layers`]): crnn_ctc's LSTM stack and the encoder's
//!   attention (`tools/bench_layers_torch.py`).
//! - `om bench memory` ([`memory`]): pool, heap and RSS figures of a warm benchmark step
//!   inside an activation scope (`docs/memory.md`).
//!
//! Every benchmark reads its options through [`Flags`] (`--threads`, `--mode`, `--path` and
//! `--reps` mean the same everywhere) and times through [`time_ms`].

use onemodel::compute::{Settings, MAX_THREADS};
use onemodel::{Compute, Error, KernelPath, Mode, Result};
use std::time::Instant;

mod conv;
mod gemm;
mod layers;
mod memory;
mod norm_pool;
mod step;

/// Runs `om bench <what> ...`.
pub fn run(args: &[String]) -> Result<()> {
    let rest = args.get(1..).unwrap_or(&[]);
    match args.first().map(String::as_str) {
        Some("gemm") => gemm::run(rest),
        Some("step") => step::run(rest),
        Some("conv") => conv::run(rest),
        Some("norm-pool") => norm_pool::run(rest),
        Some(what @ ("lstm" | "attention")) => layers::run(what, rest),
        Some("memory") => memory::run(rest),
        other => Err(Error::argument(
            "bench",
            format!("unknown benchmark {other:?}; available: gemm, step, conv, norm-pool, lstm, attention, memory"),
        )),
    }
}

/// A benchmark's command-line options: `--name value` pairs and bare `--switch`es, each
/// checked against the names the benchmark accepts.
pub struct Flags<'a> {
    values: Vec<(&'a str, &'a str)>,
    switches: Vec<&'a str>,
}

impl<'a> Flags<'a> {
    /// Parses `args`; `options` take a value, `switches` do not. An unknown name or a
    /// missing value is an error.
    pub fn parse(args: &'a [String], options: &[&str], switches: &[&str]) -> Result<Flags<'a>> {
        let (mut values, mut on) = (Vec::new(), Vec::new());
        let mut it = args.iter().map(String::as_str);
        while let Some(flag) = it.next() {
            if switches.contains(&flag) {
                on.push(flag);
            } else if options.contains(&flag) {
                let v = it.next().ok_or_else(|| Error::argument("bench", format!("{flag} needs a value")))?;
                values.push((flag, v));
            } else {
                let known = [options, switches].concat().join(" ");
                return Err(Error::argument("bench", format!("unknown option `{flag}` (this benchmark takes: {known})")));
            }
        }
        Ok(Flags { values, switches: on })
    }

    /// The last value given for `flag`.
    pub fn get(&self, flag: &str) -> Option<&'a str> {
        self.values.iter().rev().find(|(f, _)| *f == flag).map(|&(_, v)| v)
    }

    /// Whether the switch `flag` was given.
    pub fn switch(&self, flag: &str) -> bool {
        self.switches.contains(&flag)
    }

    /// `flag` as a whole number, or `default` when absent.
    pub fn usize_or(&self, flag: &str, default: usize) -> Result<usize> {
        self.get(flag).map_or(Ok(default), |v| v.parse().map_err(|_| bad(flag, v)))
    }

    /// `--threads` (default 1), `--mode` (default fast) and `--path` (default the best the
    /// CPU runs), checked.
    pub fn settings(&self) -> Result<Settings> {
        let threads = self.usize_or("--threads", 1)?;
        if threads == 0 || threads > MAX_THREADS {
            return Err(Error::argument("bench", format!("--threads must be between 1 and {MAX_THREADS}, got {threads}")));
        }
        let mode = self.get("--mode").map_or(Ok(Mode::Fast), |v| Mode::parse(v).ok_or_else(|| bad("--mode", v)))?;
        let path = match self.get("--path") {
            None => KernelPath::best(),
            Some(v) => {
                let p = KernelPath::parse(v).ok_or_else(|| bad("--path", v))?;
                if !p.is_supported() {
                    return Err(Error::argument("bench", format!("path {v} is not supported by this CPU")));
                }
                p
            }
        };
        Ok(Settings { mode, threads, path })
    }

    /// [`Flags::settings`], applied to this thread's [`Compute`] settings (for benchmarks
    /// that go through the operators).
    pub fn apply_settings(&self) -> Result<Settings> {
        let s = self.settings()?;
        Compute::set_threads(s.threads)?;
        Compute::set_mode(s.mode);
        Compute::set_path(Some(s.path))?;
        Ok(s)
    }
}

fn bad(flag: &str, v: &str) -> Error {
    Error::argument("bench", format!("invalid value `{v}` for {flag}"))
}

/// Wall times of repeated runs, in milliseconds, sorted.
pub struct Times(Vec<f64>);

impl Times {
    /// The median run.
    pub fn median(&self) -> f64 {
        self.0[self.0.len() / 2]
    }

    /// The fastest run (on a busy machine, the one the scheduler interrupted least).
    pub fn min(&self) -> f64 {
        self.0[0]
    }
}

/// Runs `f` `warmup` times untimed, then `reps` (at least 1) times timed, each timed run
/// made of `inner` calls (its time is divided by `inner`).
pub fn time_ms(warmup: usize, reps: usize, inner: usize, mut f: impl FnMut() -> Result<()>) -> Result<Times> {
    for _ in 0..warmup {
        f()?;
    }
    let inner = inner.max(1);
    let mut ms = (0..reps.max(1))
        .map(|_| {
            let start = Instant::now();
            for _ in 0..inner {
                f()?;
            }
            Ok(start.elapsed().as_secs_f64() * 1e3 / inner as f64)
        })
        .collect::<Result<Vec<f64>>>()?;
    ms.sort_by(f64::total_cmp);
    Ok(Times(ms))
}

/// How many calls of `f` fill about 20 ms (at least 1, at most `cap`), from one timed call.
pub fn calls_per_20ms(cap: usize, mut f: impl FnMut() -> Result<()>) -> Result<usize> {
    let start = Instant::now();
    f()?;
    let once = start.elapsed().as_secs_f64().max(1e-7);
    Ok(((0.02 / once) as usize).clamp(1, cap))
}
