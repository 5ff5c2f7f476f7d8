//! The scratch of a parallel section, taken up front: one pooled buffer, requested on the
//! calling thread before the section, holding one part per thread that may take part
//! ([`workers`]`(threads, chunks)`, a function of the shape and the thread setting only),
//! each part starting on a 64-byte boundary. The `_scratch` forms of the parallel loops
//! ([`for_each_tile_scratch`](crate::kernels::parallel::for_each_tile_scratch),
//! [`for_each_chunk_scratch`], [`for_each_chunk_mut_scratch`]) hand each thread its own
//! part.
//!
//! Why not one buffer per chunk, taken inside it: how many chunks run at the same time
//! depends on when the helper threads wake, so the number of buffers of one size class
//! outstanding at once, and with it the pool memory a step needs, would depend on timing,
//! and a warm step could allocate once in a while (issue 22). Taken up front, a refused
//! request is also an error before any chunk has run.
//!
//! [`workers`]: crate::kernels::parallel::workers
//! [`for_each_chunk_scratch`]: crate::kernels::parallel::for_each_chunk_scratch
//! [`for_each_chunk_mut_scratch`]: crate::kernels::parallel::for_each_chunk_mut_scratch

use crate::error::Result;
use crate::kernels::parallel::workers;
use crate::pool::Buffer;

/// Floats per 64 bytes: parts start on a 64-byte boundary (no two threads share a line).
const LINE_FLOATS: usize = 16;

/// The `f32` scratch of one parallel section: [`WorkerScratch::parts`] holds one part of
/// [`WorkerScratch::per_worker`] floats per thread that may take part.
///
/// # Examples
///
/// Row sums of a `[8, 100]` matrix through a doubled copy of each row, one copy buffer per
/// thread, taken before the loop:
///
/// ```
/// use om_core::kernels::parallel::{chunk_count, for_each_chunk_mut_scratch};
/// use om_core::kernels::scratch::WorkerScratch;
///
/// let (rows, cols, threads) = (8, 100, 2);
/// let x: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
/// let mut sums = vec![0.0f32; rows];
/// let mut scratch = WorkerScratch::f32(threads, chunk_count(sums.len(), 1), cols)?;
/// let per = scratch.per_worker();
/// for_each_chunk_mut_scratch(threads, &mut sums, 1, scratch.parts(), per, |r, sum, copy| {
///     let copy = &mut copy[..cols];
///     copy.iter_mut().zip(&x[r * cols..][..cols]).for_each(|(c, &v)| *c = 2.0 * v);
///     sum[0] = copy.iter().sum();
/// });
/// assert_eq!(sums[1], 2.0 * (100..200).sum::<i32>() as f32);
/// # Ok::<(), om_core::Error>(())
/// ```
pub struct WorkerScratch {
    buf: Buffer,
    per: usize,
    len: usize,
}

impl WorkerScratch {
    /// Scratch for a section of `chunks` chunks on `threads` threads in which each thread
    /// needs `floats` floats: `workers(threads, chunks)` parts, each `floats` rounded up to
    /// 64 bytes. Fails with [`Error::OutOfMemory`](crate::Error::OutOfMemory) (naming no
    /// operator yet) when the pool refuses it or the size overflows.
    pub fn f32(threads: usize, chunks: usize, floats: usize) -> Result<WorkerScratch> {
        let per = floats.checked_next_multiple_of(LINE_FLOATS);
        let len = per.and_then(|per| per.checked_mul(workers(threads, chunks)));
        let bytes = len.and_then(|len| len.checked_mul(4)).unwrap_or(usize::MAX);
        let buf = Buffer::try_new(bytes)?;
        Ok(WorkerScratch { buf, per: per.unwrap_or(0), len: len.unwrap_or(0) })
    }

    /// Floats per part (at least the `floats` asked for).
    pub fn per_worker(&self) -> usize {
        self.per
    }

    /// Every part, one after another: the `scratch` argument of the `_scratch` loops.
    pub fn parts(&mut self) -> &mut [f32] {
        &mut self.buf.f32_mut()[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::kernels::parallel::for_each_chunk_scratch;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn one_aligned_part_per_worker_and_refusals_are_errors() {
        for (threads, chunks, parts) in [(1, 8, 1), (2, 1, 1), (2, 8, 2), (3, 2, 2), (4, 8, 4)] {
            let mut s = WorkerScratch::f32(threads, chunks, 5).unwrap();
            let per = s.per_worker();
            assert_eq!((per, s.parts().len()), (16, 16 * parts), "{threads} threads, {chunks} chunks");
            assert_eq!(s.parts().as_ptr() as usize % 64, 0);
            let calls = AtomicUsize::new(0);
            for_each_chunk_scratch(threads, chunks, s.parts(), per, |c, part| {
                assert_eq!(part.len(), 16);
                part.fill(c as f32); // each thread writes only its own part
                calls.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(calls.load(Ordering::Relaxed), chunks);
        }
        for floats in [usize::MAX, usize::MAX / 4] {
            let e = WorkerScratch::f32(2, 2, floats).err().expect("an error");
            assert!(matches!(e, Error::OutOfMemory { bytes, .. } if bytes == usize::MAX as u64), "{e}");
        }
    }
}
