//! A small deterministic generator (SplitMix64) for reproducible test and example data,
//! and the library's default random stream: `Tensor::randn`/`Tensor::rand`, every layer
//! constructor without a seed (one [`next_seed`] per tensor or layer, so the values drawn
//! do not depend on the tensor's size), and operators that draw (dropout).
//! The integer stream and uniform values are the same on every machine; normal values go
//! through the platform's f64 `ln`, `sin` and `cos` (Box-Muller).
//!
//! The default stream is per thread, like the compute settings, so threads cannot disturb
//! each other's results: [`manual_seed`] reseeds the calling thread's stream and sets the seed
//! that threads which have not drawn yet start from (by default PyTorch's initial seed,
//! 67280421310721). An operator draws one [`next_seed`] per call on the calling thread and
//! derives every element's value from that seed and the element's position
//! (`uniform_at`), so the result does not depend on the kernel thread count.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// SplitMix64 with Box-Muller normals.
#[doc(hidden)]
pub struct Rng {
    state: u64,
    spare: Option<f32>,
}

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed ^ 0x9E37_79B9_7F4A_7C15, spare: None }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.state)
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let v = (lo as f64 + (hi as f64 - lo as f64) * self.next_f64()) as f32;
        if v >= hi {
            lo
        } else {
            v
        }
    }

    /// Uniform integer in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_f64() * n as f64) as usize % n.max(1)
    }

    /// Standard normal (Box-Muller in f64).
    pub fn normal(&mut self) -> f32 {
        if let Some(s) = self.spare.take() {
            return s;
        }
        let u1 = self.next_f64().max(f64::MIN_POSITIVE);
        let u2 = self.next_f64();
        let r = (-2.0 * u1.ln()).sqrt();
        let t = 2.0 * std::f64::consts::PI * u2;
        self.spare = Some((r * t.sin()) as f32);
        (r * t.cos()) as f32
    }
}

/// SplitMix64's output function: 64 well-mixed bits of `z`.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of threads whose stream [`manual_seed`] has not set (PyTorch's initial seed).
pub const DEFAULT_SEED: u64 = 67_280_421_310_721;

static PROCESS_SEED: AtomicU64 = AtomicU64::new(DEFAULT_SEED);

thread_local! {
    static STREAM: RefCell<Option<Rng>> = const { RefCell::new(None) };
}

/// Seeds the calling thread's default stream with `seed`, and makes `seed` the start of
/// every thread that has not drawn from its stream yet (PyTorch's `torch.manual_seed`).
pub fn manual_seed(seed: u64) {
    PROCESS_SEED.store(seed, Ordering::Relaxed);
    STREAM.with(|s| *s.borrow_mut() = Some(Rng::new(seed)));
}

/// The seed threads start from (the last [`manual_seed`], or [`DEFAULT_SEED`]).
pub fn initial_seed() -> u64 {
    PROCESS_SEED.load(Ordering::Relaxed)
}

/// The next 64 bits of the calling thread's default stream: the seed of one random operator
/// call.
pub fn next_seed() -> u64 {
    STREAM.with(|s| s.borrow_mut().get_or_insert_with(|| Rng::new(initial_seed())).next_u64())
}

/// Runs `f` with the calling thread's default stream seeded with `seed`, then puts the
/// stream back as it was (also when `f` panics): PyTorch's `with torch.random.fork_rng():
/// torch.manual_seed(seed); ...`, for this thread only. Unlike [`manual_seed`] it leaves the seed
/// of other threads ([`initial_seed`]) alone. Every call of a random operator inside `f`
/// therefore draws the same seeds each time `f` runs, e.g. to repeat a dropout mask.
///
/// # Examples
///
/// ```
/// use om_core::rng;
/// rng::manual_seed(9);
/// let (x, y) = (rng::next_seed(), rng::next_seed());
/// rng::manual_seed(9);
/// assert_eq!(rng::next_seed(), x);
/// let a = rng::fork_rng(5, || (rng::next_seed(), rng::next_seed()));
/// assert_eq!(rng::fork_rng(5, || (rng::next_seed(), rng::next_seed())), a);
/// assert_eq!(rng::next_seed(), y); // the stream goes on where it was
/// ```
pub fn fork_rng<R>(seed: u64, f: impl FnOnce() -> R) -> R {
    /// Puts the saved stream back when dropped.
    struct Restore(Option<Rng>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let saved = self.0.take();
            let _ = STREAM.try_with(|s| *s.borrow_mut() = saved);
        }
    }
    let _restore = Restore(STREAM.with(|s| s.borrow_mut().replace(Rng::new(seed))));
    f()
}

/// A uniform value in `[0, 1)` (24 random bits, exactly representable) for element `i` of a
/// call seeded with `seed`: a pure function of both, so any thread may compute any element.
#[doc(hidden)]
pub fn uniform_at(seed: u64, i: u64) -> f32 {
    let z = mix(seed ^ i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    (z >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_stream_is_per_thread_and_reseedable() {
        manual_seed(11);
        let a = (next_seed(), next_seed());
        manual_seed(11);
        assert_eq!((next_seed(), next_seed()), a);
        // A new thread starts from the last seed set.
        let b = std::thread::spawn(|| (next_seed(), next_seed())).join().unwrap();
        assert_eq!(b, a);
        assert_eq!(initial_seed(), 11);
    }

    /// `fork_rng` draws from its own seed and puts the thread's stream back, also after a
    /// panic. (Seeds 11 as the test above does, so that the process seed the two set is the
    /// same whichever runs first.)
    #[test]
    fn fork_rng_restores_the_thread_s_stream() {
        manual_seed(11);
        let (a, b, c) = (next_seed(), next_seed(), next_seed());
        manual_seed(11);
        assert_eq!(next_seed(), a);
        let mut own = Rng::new(99);
        assert_eq!(fork_rng(99, || (next_seed(), next_seed())), (own.next_u64(), own.next_u64()));
        assert_eq!(next_seed(), b);
        let unwound = std::panic::catch_unwind(|| {
            fork_rng(5, || {
                next_seed();
                panic!("inside fork_rng")
            })
        });
        assert!(unwound.is_err());
        assert_eq!(next_seed(), c);
        assert_eq!(initial_seed(), 11);
    }

    #[test]
    fn uniform_at_is_uniform_on_24_bits() {
        let n = 1 << 16;
        let mean = (0..n).map(|i| uniform_at(5, i) as f64).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        assert!((0..n).all(|i| (0.0..1.0).contains(&uniform_at(5, i))));
        assert_ne!(uniform_at(5, 0), uniform_at(6, 0));
    }
}
