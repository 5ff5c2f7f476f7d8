//! [`DataParallel`]: one training step's gradients computed shard by shard and combined
//! with the deterministic shard-order sum, so that every rank hands its optimizer the same
//! gradients and the result does not depend on how many processes share the shards.
//!
//! A step's global batch is cut into `S` contiguous shards ([`crate::split`]); each rank
//! computes the mean loss and its gradients on each of its shards, flattens them (plus the
//! loss value) into one buffer allocated once, and the [`Communicator`] sums shard `s` with
//! weight `|shard s| / |batch|` in shard order (`f64`, rounded once). With `S = 1` the
//! gradients and the loss are the unsharded step's bit for bit.
//!
//! Batch norm sees per-shard statistics (as PyTorch's DDP without `SyncBatchNorm`); the
//! running statistics after a step are the ones shard 0 produced from the step's starting
//! values (DDP broadcasts rank 0's buffers), on every rank.

use crate::communicator::{split, Communicator, Layout};
use om_core::{DType, Error, Result, Tensor};
use std::any::Any;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The reduction runs in buckets of at most this many values, so a collective's message
/// and receive buffers stay bounded whatever the model's size (16 MiB of `f32`).
pub const BUCKET: usize = 1 << 22;

/// Data-parallel training of one model replica per rank.
///
/// ```
/// use om_dist::{DataParallel, Single};
/// use om_core::{Tensor, Result};
/// let w = Tensor::from_vec(vec![1.0, 2.0], &[2])?.requires_grad()?;
/// let mut dp = DataParallel::new(Single, vec![w.clone()], vec![], 2)?;
/// // the loss of a shard of examples x: mean over the shard of w·x
/// let examples = [[1.0f32, 0.0], [0.0, 1.0], [1.0, 1.0]];
/// let loss = dp.step(&examples, |rows| {
///     let x: Vec<f32> = rows.iter().flatten().copied().collect();
///     let x = Tensor::from_vec(x, &[rows.len(), 2])?;
///     let per_row = om_ops::sum(&om_ops::mul(&x, &w)?, Some(1), false)?;
///     om_ops::mean(&per_row, None, false)
/// })?;
/// // the gradient of the mean over all three examples
/// let g = w.grad().unwrap().to_vec();
/// assert!((g[0] - 2.0 / 3.0).abs() < 1e-7 && (g[1] - 2.0 / 3.0).abs() < 1e-7);
/// assert!((loss - 2.0).abs() < 1e-6);
/// # Ok::<(), om_core::Error>(())
/// ```
pub struct DataParallel<C: Communicator> {
    comm: C,
    layout: Layout,
    params: Vec<Tensor>,
    buffers: Vec<Tensor>,
    /// Values per shard: every parameter's gradient, then the shard's loss.
    len: usize,
    /// This rank's shards' values, bucket by bucket (see [`DataParallel::place`]).
    local: Vec<f32>,
    /// The summed values (`len` of them).
    sum: Vec<f32>,
    weights: Vec<f64>,
    /// The buffers (running statistics) as shard 0 left them.
    first_buffers: Vec<f32>,
}

impl<C: Communicator> DataParallel<C> {
    /// Takes rank 0's `params` and `buffers` on every rank (a broadcast) and allocates the
    /// step's buffers. `params` are contiguous `f32` leaves, `buffers` contiguous `f32`
    /// tensors; `shards ≥` the ranks of `comm`.
    pub fn new(comm: C, params: Vec<Tensor>, buffers: Vec<Tensor>, shards: usize) -> Result<DataParallel<C>> {
        let layout = match check_new(&comm, &params, &buffers, shards) {
            Ok(layout) => layout,
            Err(e) => return Err(comm.fail(e)),
        };
        let len = params.iter().map(Tensor::numel).sum::<usize>() + 1;
        let held = layout.owned(comm.rank()).len();
        let n_buffers = buffers.iter().map(Tensor::numel).sum();
        let mut dp = DataParallel {
            comm,
            layout,
            params,
            buffers,
            len,
            local: vec![0.0; held * len],
            sum: vec![0.0; len],
            weights: vec![0.0; shards],
            first_buffers: vec![0.0; n_buffers],
        };
        let mut flat = vec![0.0f32; len - 1];
        flatten(&dp.params, &mut flat);
        dp.comm.broadcast(&mut flat, 0)?;
        unflatten(&flat, &dp.params).map_err(|e| dp.comm.fail(e))?;
        dp.broadcast_buffers()?;
        Ok(dp)
    }

