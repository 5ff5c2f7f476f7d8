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
//! Failures reach every rank: each collective starts with a small header exchange (an
//! all-gather of every rank's status, length and tag, waited for at most the world's
//! timeout). A rank that failed outside a collective ([`Communicator::fail`]) joins the
//! others' next header with its message, arguments that differ between ranks (lengths,
//! roots, shard weights) are seen by every rank, and every rank's collective returns the
//! same `Err` naming the failing rank; no data moves. A header that does not complete in
//! time (a rank stuck or gone) prints the reason and aborts the job (`MPI_Abort`), since a
//! pending MPI collective cannot be cancelled; `mpirun` also ends the job when a rank dies.

use crate::communicator::{check_sum, split, weighted_sum, weights_tag, Communicator, Layout};
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator as _, CommunicatorCollectives as _, Root as _};
use mpi::Count;
use om_core::{Error, Result};
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// One rank's header of a collective: status (0 ok, 1 failed), the collective (its index
/// in [`COLLECTIVES`]), a length (of its argument, or of its failure message), a tag (the
/// root, the shard weights' hash).
type Header = [u64; 4];

/// The collectives, as the headers name them.
const COLLECTIVES: [&str; 4] = ["barrier", "broadcast", "sum_shards", "gather"];

/// The processes of an `mpirun` job. Dropping it finalises MPI.
pub struct MpiWorld {
    world: SimpleCommunicator,
    /// The send and receive scratch of [`Communicator::sum_shards`], grown once.
    scratch: RefCell<(Vec<f32>, Vec<f32>, Vec<f32>)>,
    timeout: Duration,
    _universe: Universe,
}

fn count(n: usize) -> Result<Count> {
    Count::try_from(n).map_err(|_| Error::argument("mpi", format!("{n} values are more than one MPI message can count")))
}

impl MpiWorld {
    /// Initialises MPI (once per process).
    pub fn init() -> Result<MpiWorld> {
        let universe = mpi::initialize().ok_or_else(|| Error::argument("mpi", "MPI is already initialised in this process"))?;
        Ok(MpiWorld {
            world: universe.world(),
            scratch: RefCell::new(Default::default()),
            timeout: crate::DEFAULT_TIMEOUT,
            _universe: universe,
        })
    }

