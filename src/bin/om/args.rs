//! The option values every command shares: arithmetic mode, SIMD path and thread count as
//! clap value types, the kernel settings of the benchmarks, and how a command fails
//! ([`Failure`]: a usage error exits with 2, a runtime failure with 1).

use clap::{builder::RangedU64ValueParser, Args, ValueEnum};
use onemodel::compute::{Settings, MAX_THREADS};
use onemodel::{Compute, KernelPath, Mode};
use std::path::{Path, PathBuf};

/// Why a command stopped.
#[derive(Debug)]
pub enum Failure {
    /// The options cannot work (checked before any work starts): exit code 2.
    Usage(String),
    /// The work itself failed: exit code 1.
    Run(String),
}

impl From<onemodel::Error> for Failure {
    fn from(e: onemodel::Error) -> Failure {
        Failure::Run(e.to_string())
    }
}

/// `Result` of a command.
pub type Outcome<T = ()> = std::result::Result<T, Failure>;

/// The arithmetic mode (`onemodel::Mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// The fastest summation order of each kernel.
    Fast,
    /// Bit-identical results on every SIMD path and thread count.
    Exact,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Fast => Mode::Fast,
            ModeArg::Exact => Mode::Exact,
        }
    }
}

/// The compute modes `om gradcheck` checks in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModesArg {
    /// Fast mode only.
    Fast,
    /// Exact mode only (at 1 thread, its bits compared with 2 threads').
    Exact,
    /// Fast mode, then exact mode.
    Both,
}

impl ModesArg {
    /// The modes, in the order they run.
    pub fn modes(self) -> &'static [Mode] {
        match self {
            ModesArg::Fast => &[Mode::Fast],
            ModesArg::Exact => &[Mode::Exact],
            ModesArg::Both => &[Mode::Fast, Mode::Exact],
        }
    }
}

/// A SIMD path of the kernels (`onemodel::KernelPath`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PathArg {
    /// Plain scalar code.
    Scalar,
    /// 128-bit SSE.
    Sse,
    /// 256-bit AVX2 with FMA.
    Avx2,
    /// 512-bit AVX-512.
    Avx512,
    /// 128-bit NEON (aarch64).
    Neon,
}

impl From<PathArg> for KernelPath {
    fn from(p: PathArg) -> KernelPath {
        match p {
            PathArg::Scalar => KernelPath::Scalar,
            PathArg::Sse => KernelPath::Sse,
            PathArg::Avx2 => KernelPath::Avx2,
            PathArg::Avx512 => KernelPath::Avx512,
            PathArg::Neon => KernelPath::Neon,
        }
    }
}

/// A thread count between 1 and [`MAX_THREADS`].
pub fn threads_parser() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..=MAX_THREADS as u64)
}

/// A whole number of at least 1 (a count of epochs, steps, repetitions, ...).
pub fn parse_count(v: &str) -> Result<usize, String> {
    at_least(v, 1)
}

/// A whole number of at least `min`.
pub fn at_least(v: &str, min: usize) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(format!("expected a whole number of at least {min}")),
    }
}

/// The kernel settings every benchmark takes.
#[derive(Args, Debug)]
pub struct KernelArgs {
    /// Kernel threads, 1 to 256
    #[arg(long, default_value_t = 1, value_parser = threads_parser())]
    pub threads: usize,
    /// Arithmetic mode
    #[arg(long, value_enum, default_value_t = ModeArg::Fast)]
    pub mode: ModeArg,
    /// SIMD path [default: the widest this CPU runs]
    #[arg(long, value_enum)]
    pub path: Option<PathArg>,
}

impl KernelArgs {
    /// The settings, with a path this CPU cannot run as a usage error.
    pub fn settings(&self) -> Outcome<Settings> {
        let path = match self.path {
            None => KernelPath::best(),
            Some(p) => {
                let p = KernelPath::from(p);
                if !p.is_supported() {
                    let supported: Vec<&str> = KernelPath::ALL.iter().filter(|p| p.is_supported()).map(|p| p.name()).collect();
                    return Err(Failure::Usage(format!("--path {p} is not supported by this CPU (it runs: {})", supported.join(", "))));
                }
                p
            }
        };
        Ok(Settings { mode: self.mode.into(), threads: self.threads, path })
    }

    /// [`KernelArgs::settings`], applied to this thread's [`Compute`] settings (for
    /// benchmarks that go through the operators).
    pub fn apply(&self) -> Outcome<Settings> {
        let s = self.settings()?;
        Compute::set_threads(s.threads)?;
        Compute::set_mode(s.mode);
        Compute::set_path(Some(s.path))?;
        Ok(s)
    }
}

/// Checks that `path` can be written (creating its directory), without leaving a file
/// behind that was not there: a usage error naming the path otherwise. The directories it
/// creates are appended to `created` (deepest first), so a caller that finds a usage error
/// later can remove them ([`remove_created`]) and leave nothing behind.
pub fn check_writable(path: &Path, option: &str, created: &mut Vec<PathBuf>) -> Outcome<PathBuf> {
    let unusable = |why: String| Failure::Usage(format!("{option} {}: {why}", path.display()));
    if path.is_dir() {
        return Err(unusable("is a directory".into()));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let missing: Vec<PathBuf> =
            dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !d.exists()).map(Path::to_path_buf).collect();
        let made = std::fs::create_dir_all(dir);
        created.extend(missing.into_iter().filter(|d| d.is_dir()));
        made.map_err(|e| unusable(format!("cannot create its directory: {e}")))?;
    }
    let existed = path.exists();
    std::fs::OpenOptions::new().append(true).create(true).open(path).map_err(|e| unusable(format!("cannot be written: {e}")))?;
    if !existed {
        std::fs::remove_file(path).map_err(|e| unusable(format!("cannot be written: {e}")))?;
    }
    std::path::absolute(path).map_err(|e| unusable(e.to_string()))
}

/// Removes the (still empty) directories [`check_writable`] created, deepest first.
pub fn remove_created(created: &[PathBuf]) {
    for d in created {
        let _ = std::fs::remove_dir(d);
    }
}