    /// The communicator.
    pub fn comm(&self) -> &C {
        &self.comm
    }

    /// The shards and ranks of the run.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Computes the gradients of the mean loss over `batch` (the same global batch on
    /// every rank) into the parameters' `grad`s, identical on every rank, and returns the
    /// batch's mean loss. `loss(shard)` is the mean loss of a shard's examples, recorded
    /// for backward. Every shard needs at least one example.
    ///
    /// A failure on any rank fails the step on every rank, never a hang: when a rank's
    /// `loss` (or its backward pass) returns an `Err` or panics, when its batch is shorter
    /// than the shard count, or when the ranks' batches or models differ, every rank's
    /// `step` returns an `Err` naming the failing rank and the reason (see
    /// [`Communicator::fail`]); the communicator is then unusable.
    pub fn step<E>(&mut self, batch: &[E], mut loss: impl FnMut(&[E]) -> Result<Tensor>) -> Result<f32> {
        if let Err(e) = self.shards(batch, &mut loss) {
            return Err(self.comm.fail(e));
        }
        let owned = self.layout.owned(self.comm.rank());
        for b in 0..self.len.div_ceil(BUCKET) {
            let r = bucket(self.len, b);
            let local = &self.local[owned.len() * r.start..owned.len() * r.end];
            self.comm.sum_shards(&self.layout, local, &self.weights, &mut self.sum[r])?;
        }
        let mut at = 0;
        for p in &self.params {
            let n = p.numel();
            let written = match p.grad() {
                Some(g) => g.update_f32("DataParallel", |g| g.copy_from_slice(&self.sum[at..at + n])),
                None => Err(Error::argument("DataParallel", "a parameter lost its gradient")),
            };
            written.map_err(|e| self.comm.fail(e))?;
            at += n;
        }
        if owned.start == 0 {
            unflatten(&self.first_buffers, &self.buffers).map_err(|e| self.comm.fail(e))?;
        }
        self.broadcast_buffers()?;
        Ok(self.sum[self.len - 1])
    }

    /// This rank's part of a step before the reduction: the weights, then each of its
    /// shards' loss and gradients into `local` (a panic in `loss` or backward is an `Err`).
    fn shards<E>(&mut self, batch: &[E], loss: &mut impl FnMut(&[E]) -> Result<Tensor>) -> Result<()> {
        let shards = self.layout.shards();
        if batch.len() < shards {
            return Err(Error::argument(
                "DataParallel",
                format!("a batch of {} example(s) cannot be cut into {shards} shard(s)", batch.len()),
            ));
        }
        for (s, w) in self.weights.iter_mut().enumerate() {
            *w = split(batch.len(), shards, s).len() as f64 / batch.len() as f64;
        }
        let owned = self.layout.owned(self.comm.rank());
        for (k, s) in owned.clone().enumerate() {
            self.params.iter().try_for_each(Tensor::zero_grad)?;
            let rows = &batch[split(batch.len(), shards, s)];
            let l = catch_unwind(AssertUnwindSafe(|| -> Result<Tensor> {
                let l = loss(rows)?;
                l.backward()?;
                Ok(l)
            }))
            .unwrap_or_else(|panic| Err(Error::argument("DataParallel", format!("shard {s}'s loss panicked: {}", message(&*panic)))))?;
            let mut at = 0;
            for (i, p) in self.params.iter().enumerate() {
                let g = p.grad().ok_or_else(|| Error::argument("DataParallel", format!("parameter {i} got no gradient from shard {s}")))?;
                g.try_with_f32(|g| place(&mut self.local, owned.len(), self.len, k, at, g))?;
                at += p.numel();
            }
            place(&mut self.local, owned.len(), self.len, k, at, &[l.item()?]);
            if s == 0 {
                flatten(&self.buffers, &mut self.first_buffers);
            }
        }
        Ok(())
    }