    /// How long a collective waits for the other ranks before aborting the job
    /// ([`crate::DEFAULT_TIMEOUT`] unless set).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sets how long a collective waits for the other ranks before aborting the job.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The header exchange that starts collective `op`: every rank's header, or, when this
    /// rank or another failed, the first failing rank's message as every rank's `Err`.
    /// Aborts the job when the others do not arrive within the timeout.
    fn header(&self, op: &'static str, mine: Header, message: &str) -> Result<Vec<Header>> {
        let size = self.size();
        let mut all = vec![[0u64; 4]; size];
        {
            let flat: &mut [u64] = all.as_flattened_mut();
            mpi::request::scope(|scope| {
                let mut request = self.world.immediate_all_gather_into(scope, &mine[..], flat);
                let start = Instant::now();
                loop {
                    match request.test() {
                        Ok(_) => break,
                        Err(pending) => request = pending,
                    }
                    let waited = start.elapsed();
                    if waited >= self.timeout {
                        eprintln!(
                            "{op}: rank {} waited {} s for the other ranks (one is stuck or gone): aborting the job",
                            self.rank(),
                            self.timeout.as_secs_f64()
                        );
                        self.world.abort(1);
                    }
                    // yield as OpenMPI's blocking calls do when oversubscribed; a long
                    // wait (a rank evaluating alone) sleeps between polls instead
                    if waited < Duration::from_millis(100) {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            });
        }
        if all.iter().all(|h| h[0] == 0) {
            let name = |h: &Header| COLLECTIVES.get(h[1] as usize).copied().unwrap_or("?");
            if let Some(r) = all.iter().position(|h| h[1] != all[0][1]) {
                return Err(Error::argument(
                    op,
                    format!("rank {r} is in {}, rank 0 in {} (the ranks called different collectives)", name(&all[r]), name(&all[0])),
                ));
            }
            return Ok(all);
        }
        // the failing ranks' messages, gathered everywhere
        let counts = all.iter().map(|h| count(if h[0] == 0 { 0 } else { h[2] as usize })).collect::<Result<Vec<_>>>()?;
        let displs: Vec<Count> = counts.iter().scan(0, |acc, &c| Some(std::mem::replace(acc, *acc + c))).collect();
        let mut bytes = vec![0u8; counts.iter().map(|&c| c as usize).sum()];
        let sent: &[u8] = if mine[0] == 0 { &[] } else { message.as_bytes() };
        self.world.all_gather_varcount_into(sent, &mut PartitionMut::new(&mut bytes[..], counts, displs.clone()));
        let first = all.iter().position(|h| h[0] != 0).unwrap_or(0);
        let at = displs[first] as usize;
        let text = String::from_utf8_lossy(&bytes[at..at + all[first][2] as usize]).into_owned();
        Err(Error::argument(op, text))
    }

    /// The header of collective `op` for an argument of `len` values and `tag`, or this
    /// rank's failure `check` (then every rank's `Err`).
    fn start(&self, op: &'static str, check: Result<()>, len: usize, tag: u64) -> Result<Vec<Header>> {
        match check {
            Ok(()) => {
                let kind = COLLECTIVES.iter().position(|&c| c == op).unwrap_or(COLLECTIVES.len());
                self.header(op, [0, kind as u64, len as u64, tag], "")
            }
            Err(e) => {
                let msg = format!("rank {} failed: {e}", self.rank());
                self.header(op, [1, 0, msg.len() as u64, 0], &msg)
            }
        }
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
        // the header exchange is a barrier
        self.start("barrier", Ok(()), 0, 0).map(drop)
    }

    fn broadcast(&self, buf: &mut [f32], root: usize) -> Result<()> {
        let check = match root < self.size() {
            true => Ok(()),
            false => Err(Error::argument("broadcast", format!("root {root} is not a rank of {}", self.size()))),
        };
        let heads = self.start("broadcast", check, buf.len(), root as u64)?;
        if let Some(r) = heads.iter().position(|h| h[3] != root as u64) {
            return Err(Error::argument(
                "broadcast",
                format!("rank {r} broadcasts from root {}, rank {root} from root {root}", heads[r][3]),
            ));
        }
        if let Some(r) = heads.iter().position(|h| h[2] != heads[root][2]) {
            return Err(Error::argument(
                "broadcast",
                format!("rank {r} has {} value(s), root {root} sent {}", heads[r][2], heads[root][2]),
            ));
        }
        self.world.process_at_rank(root as i32).broadcast_into(buf);
        Ok(())
    }

    fn sum_shards(&self, layout: &Layout, local: &[f32], weights: &[f64], out: &mut [f32]) -> Result<()> {
        let (rank, ranks, n) = (self.rank(), self.size(), out.len());
        let check = match layout.ranks() == ranks {
            true => check_sum(layout, rank, local, weights, out),
            false => Err(Error::argument("sum_shards", format!("the layout is for {} ranks, the world has {ranks}", layout.ranks()))),
        };
        let heads = self.start("sum_shards", check, n, weights_tag(weights))?;
        if let Some(r) = heads.iter().position(|h| h[2] != heads[0][2]) {
            return Err(Error::argument(
                "sum_shards",
                format!("rank {r} has {} value(s) per shard, rank 0 has {}", heads[r][2], heads[0][2]),
            ));
        }
        if let Some(r) = heads.iter().position(|h| h[3] != heads[0][3]) {
            return Err(Error::argument(
                "sum_shards",
                format!("rank {r}'s shard weights differ from rank 0's (the ranks cut batches of different lengths)"),
            ));
        }
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
        let heads = self.start("gather", count(local.len()).map(drop), local.len(), 0)?;
        let counts = heads.iter().map(|h| count(h[2] as usize)).collect::<Result<Vec<_>>>()?;
        let displs: Vec<Count> = counts.iter().scan(0, |acc, &c| Some(std::mem::replace(acc, *acc + c))).collect();
        let mut all = vec![0.0f64; counts.iter().map(|&c| c as usize).sum()];
        let mut gathered = PartitionMut::new(&mut all[..], counts, displs);
        self.world.all_gather_varcount_into(local, &mut gathered);
        Ok(all)
    }

    fn fail(&self, error: Error) -> Error {
        match self.start("DataParallel", Err(error), 0, 0) {
            Err(e) => e,
            Ok(_) => Error::argument("DataParallel", format!("rank {} failed", self.rank())),
        }
    }
}
