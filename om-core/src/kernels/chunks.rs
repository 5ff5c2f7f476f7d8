//! Row chunks of several outputs at once: [`for_each_row_chunk`] cuts `N` row-major
//! outputs that share a row count into the same ranges of whole rows and runs one chunk
//! per call of `f`, on the thread team of
//! [`for_each_chunk`](crate::kernels::parallel::for_each_chunk). For kernels that write more
//! than one result per row (an LSTM step writes its gates, cell, `tanh` of the cell and
//! hidden state; an attention block its `dQ`, `dK` and `dV`), where `for_each_chunk_mut`
//! would need one slice. The chunk size is the caller's, a function of the shape only.
//! [`for_each_row_chunk_scratch`] also hands each thread its own part of a scratch taken
//! before the loop (see [`crate::kernels::scratch`]).

use crate::kernels::parallel::for_each_chunk_scratch;
use std::ops::Range;

/// A base pointer that may cross threads; chunks only ever touch disjoint rows of it.
#[derive(Clone, Copy)]
struct Base(*mut f32);

// SAFETY: the pointer is only dereferenced through the disjoint row ranges handed out by
// `for_each_row_chunk` (one range per chunk, each chunk run once), so sharing it between
// threads never gives two threads the same element.
unsafe impl Send for Base {}
// SAFETY: as for `Send`; the pointer itself is never written after construction.
unsafe impl Sync for Base {}

/// Runs `f(chunk, rows, parts)` for consecutive ranges of `rows_per_chunk` rows (the last
/// may be shorter) out of `rows`, where `parts[i]` is rows `rows` of `outs[i]`, a row-major
/// matrix with `widths[i]` values per row. Chunks run on `threads` threads; each is run
/// exactly once, so `f` may write its parts freely.
///
/// Panics if an output holds fewer than `rows · widths[i]` values.
pub fn for_each_row_chunk<const N: usize>(
    threads: usize,
    outs: [&mut [f32]; N],
    widths: [usize; N],
    rows: usize,
    rows_per_chunk: usize,
    f: impl Fn(usize, Range<usize>, [&mut [f32]; N]) + Sync + Send,
) {
    for_each_row_chunk_scratch(threads, outs, widths, rows, rows_per_chunk, &mut [], 0, |c, r, parts, _| f(c, r, parts));
}

/// The number of chunks of [`for_each_row_chunk`] over `rows` rows: `rows / rows_per_chunk`
/// rounded up (`rows_per_chunk` 0 counts as 1). Size a [`for_each_row_chunk_scratch`]
/// with it.
pub fn row_chunk_count(rows: usize, rows_per_chunk: usize) -> usize {
    rows.div_ceil(rows_per_chunk.max(1))
}

/// As [`for_each_row_chunk`], and `f(chunk, rows, parts, scratch)` also gets the running
/// thread's own part of `scratch` (`per_worker` values), as in
/// [`for_each_chunk_scratch`] with [`row_chunk_count`]`(rows, rows_per_chunk)` chunks:
/// take it with [`WorkerScratch`](crate::kernels::scratch::WorkerScratch) before the loop.
///
/// Panics if an output holds fewer than `rows · widths[i]` values, or `scratch` fewer than
/// [`workers`](crate::kernels::parallel::workers)`(threads, chunks) · per_worker`.
#[allow(clippy::too_many_arguments)]
pub fn for_each_row_chunk_scratch<const N: usize>(
    threads: usize,
    outs: [&mut [f32]; N],
    widths: [usize; N],
    rows: usize,
    rows_per_chunk: usize,
    scratch: &mut [f32],
    per_worker: usize,
    f: impl Fn(usize, Range<usize>, [&mut [f32]; N], &mut [f32]) + Sync + Send,
) {
    let per = rows_per_chunk.max(1);
    for (o, &w) in outs.iter().zip(&widths) {
        assert!(o.len() >= rows * w, "for_each_row_chunk: an output holds {} values, {rows} rows of {w} need more", o.len());
    }
    // The outputs stay mutably borrowed (and unused) until every chunk has run.
    let mut outs = outs;
    let bases: [Base; N] = std::array::from_fn(|i| Base(outs[i].as_mut_ptr()));
    let chunks = row_chunk_count(rows, per);
    for_each_chunk_scratch(threads, chunks, scratch, per_worker, |c, scratch| {
        let r = c * per..((c + 1) * per).min(rows);
        let parts: [&mut [f32]; N] = std::array::from_fn(|i| {
            let w = widths[i];
            // SAFETY: `r` lies within `0..rows` and each output holds at least
            // `rows · w` values (asserted above), so the range is in bounds; chunks cover
            // disjoint row ranges and each chunk runs once, so no two live slices overlap;
            // the outputs stay mutably borrowed by this call until all chunks finish.
            unsafe { std::slice::from_raw_parts_mut(bases[i].0.add(r.start * w), r.len() * w) }
        });
        f(c, r, parts, scratch);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_every_row_once() {
        for threads in [1, 2, 3] {
            let (mut a, mut b) = (vec![0.0f32; 7 * 3], vec![0.0f32; 7 * 2]);
            for_each_row_chunk(threads, [&mut a, &mut b], [3, 2], 7, 2, |c, rows, [pa, pb]| {
                assert_eq!(pa.len(), rows.len() * 3);
                assert_eq!(pb.len(), rows.len() * 2);
                pa.iter_mut().for_each(|v| *v += 1.0 + c as f32);
                pb.iter_mut().for_each(|v| *v += 1.0);
            });
            assert!(b.iter().all(|&v| v == 1.0));
            for (r, row) in a.chunks(3).enumerate() {
                assert!(row.iter().all(|&v| v == 1.0 + (r / 2) as f32), "row {r}");
            }
        }
    }
}
