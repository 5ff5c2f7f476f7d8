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
//!
//! A generator's whole state is an [`RngState`] ([`Rng::state`], [`Rng::from_state`]; for
//! the calling thread's default stream [`get_rng_state`] and [`set_rng_state`], PyTorch's
//! `torch.get_rng_state`/`set_rng_state`): a run that saves it and later restores it draws
//! the same values as one that never stopped (`om train --checkpoint`/`--resume`).

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

/// The complete state of an [`Rng`] as 13 bytes: the SplitMix64 counter (8 bytes, little
/// endian), then a flag byte (1 when a Box-Muller normal is waiting) and the waiting normal's
/// `f32` bits (4 bytes, little endian; zero without one). [`RngState::from_bytes`] checks
/// every byte, so a state read back from a file is either the one written or an error.
///
/// # Examples
///
/// ```
/// use om_core::rng::{Rng, RngState};
/// let mut a = Rng::new(3);
/// a.normal(); // leaves the second normal of the pair waiting
/// let saved = a.state().to_bytes();
/// let mut b = Rng::from_state(RngState::from_bytes(&saved)?);
/// assert_eq!((a.normal(), a.next_u64()), (b.normal(), b.next_u64()));
/// assert!(RngState::from_bytes(&saved[..12]).is_err());
/// # Ok::<(), om_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RngState([u8; RngState::LEN]);

impl RngState {
    /// The length of [`RngState::to_bytes`].
    pub const LEN: usize = 13;

    /// The state's bytes (see the type's doc).
    pub fn to_bytes(&self) -> [u8; RngState::LEN] {
        self.0
    }

    /// The state written by [`RngState::to_bytes`]. An `Error` (naming
    /// `RngState::from_bytes`) for a length other than [`RngState::LEN`], a flag byte other
    /// than 0 or 1, spare bytes without the flag, or a waiting normal that is not finite.
    pub fn from_bytes(bytes: &[u8]) -> crate::Result<RngState> {
        const OP: &str = "RngState::from_bytes";
        let b: [u8; RngState::LEN] = bytes
            .try_into()
            .map_err(|_| crate::Error::argument(OP, format!("a generator state is {} bytes, not {}", RngState::LEN, bytes.len())))?;
        let spare = f32::from_le_bytes([b[9], b[10], b[11], b[12]]);
        match b[8] {
            0 if spare.to_bits() == 0 => Ok(RngState(b)),
            0 => Err(crate::Error::argument(OP, "spare normal bytes without the flag that one is waiting")),
            1 if spare.is_finite() => Ok(RngState(b)),
            1 => Err(crate::Error::argument(OP, format!("the waiting normal {spare} is not finite"))),
            f => Err(crate::Error::argument(OP, format!("flag byte {f}: expected 0 or 1"))),
        }
    }
}

impl Rng {
    /// The generator's whole state: [`Rng::from_state`] of it continues this generator's
    /// sequence exactly.
    pub fn state(&self) -> RngState {
        let mut b = [0u8; RngState::LEN];
        b[..8].copy_from_slice(&self.state.to_le_bytes());
        if let Some(s) = self.spare {
            b[8] = 1;
            b[9..].copy_from_slice(&s.to_le_bytes());
        }
        RngState(b)
    }

    /// A generator continuing from `state` (see [`Rng::state`]).
    pub fn from_state(state: RngState) -> Rng {
        let b = state.0;
        let counter = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        let spare = (b[8] == 1).then(|| f32::from_le_bytes([b[9], b[10], b[11], b[12]]));
        Rng { state: counter, spare }
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

/// The state of the calling thread's default stream (PyTorch's `torch.get_rng_state`).
///
/// # Examples
///
/// ```
/// use om_core::rng::{get_rng_state, next_seed, set_rng_state};
/// let saved = get_rng_state();
/// let a = next_seed();
/// set_rng_state(saved);
/// assert_eq!(next_seed(), a);
/// ```
pub fn get_rng_state() -> RngState {
    STREAM.with(|s| s.borrow_mut().get_or_insert_with(|| Rng::new(initial_seed())).state())
}

/// Makes the calling thread's default stream continue from `state` (PyTorch's
/// `torch.set_rng_state`; see [`get_rng_state`]).
pub fn set_rng_state(state: RngState) {
    STREAM.with(|s| *s.borrow_mut() = Some(Rng::from_state(state)));
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
    fn a_restored_state_continues_the_sequence() {
        let mut a = Rng::new(9);
        for _ in 0..3 {
            a.normal();
        }
        assert!(a.spare.is_some());
        let mut b = Rng::from_state(RngState::from_bytes(&a.state().to_bytes()).unwrap());
        for _ in 0..5 {
            assert_eq!(a.normal().to_bits(), b.normal().to_bits());
            assert_eq!(a.below(17), b.below(17));
        }
        let mut bad = a.state().to_bytes();
        bad[8] = 2;
        assert!(RngState::from_bytes(&bad).is_err());
        bad[8] = 0;
        bad[9] = 1;
        assert!(RngState::from_bytes(&bad).is_err());
        bad[8] = 1;
        bad[9..].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(RngState::from_bytes(&bad).is_err());
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
