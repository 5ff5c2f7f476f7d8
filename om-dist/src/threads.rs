//! [`ThreadGroup`]: ranks that are threads of one process, sharing memory. It runs the
//! same collectives as a cluster (same [`weighted_sum`] arithmetic, same layout), so a test
//! can train "N ranks" in one process and compare with one rank or with MPI.

use crate::communicator::{check_sum, weighted_sum, Communicator, Layout};
use om_core::{Error, Result};
use std::sync::{Arc, Barrier, RwLock};

/// What the ranks of a group share: a barrier and one posting slot per rank.
struct Shared {
    barrier: Barrier,
    f32_slots: Vec<RwLock<Vec<f32>>>,
    f64_slots: Vec<RwLock<Vec<f64>>>,
}

/// One rank of a group of threads; [`ThreadGroup::new`] makes the whole group, one
/// communicator per thread (move each into its thread).
///
/// ```
/// use om_dist::{Communicator, ThreadGroup};
/// let ranks = ThreadGroup::new(2);
/// let sizes: Vec<Vec<f64>> = std::thread::scope(|s| {
///     let handles: Vec<_> = ranks.into_iter().map(|c| s.spawn(move || c.gather(&[c.rank() as f64]).unwrap())).collect();
///     handles.into_iter().map(|h| h.join().unwrap()).collect()
/// });
/// assert_eq!(sizes, [[0.0, 1.0], [0.0, 1.0]]);
/// ```
pub struct ThreadGroup {
    rank: usize,
    shared: Arc<Shared>,
}

impl ThreadGroup {
    /// A group of `size ≥ 1` ranks.
    pub fn new(size: usize) -> Vec<ThreadGroup> {
        let size = size.max(1);
        let shared = Arc::new(Shared {
            barrier: Barrier::new(size),
            f32_slots: (0..size).map(|_| RwLock::new(Vec::new())).collect(),
            f64_slots: (0..size).map(|_| RwLock::new(Vec::new())).collect(),
        });
        (0..size).map(|rank| ThreadGroup { rank, shared: shared.clone() }).collect()
    }

    fn post(&self, values: &[f32]) {
        let mut slot = self.shared.f32_slots[self.rank].write().unwrap_or_else(|e| e.into_inner());
        slot.clear();
        slot.extend_from_slice(values);
    }

    fn slot(&self, rank: usize) -> std::sync::RwLockReadGuard<'_, Vec<f32>> {
        self.shared.f32_slots[rank].read().unwrap_or_else(|e| e.into_inner())
    }
}

impl Communicator for ThreadGroup {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.shared.f32_slots.len()
    }

    fn barrier(&self) -> Result<()> {
        self.shared.barrier.wait();
        Ok(())
    }

    fn broadcast(&self, buf: &mut [f32], root: usize) -> Result<()> {
        if root >= self.size() {
            return Err(Error::argument("broadcast", format!("root {root} is not a rank of {}", self.size())));
        }
        if self.rank == root {
            self.post(buf);
        }
        self.barrier()?;
        let posted = self.slot(root);
        let ok = posted.len() == buf.len();
        if ok {
            buf.copy_from_slice(&posted);
        }
        let len = posted.len();
        drop(posted);
        self.barrier()?;
        if !ok {
            return Err(Error::argument("broadcast", format!("rank {} has {} value(s), root {root} sent {len}", self.rank, buf.len())));
        }
        Ok(())
    }

    fn sum_shards(&self, layout: &Layout, local: &[f32], weights: &[f64], out: &mut [f32]) -> Result<()> {
        check_sum(layout, self.rank, local, weights, out)?;
        self.post(local);
        self.barrier()?;
        let n = out.len();
        let slots: Vec<_> = (0..self.size()).map(|r| self.slot(r)).collect();
        let complete = slots.iter().enumerate().all(|(r, s)| s.len() == layout.owned(r).len() * n);
        if complete {
            // shard s lives on the rank whose block holds it, at its place in the block
            let owner = |s: usize| (0..layout.ranks()).find(|&r| layout.owned(r).contains(&s)).unwrap_or(0);
            weighted_sum(
                |s| {
                    let r = owner(s);
                    let k = s - layout.owned(r).start;
                    &slots[r][k * n..(k + 1) * n]
                },
                weights,
                0..n,
                out,
            );
        }
        drop(slots);
        self.barrier()?;
        if !complete {
            return Err(Error::argument(
                "sum_shards",
                format!("the ranks posted buffers of different lengths (rank {} has {n} per shard)", self.rank),
            ));
        }
        Ok(())
    }

    fn gather(&self, local: &[f64]) -> Result<Vec<f64>> {
        {
            let mut slot = self.shared.f64_slots[self.rank].write().unwrap_or_else(|e| e.into_inner());
            slot.clear();
            slot.extend_from_slice(local);
        }
        self.barrier()?;
        let all = self.shared.f64_slots.iter().flat_map(|s| s.read().unwrap_or_else(|e| e.into_inner()).clone()).collect();
        self.barrier()?;
        Ok(all)
    }
}
