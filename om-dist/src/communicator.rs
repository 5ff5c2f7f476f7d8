//! The [`Communicator`] trait (what data-parallel training asks of a process group), the
//! [`Layout`] of a run's shards over its ranks, the one deterministic shard-order sum every
//! implementation uses ([`weighted_sum`]), and the single-process implementation
//! ([`Single`]).
//!
//! The sum is what makes the result independent of the number of processes: shard `s`'s
//! contribution `g_s` is weighted by `w_s` and `Σ_s w_s·g_s` is accumulated in `f64` in
//! shard order `0, 1, …, S−1` and rounded to `f32` once, whichever rank holds which shard.

use om_core::{Error, Result};
use std::ops::Range;
use std::time::Duration;

/// How long a collective waits for the other ranks unless configured otherwise
/// ([`crate::ThreadGroup::with_timeout`], `MpiWorld::set_timeout`): 5 minutes. A rank that
/// fails tells the others at once ([`Communicator::fail`]); the timeout bounds the wait for
/// a rank that neither arrives nor fails (stuck, or on another code path).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// What data-parallel training needs from a group of processes (ranks `0..size`).
///
/// Every rank calls every collective in the same order with arguments of the same
/// lengths. Collectives are fallible and never hang: when that is not so, when a rank
/// failed ([`Communicator::fail`]), is gone, or does not arrive within the timeout
/// ([`DEFAULT_TIMEOUT`] unless configured), **every** rank's current collective returns an
/// `Err` naming the failing rank and the reason (or, on MPI when no message can reach the
/// others, the job is aborted with the message).
pub trait Communicator {
    /// This process's index, `0..size()`.
    fn rank(&self) -> usize;
    /// The number of processes.
    fn size(&self) -> usize;
    /// Returns once every rank has called it.
    fn barrier(&self) -> Result<()>;
    /// Overwrites `buf` on every rank with rank `root`'s `buf`.
    fn broadcast(&self, buf: &mut [f32], root: usize) -> Result<()>;
    /// The deterministic sum over all shards of the run, identical on every rank.
    ///
    /// `local` holds this rank's shards ([`Layout::owned`]) back to back, each
    /// `out.len()` long; `weights` has one weight per shard of the run (the same on every
    /// rank). Writes `out[i] = Σ_s weights[s]·g_s[i]` as [`weighted_sum`] computes it.
    fn sum_shards(&self, layout: &Layout, local: &[f32], weights: &[f64], out: &mut [f32]) -> Result<()>;
    /// Every rank's `local` values, rank by rank, on every rank (for metrics).
    fn gather(&self, local: &[f64]) -> Result<Vec<f64>>;
    /// Reports that this rank failed with `error` outside a collective (its loss returned
    /// an `Err` or panicked, its batch was too short, …): the other ranks' current or next
    /// collective returns an `Err` naming this rank and `error` instead of waiting for it.
    /// Returns the error this rank's own call should return (with several ranks, naming
    /// this rank too). After a failure the group is unusable: every later collective fails.
    ///
    /// One process has no one to tell: [`Single`] returns `error` unchanged.
    ///
    /// ```
    /// use om_dist::{Communicator, ThreadGroup};
    /// let ranks = ThreadGroup::new(2);
    /// let errors: Vec<String> = std::thread::scope(|s| {
    ///     let handles: Vec<_> = ranks
    ///         .into_iter()
    ///         .map(|c| {
    ///             s.spawn(move || match c.rank() {
    ///                 1 => c.fail(om_core::Error::argument("loss", "no data")).to_string(),
    ///                 _ => c.barrier().unwrap_err().to_string(),
    ///             })
    ///         })
    ///         .collect();
    ///     handles.into_iter().map(|h| h.join().unwrap()).collect()
    /// });
    /// assert_eq!(errors, ["barrier: rank 1 failed: loss: no data", "DataParallel: rank 1 failed: loss: no data"]);
    /// ```
    fn fail(&self, error: Error) -> Error {
        error
    }
}

/// A borrowed communicator is one (so a caller can keep its world, e.g. to abort it).
impl<C: Communicator + ?Sized> Communicator for &C {
    fn rank(&self) -> usize {
        (**self).rank()
    }

    fn size(&self) -> usize {
        (**self).size()
    }

    fn barrier(&self) -> Result<()> {
        (**self).barrier()
    }

    fn broadcast(&self, buf: &mut [f32], root: usize) -> Result<()> {
        (**self).broadcast(buf, root)
    }

    fn sum_shards(&self, layout: &Layout, local: &[f32], weights: &[f64], out: &mut [f32]) -> Result<()> {
        (**self).sum_shards(layout, local, weights, out)
    }

    fn gather(&self, local: &[f64]) -> Result<Vec<f64>> {
        (**self).gather(local)
    }

    fn fail(&self, error: Error) -> Error {
        (**self).fail(error)
    }
}

/// How `shards` shards are dealt to `ranks` ranks: in contiguous blocks, rank order
/// following shard order, the first `shards % ranks` ranks holding one more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    shards: usize,
    ranks: usize,
}

