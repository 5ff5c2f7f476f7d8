//! [`ThreadGroup`]: ranks that are threads of one process, sharing memory. It runs the
//! same collectives as a cluster (same [`weighted_sum`] arithmetic, same layout), so a test
//! can train "N ranks" in one process and compare with one rank or with MPI.
//!
//! Failures stay contained: the group's barrier can be poisoned. A rank that fails
//! ([`Communicator::fail`]), panics (its communicator is dropped while unwinding) or leaves
//! (its communicator is dropped) poisons it, and so does a wait longer than the group's
//! timeout; from then on every rank's current and next collective returns an `Err` naming
//! the failing rank and the reason.

use crate::communicator::{check_sum, weighted_sum, weights_tag, Communicator, Layout, DEFAULT_TIMEOUT};
use om_core::{Error, Result};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

/// The barrier's state: which ranks have arrived in the current round, and the failure
/// that poisoned the group (the first one; it is never cleared).
struct State {
    round: u64,
    arrived: Vec<bool>,
    count: usize,
    failure: Option<String>,
}

/// What the ranks of a group share: a poisonable barrier, one posting slot per rank and
/// the wait limit.
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    timeout: Duration,
    f32_slots: Vec<RwLock<Vec<f32>>>,
    f64_slots: Vec<RwLock<Vec<f64>>>,
    /// Each rank's collective, argument length and tag (root, shard weights' hash) of the
    /// current collective, for the checks.
    lens: Vec<RwLock<(&'static str, usize, u64)>>,
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
    /// A group of `size ≥ 1` ranks whose collectives wait at most
    /// [`DEFAULT_TIMEOUT`] for the other ranks.
    pub fn new(size: usize) -> Vec<ThreadGroup> {
        ThreadGroup::with_timeout(size, DEFAULT_TIMEOUT)
    }

    /// A group of `size ≥ 1` ranks whose collectives wait at most `timeout` for the other
    /// ranks; then every rank's collective fails, naming the ranks that did not arrive.
    ///
    /// ```
    /// use om_dist::{Communicator, ThreadGroup};
    /// use std::time::Duration;
    /// let mut ranks = ThreadGroup::with_timeout(2, Duration::from_millis(50));
    /// let _absent = ranks.pop(); // rank 1 never calls a collective (but is not dropped)
    /// let e = ranks[0].barrier().unwrap_err();
    /// assert!(e.to_string().contains("rank 1 did not reach the collective within 0.05 s"), "{e}");
    /// ```
    pub fn with_timeout(size: usize, timeout: Duration) -> Vec<ThreadGroup> {
        let size = size.max(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(State { round: 0, arrived: vec![false; size], count: 0, failure: None }),
            wake: Condvar::new(),
            timeout,
            f32_slots: (0..size).map(|_| RwLock::new(Vec::new())).collect(),
            f64_slots: (0..size).map(|_| RwLock::new(Vec::new())).collect(),
            lens: (0..size).map(|_| RwLock::new(("", 0, 0))).collect(),
        });
        (0..size).map(|rank| ThreadGroup { rank, shared: shared.clone() }).collect()
    }

    /// How long a collective waits for the other ranks.
    pub fn timeout(&self) -> Duration {
        self.shared.timeout
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Poisons the group with `failure` (unless it is poisoned already) and wakes every
    /// waiting rank.
    fn poison(&self, failure: String) {
        let mut state = self.state();
        state.failure.get_or_insert(failure);
        drop(state);
        self.shared.wake.notify_all();
    }

    /// The barrier of collective `op`: returns once every rank has arrived, or fails when
    /// the group is (or becomes) poisoned or after the timeout.
    fn wait(&self, op: &'static str) -> Result<()> {
        let mut state = self.state();
        if let Some(f) = &state.failure {
            return Err(Error::argument(op, f.clone()));
        }
        let round = state.round;
        state.arrived[self.rank] = true;
        state.count += 1;
        if state.count == state.arrived.len() {
            state.count = 0;
            state.arrived.fill(false);
            state.round += 1;
            drop(state);
            self.shared.wake.notify_all();
            return Ok(());
        }
        let deadline = Instant::now() + self.shared.timeout;
        loop {
            if state.round != round {
                return Ok(());
            }
            if let Some(f) = &state.failure {
                return Err(Error::argument(op, f.clone()));
            }
            let now = Instant::now();
            if now >= deadline {
                let missing: Vec<usize> = (0..state.arrived.len()).filter(|&r| !state.arrived[r]).collect();
                let names = missing.iter().map(|r| format!("rank {r}")).collect::<Vec<_>>().join(", ");
                let f = format!(
                    "{names} did not reach the collective within {} s (rank {} waited in {op})",
                    self.shared.timeout.as_secs_f64(),
                    self.rank
                );
                state.failure = Some(f.clone());
                drop(state);
                self.shared.wake.notify_all();
                return Err(Error::argument(op, f));
            }
            state = self.shared.wake.wait_timeout(state, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Posts this rank's `(len, tag)` for collective `op`, waits for every rank, and
    /// returns every rank's (the same list on every rank); fails on every rank when the
    /// ranks are in different collectives.
    fn exchange(&self, op: &'static str, len: usize, tag: u64) -> Result<Vec<(usize, u64)>> {
        *self.shared.lens[self.rank].write().unwrap_or_else(|e| e.into_inner()) = (op, len, tag);
        self.wait(op)?;
        let all: Vec<_> = self.shared.lens.iter().map(|l| *l.read().unwrap_or_else(|e| e.into_inner())).collect();
        if let Some(r) = all.iter().position(|l| l.0 != all[0].0) {
            let msg = format!("rank {r} is in {}, rank 0 in {} (the ranks called different collectives)", all[r].0, all[0].0);
            self.poison(msg.clone());
            return Err(Error::argument(op, msg));
        }
        Ok(all.iter().map(|l| (l.1, l.2)).collect())
    }

    /// Fails collective `op` on every rank with `msg` (before this rank arrives, so no
    /// rank passes the collective's barrier).
    fn fail_all(&self, op: &'static str, msg: String) -> Result<()> {
        self.poison(msg.clone());
        Err(Error::argument(op, msg))
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

/// A rank whose communicator is dropped can join no collective again: the group is
/// poisoned ("panicked" when the thread is unwinding, "left the group" otherwise), so the
/// other ranks' collectives fail instead of waiting for it.
impl Drop for ThreadGroup {
    fn drop(&mut self) {
        let why = if std::thread::panicking() { "panicked" } else { "left the group (its communicator was dropped)" };
        self.poison(format!("rank {} {why}", self.rank));
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
        self.exchange("barrier", 0, 0).map(drop)
    }

    fn broadcast(&self, buf: &mut [f32], root: usize) -> Result<()> {
        if root >= self.size() {
            return self.fail_all("broadcast", format!("rank {} failed: root {root} is not a rank of {}", self.rank, self.size()));
        }
        if self.rank == root {
            self.post(buf);
        }
        let lens = self.exchange("broadcast", buf.len(), root as u64)?;
        // every rank sees the same lengths, so every rank takes the same branch
        let bad = (0..lens.len()).find(|&r| lens[r] != lens[root]);
        if bad.is_none() {
            buf.copy_from_slice(&self.slot(root));
        }
        self.wait("broadcast")?;
        match bad {
            None => Ok(()),
            Some(r) => {
                let msg = if lens[r].1 != root as u64 {
                    format!("rank {r} broadcasts from root {}, rank {root} from root {root}", lens[r].1)
                } else {
                    format!("rank {r} has {} value(s), root {root} sent {}", lens[r].0, lens[root].0)
                };
                self.poison(msg.clone());
                Err(Error::argument("broadcast", msg))
            }
        }
    }

    fn sum_shards(&self, layout: &Layout, local: &[f32], weights: &[f64], out: &mut [f32]) -> Result<()> {
        if let Err(e) = check_sum(layout, self.rank, local, weights, out) {
            return self.fail_all("sum_shards", format!("rank {} failed: {e}", self.rank));
        }
        self.post(local);
        let n = out.len();
        let lens = self.exchange("sum_shards", n, weights_tag(weights))?;
        let bad = (1..lens.len()).find(|&r| lens[r] != lens[0]);
        if bad.is_none() {
            let slots: Vec<_> = (0..self.size()).map(|r| self.slot(r)).collect();
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
        self.wait("sum_shards")?;
        match bad {
            None => Ok(()),
            Some(r) => {
                let msg = if lens[r].0 != lens[0].0 {
                    format!("rank {r} has {} value(s) per shard, rank 0 has {}", lens[r].0, lens[0].0)
                } else {
                    format!("rank {r}'s shard weights differ from rank 0's (the ranks cut batches of different lengths)")
                };
                self.poison(msg.clone());
                Err(Error::argument("sum_shards", msg))
            }
        }
    }

    fn gather(&self, local: &[f64]) -> Result<Vec<f64>> {
        {
            let mut slot = self.shared.f64_slots[self.rank].write().unwrap_or_else(|e| e.into_inner());
            slot.clear();
            slot.extend_from_slice(local);
        }
        self.exchange("gather", local.len(), 0)?;
        let all = self.shared.f64_slots.iter().flat_map(|s| s.read().unwrap_or_else(|e| e.into_inner()).clone()).collect();
        self.wait("gather")?;
        Ok(all)
    }

    fn fail(&self, error: Error) -> Error {
        let msg = format!("rank {} failed: {error}", self.rank);
        self.poison(msg.clone());
        Error::argument("DataParallel", msg)
    }
}
