//! [`MpiWorld`]: the [`Communicator`] over MPI's world communicator (rsmpi; feature `mpi`).
//!
//! The shard sum is a reduce-scatter by slices followed by an all-gather, both plain data
//! movement: the `n` values are cut into `N` slices ([`crate::split`]); an all-to-all
//! sends every rank's shards' values of slice `r` to rank `r`, which receives all `S`
//! shards of its slice in shard order (ranks hold contiguous shard blocks in rank order)
//! and sums them with [`weighted_sum`]; an all-gather then gives every rank every slice.
//! No MPI reduction operator runs, so `MPI_Allreduce`'s implementation-defined order never
//! enters the result.
//!
//! A rank that fails calls [`MpiWorld::abort`] (`MPI_Abort`), which ends every rank of the
//! job; `mpirun` also ends the job when a rank dies.

use crate::communicator::{check_sum, split, weighted_sum, Communicator, Layout};
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator as _, CommunicatorCollectives as _, Root as _};
use mpi::Count;
use om_core::{Error, Result};
use std::cell::RefCell;

/// The processes of an `mpirun` job. Dropping it finalises MPI.
pub struct MpiWorld {
    world: SimpleCommunicator,
    /// The send and receive scratch of [`Communicator::sum_shards`], grown once.
    scratch: RefCell<(Vec<f32>, Vec<f32>, Vec<f32>)>,
    _universe: Universe,
}

fn count(n: usize) -> Result<Count> {
    Count::try_from(n).map_err(|_| Error::argument("mpi", format!("{n} values are more than one MPI message can count")))
}

impl MpiWorld {
    /// Initialises MPI (once per process).
    pub fn init() -> Result<MpiWorld> {
        let universe = mpi::initialize().ok_or_else(|| Error::argument("mpi", "MPI is already initialised in this process"))?;
        Ok(MpiWorld { world: universe.world(), scratch: RefCell::new(Default::default()), _universe: universe })
    }

    /// Ends every rank of the job with exit code `code` (`MPI_Abort`).
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }

    /// Counts and displacements of `len` values cut into this world's slices.
    fn slices(&self, len: usize) -> Result<(Vec<Count>, Vec<Count>)> {
        let n = self.size();
        let counts = (0..n).map(|r| count(split(len, n, r).len())).collect::<Result<Vec<_>>>()?;
        let displs = (0..n).map(|r| count(split(len, n, r).start)).collect::<Result<Vec<_>>>()?;
        Ok((counts, displs))
    }
}

fn grow(v: &mut Vec<f32>, len: usize) {
    if v.len() < len {
        v.resize(len, 0.0);
    }
}

impl Communicator for MpiWorld {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn barrier(&self) -> Result<()> {
        self.world.barrier();
        Ok(())
    }

    fn broadcast(&self, buf: &mut [f32], root: usize) -> Result<()> {
        if root >= self.size() {
            return Err(Error::argument("broadcast", format!("root {root} is not a rank of {}", self.size())));
        }
        self.world.process_at_rank(root as i32).broadcast_into(buf);
        Ok(())
    }

    fn sum_shards(&self, layout: &Layout, local: &[f32], weights: &[f64], out: &mut [f32]) -> Result<()> {
        let (rank, ranks, n) = (self.rank(), self.size(), out.len());
        if layout.ranks() != ranks {
            return Err(Error::argument("sum_shards", format!("the layout is for {} ranks, the world has {ranks}", layout.ranks())));
        }
        check_sum(layout, rank, local, weights, out)?;
        let held = layout.owned(rank).len();
        let mine = split(n, ranks, rank);
        let mut scratch = self.scratch.borrow_mut();
        let (send, recv, sum) = &mut *scratch;
        grow(send, held * n);
        grow(recv, layout.shards() * mine.len());
        grow(sum, mine.len());
        // send: destination by destination, this rank's shards of the destination's slice
        let mut at = 0;
        for r in 0..ranks {
            let slice = split(n, ranks, r);
            for k in 0..held {
                send[at..at + slice.len()].copy_from_slice(&local[k * n + slice.start..k * n + slice.end]);
                at += slice.len();
            }
        }
        let send_counts = (0..ranks).map(|r| count(split(n, ranks, r).len() * held)).collect::<Result<Vec<_>>>()?;
        let send_displs = (0..ranks).map(|r| count(split(n, ranks, r).start * held)).collect::<Result<Vec<_>>>()?;
        let recv_counts = (0..ranks).map(|q| count(layout.owned(q).len() * mine.len())).collect::<Result<Vec<_>>>()?;
        let recv_displs = (0..ranks).map(|q| count(layout.owned(q).start * mine.len())).collect::<Result<Vec<_>>>()?;
        let m = mine.len();
        {
            let sent = Partition::new(&send[..held * n], send_counts, send_displs);
            let mut received = PartitionMut::new(&mut recv[..layout.shards() * m], recv_counts, recv_displs);
            self.world.all_to_all_varcount_into(&sent, &mut received);
        }
        // the owner's sum of its slice, shard by shard in shard order
        weighted_sum(|s| &recv[s * m..(s + 1) * m], weights, 0..m, &mut sum[..m]);
        let (counts, displs) = self.slices(n)?;
        let mut gathered = PartitionMut::new(out, counts, displs);
        self.world.all_gather_varcount_into(&sum[..m], &mut gathered);
        Ok(())
    }

    fn gather(&self, local: &[f64]) -> Result<Vec<f64>> {
        let mut counts = vec![0 as Count; self.size()];
        self.world.all_gather_into(&count(local.len())?, &mut counts[..]);
        let displs: Vec<Count> = counts.iter().scan(0, |acc, &c| Some(std::mem::replace(acc, *acc + c))).collect();
        let mut all = vec![0.0f64; counts.iter().map(|&c| c as usize).sum()];
        let mut gathered = PartitionMut::new(&mut all[..], counts, displs);
        self.world.all_gather_varcount_into(local, &mut gathered);
        Ok(all)
    }
}