    /// Overwrites every rank's buffers with rank 0's.
    fn broadcast_buffers(&mut self) -> Result<()> {
        if self.comm.size() > 1 {
            flatten(&self.buffers, &mut self.first_buffers);
            self.comm.broadcast(&mut self.first_buffers, 0)?;
            unflatten(&self.first_buffers, &self.buffers).map_err(|e| self.comm.fail(e))?;
        }
        Ok(())
    }

    /// A 64-bit FNV-1a hash of the parameters' and buffers' bits (equal hashes: equal
    /// replicas, with overwhelming probability).
    pub fn hash(&self) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for t in self.params.iter().chain(&self.buffers) {
            t.with_f32(|v| {
                for x in v {
                    for byte in x.to_bits().to_le_bytes() {
                        h = (h ^ byte as u64).wrapping_mul(0x0100_0000_01b3);
                    }
                }
            });
        }
        h
    }

    /// Checks that every rank's parameters and buffers are bit-identical to rank 0's
    /// (every rank's [`DataParallel::hash`] gathered, in four exact 16-bit pieces): every
    /// rank fails, naming the first rank that differs, when one does.
    pub fn check_replicas(&self) -> Result<()> {
        let mine = self.hash();
        let pieces: [f64; 4] = std::array::from_fn(|i| ((mine >> (16 * i)) & 0xffff) as f64);
        let all = self.comm.gather(&pieces)?;
        let hashes: Vec<u64> = all.chunks(4).map(|p| p.iter().enumerate().fold(0u64, |h, (i, &p)| h | ((p as u64) << (16 * i)))).collect();
        if let Some(r) = hashes.iter().position(|&h| h != hashes[0]) {
            return Err(Error::argument(
                "DataParallel",
                format!("rank {r}'s parameters differ from rank 0's (hash {:016x}, rank 0 {:016x})", hashes[r], hashes[0]),
            ));
        }
        Ok(())
    }
}

/// The checks of [`DataParallel::new`] on this rank, and the layout.
fn check_new<C: Communicator>(comm: &C, params: &[Tensor], buffers: &[Tensor], shards: usize) -> Result<Layout> {
    let layout = Layout::new(shards, comm.size())?;
    for (what, list) in [("parameter", params), ("buffer", buffers)] {
        if let Some(i) = list.iter().position(|t| t.dtype() != DType::F32 || !t.is_contiguous()) {
            return Err(Error::argument("DataParallel", format!("{what} {i} must be a contiguous f32 tensor")));
        }
    }
    Ok(layout)
}

/// A panic's message (its payload when it is a string).
fn message(panic: &(dyn Any + Send)) -> &str {
    panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str)).unwrap_or("(no message)")
}

/// Bucket `b`'s range of a shard's `len` values.
fn bucket(len: usize, b: usize) -> Range<usize> {
    b * BUCKET..((b + 1) * BUCKET).min(len)
}

/// Writes `values` at value index `at` of shard `k` (of `held`) into `local`, which holds
/// the shards bucket by bucket: bucket `b` is `held` runs of its length, shard by shard,
/// so each bucket's contributions are one contiguous block for the collective.
fn place(local: &mut [f32], held: usize, len: usize, k: usize, at: usize, values: &[f32]) {
    let mut done = 0;
    while done < values.len() {
        let i = at + done;
        let r = bucket(len, i / BUCKET);
        let n = (r.end - i).min(values.len() - done);
        let dst = held * r.start + k * r.len() + (i - r.start);
        local[dst..dst + n].copy_from_slice(&values[done..done + n]);
        done += n;
    }
}

/// The tensors' values back to back into `flat`.
fn flatten(tensors: &[Tensor], flat: &mut [f32]) {
    let mut at = 0;
    for t in tensors {
        let n = t.numel();
        t.with_f32(|v| flat[at..at + n].copy_from_slice(v));
        at += n;
    }
}

/// `flat`'s values back into the tensors, in place.
fn unflatten(flat: &[f32], tensors: &[Tensor]) -> Result<()> {
    let mut at = 0;
    for t in tensors {
        let n = t.numel();
        t.update_f32("DataParallel", |v| v.copy_from_slice(&flat[at..at + n]))?;
        at += n;
    }
    Ok(())
}
