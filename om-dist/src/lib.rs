//! # om-dist
//!
//! Data-parallel training for OneModel, bit-identical in exact mode at any number of
//! processes.
//!
//! - [`communicator`]: the [`Communicator`] trait (rank, size, barrier, broadcast, the
//!   deterministic shard-order sum, gather of metrics), the [`Layout`] of shards over
//!   ranks, the one summation every implementation uses ([`weighted_sum`]) and the
//!   single-process implementation [`Single`].
//! - [`threads`]: [`ThreadGroup`], ranks that are threads of one process (tests).
//! - [`data_parallel`]: [`DataParallel`], one step's gradients shard by shard, reduced and
//!   handed identical to every rank's optimizer.
//! - `mpi` (cargo feature `mpi`): `MpiWorld`, the communicator over MPI (rsmpi), whose sum
//!   is a reduce-scatter by parameter slices (each owner sums the shards in shard order)
//!   followed by an all-gather — never `MPI_Allreduce`'s implementation-defined order.
//!
//! Failures stay contained: a rank whose loss errs or panics, whose model or batch differs,
//! or that does not arrive within the timeout ([`DEFAULT_TIMEOUT`]) makes every rank's
//! current call return an `Err` naming it ([`Communicator::fail`]), never a hang.
//!
//! `docs/distributed.md` describes running it, what is reproducible and the communication
//! volume.

pub mod communicator;
pub mod data_parallel;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod threads;

pub use communicator::{split, weighted_sum, Communicator, Layout, Single, DEFAULT_TIMEOUT};
pub use data_parallel::{DataParallel, BUCKET};
#[cfg(feature = "mpi")]
pub use mpi::MpiWorld;
pub use threads::ThreadGroup;