impl Layout {
    /// A layout of `shards ≥ ranks ≥ 1` (every rank holds at least one shard).
    pub fn new(shards: usize, ranks: usize) -> Result<Layout> {
        if ranks == 0 || shards < ranks {
            return Err(Error::argument(
                "data parallel",
                format!("{shards} shard(s) cannot be dealt to {ranks} process(es): the shards must be at least the processes"),
            ));
        }
        Ok(Layout { shards, ranks })
    }

    /// The shards of the run.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// The ranks of the run.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// The shards rank `rank` holds.
    ///
    /// ```
    /// let l = om_dist::Layout::new(5, 2)?;
    /// assert_eq!((l.owned(0), l.owned(1)), (0..3, 3..5));
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn owned(&self, rank: usize) -> Range<usize> {
        split(self.shards, self.ranks, rank)
    }
}

/// Part `part` of `0..len` cut into `parts` contiguous pieces whose lengths differ by at
/// most one (the longer ones first): how a batch is cut into shards, shards into ranks'
/// blocks and a buffer into owners' slices.
///
/// ```
/// assert_eq!((0..3).map(|p| om_dist::split(8, 3, p)).collect::<Vec<_>>(), [0..3, 3..6, 6..8]);
/// ```
pub fn split(len: usize, parts: usize, part: usize) -> Range<usize> {
    let (base, extra) = (len / parts, len % parts);
    let start = part * base + part.min(extra);
    start..start + base + usize::from(part < extra)
}

/// `out[i] = Σ_s weights[s]·shard(s)[i]` for `i` in `range` (`out` is indexed from
/// `range.start`): `f64` products accumulated in shard order starting from shard 0's
/// term, rounded to `f32` once. With one shard of weight 1 it returns the shard's values
/// bit for bit (signed zeros included).
pub fn weighted_sum<'a>(shard: impl Fn(usize) -> &'a [f32], weights: &[f64], range: Range<usize>, out: &mut [f32]) {
    for (o, i) in out.iter_mut().zip(range) {
        let mut acc = weights[0] * shard(0)[i] as f64;
        for (s, &w) in weights.iter().enumerate().skip(1) {
            acc += w * shard(s)[i] as f64;
        }
        *o = acc as f32;
    }
}

/// Checks the arguments of [`Communicator::sum_shards`] on rank `rank`.
pub(crate) fn check_sum(layout: &Layout, rank: usize, local: &[f32], weights: &[f64], out: &[f32]) -> Result<()> {
    let held = layout.owned(rank).len();
    if weights.len() != layout.shards() || local.len() != held * out.len() {
        return Err(Error::argument(
            "sum_shards",
            format!(
                "rank {rank} holds {held} of {} shard(s) of {} value(s): expected {} weight(s) and {} local value(s), got {} and {}",
                layout.shards(),
                out.len(),
                layout.shards(),
                held * out.len(),
                weights.len(),
                local.len()
            ),
        ));
    }
    Ok(())
}

/// FNV-1a of the shard weights' bits: equal on two ranks when they cut batches of the
/// same length (the ranks compare it before summing).
pub(crate) fn weights_tag(weights: &[f64]) -> u64 {
    weights.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, w| (h ^ w.to_bits()).wrapping_mul(0x0100_0000_01b3))
}

/// One process holding every shard: the sums are gradient accumulation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Single;

impl Communicator for Single {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn barrier(&self) -> Result<()> {
        Ok(())
    }

    fn broadcast(&self, _buf: &mut [f32], root: usize) -> Result<()> {
        if root != 0 {
            return Err(Error::argument("broadcast", format!("root {root} is not a rank of a single process")));
        }
        Ok(())
    }

    fn sum_shards(&self, layout: &Layout, local: &[f32], weights: &[f64], out: &mut [f32]) -> Result<()> {
        check_sum(layout, 0, local, weights, out)?;
        let n = out.len();
        weighted_sum(|s| &local[s * n..(s + 1) * n], weights, 0..n, out);
        Ok(())
    }

    fn gather(&self, local: &[f64]) -> Result<Vec<f64>> {
        Ok(local.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_covers_everything_in_order() {
        for len in 0..20 {
            for parts in 1..7 {
                let pieces: Vec<_> = (0..parts).map(|p| split(len, parts, p)).collect();
                assert_eq!(pieces[0].start, 0);
                assert_eq!(pieces[parts - 1].end, len);
                assert!(pieces.windows(2).all(|w| w[0].end == w[1].start && w[0].len() >= w[1].len()));
            }
        }
    }

    #[test]
    fn one_shard_of_weight_one_is_the_identity() {
        let g = [1.5f32, -0.0, 3e-39, f32::MAX];
        let mut out = [0.0f32; 4];
        Single.sum_shards(&Layout::new(1, 1).unwrap(), &g, &[1.0], &mut out).unwrap();
        assert_eq!(out.map(f32::to_bits), g.map(f32::to_bits));
    }

    #[test]
    fn wrong_lengths_are_errors() {
        let l = Layout::new(2, 1).unwrap();
        let e = Single.sum_shards(&l, &[1.0; 3], &[0.5, 0.5], &mut [0.0; 2]).unwrap_err();
        assert!(e.to_string().contains("expected 2 weight(s) and 4 local value(s), got 2 and 3"), "{e}");
        assert!(Layout::new(2, 3).is_err());
    }
}
