//! Arithmetic settings shared by every kernel: the [`Mode`] (fast or exact),
//! the thread count and the [`KernelPath`] (which instruction set the kernels use).
//!
//! Settings are per calling thread (so tests running side by side cannot disturb each
//! other) and start from the process defaults: `Mode::Fast`, one thread, and
//! `KernelPath::best()`. Kernels never read the settings themselves: the operator layer
//! reads them once and passes them down, so a kernel's result depends only on its
//! arguments. Work is split into chunks that depend only on the kernel and the shape,
//! never on the thread count; threads only decide who computes which chunk.

use std::cell::Cell;
use std::sync::OnceLock;

/// Which flavour of arithmetic the kernels use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Fused multiply-add in products, fastest available elementary functions.
    #[default]
    Fast,
    /// Separate multiply and add in a canonical order, fixed polynomials: every value is
    /// bit-identical on every [`KernelPath`] and at every thread count.
    Exact,
}

impl Mode {
    /// `"fast"` or `"exact"`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Fast => "fast",
            Mode::Exact => "exact",
        }
    }

    /// Parses `"fast"` or `"exact"`.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "fast" => Some(Mode::Fast),
            "exact" => Some(Mode::Exact),
            _ => None,
        }
    }
}

/// The instruction set a kernel runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelPath {
    /// Plain scalar Rust; the reference every other path must match bit for bit in exact mode.
    Scalar,
    /// 128-bit SSE (x86-64 baseline).
    Sse,
    /// 256-bit AVX2 with FMA.
    Avx2,
    /// 512-bit AVX-512 (F, VL, DQ, BW).
    Avx512,
    /// 128-bit NEON (aarch64).
    Neon,
}

impl KernelPath {
    /// Every path, in increasing width.
    pub const ALL: [KernelPath; 5] = [KernelPath::Scalar, KernelPath::Sse, KernelPath::Avx2, KernelPath::Avx512, KernelPath::Neon];

    /// Lower-case name: `scalar`, `sse`, `avx2`, `avx512`, `neon`.
    pub fn name(self) -> &'static str {
        match self {
            KernelPath::Scalar => "scalar",
            KernelPath::Sse => "sse",
            KernelPath::Avx2 => "avx2",
            KernelPath::Avx512 => "avx512",
            KernelPath::Neon => "neon",
        }
    }

    /// Parses a name printed by [`KernelPath::name`].
    pub fn parse(s: &str) -> Option<KernelPath> {
        KernelPath::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Whether this CPU can run the path (run-time detection, made where the kernels'
    /// capability tokens are made, so a path is supported exactly when its kernels can run).
    ///
    /// # Examples
    /// ```
    /// use om_core::compute::KernelPath;
    /// assert!(KernelPath::Scalar.is_supported());
    /// assert!(KernelPath::best().is_supported());
    /// ```
    pub fn is_supported(self) -> bool {
        crate::kernels::simd::path_supported(self)
    }

    /// Every path this CPU supports, scalar first.
    pub fn supported() -> Vec<KernelPath> {
        KernelPath::ALL.into_iter().filter(|p| p.is_supported()).collect()
    }

    /// The widest supported path.
    pub fn best() -> KernelPath {
        static BEST: OnceLock<KernelPath> = OnceLock::new();
        *BEST.get_or_init(|| *KernelPath::supported().last().unwrap_or(&KernelPath::Scalar))
    }
}

impl std::fmt::Display for KernelPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

thread_local! {
    static MODE: Cell<Mode> = const { Cell::new(Mode::Fast) };
    static THREADS: Cell<usize> = const { Cell::new(1) };
    static PATH: Cell<Option<KernelPath>> = const { Cell::new(None) };
}

/// Largest thread count accepted by [`Compute::set_threads`].
pub const MAX_THREADS: usize = 256;

/// The calling thread's arithmetic settings.
///
/// ```
/// use om_core::compute::{Compute, Mode};
/// Compute::set_mode(Mode::Exact);
/// assert_eq!(Compute::mode(), Mode::Exact);
/// Compute::set_mode(Mode::Fast);
/// ```
pub struct Compute;

impl Compute {
    /// Sets the arithmetic mode for operators called from this thread.
    pub fn set_mode(mode: Mode) {
        MODE.with(|m| m.set(mode));
    }

    /// The arithmetic mode of this thread.
    pub fn mode() -> Mode {
        MODE.with(|m| m.get())
    }

    /// Sets how many threads the kernels may use (1 to [`MAX_THREADS`]).
    pub fn set_threads(n: usize) -> crate::Result<()> {
        if n == 0 || n > MAX_THREADS {
            return Err(crate::Error::argument("set_threads", format!("thread count must be between 1 and {MAX_THREADS}, got {n}")));
        }
        THREADS.with(|t| t.set(n));
        Ok(())
    }

    /// The thread count of this thread's kernels.
    pub fn threads() -> usize {
        THREADS.with(|t| t.get())
    }

    /// Forces a kernel path (tests and benchmarks); `None` returns to [`KernelPath::best`].
    /// Fails if the CPU does not support the path.
    pub fn set_path(path: Option<KernelPath>) -> crate::Result<()> {
        if let Some(p) = path {
            if !p.is_supported() {
                return Err(crate::Error::argument("set_path", format!("kernel path {p} is not supported by this CPU")));
            }
        }
        PATH.with(|c| c.set(path));
        Ok(())
    }

    /// The kernel path of this thread.
    pub fn path() -> KernelPath {
        PATH.with(|c| c.get()).unwrap_or_else(KernelPath::best)
    }

    /// The current settings as one value, to hand to kernels.
    pub fn settings() -> Settings {
        Settings { mode: Compute::mode(), threads: Compute::threads(), path: Compute::path() }
    }

    /// Runs `f` with the given settings on this thread, restoring the previous ones after.
    pub fn with<R>(settings: Settings, f: impl FnOnce() -> R) -> R {
        let old = Compute::settings();
        let forced = PATH.with(|c| c.get());
        MODE.with(|m| m.set(settings.mode));
        THREADS.with(|t| t.set(settings.threads.clamp(1, MAX_THREADS)));
        PATH.with(|c| c.set(Some(settings.path)));
        struct Restore(Settings, Option<KernelPath>);
        impl Drop for Restore {
            fn drop(&mut self) {
                MODE.with(|m| m.set(self.0.mode));
                THREADS.with(|t| t.set(self.0.threads));
                PATH.with(|c| c.set(self.1));
            }
        }
        let _restore = Restore(old, forced);
        f()
    }
}

/// A snapshot of the arithmetic settings, passed to kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Fast or exact.
    pub mode: Mode,
    /// Threads the kernel may use.
    pub threads: usize,
    /// Instruction set.
    pub path: KernelPath,
}
