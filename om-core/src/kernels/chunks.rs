//! Row chunks of several outputs at once: [`for_each_row_chunk`] cuts `N` dense row-major
//! outputs that share a row count into the same ranges of whole rows and runs one chunk
//! per call of `f`, a thin safe layer over
//! [`for_each_tile`](crate::kernels::parallel::for_each_tile) with
//! [`Grid::row_bands`](crate::kernels::parallel::Grid::row_bands) outputs. For kernels that
//! write more than one result per row (an LSTM step writes its gates, cell, `tanh` of the
//! cell and hidden state; an attention block its `dQ`, `dK` and `dV`), where
//! `for_each_chunk_mut` would need one slice. The chunk size is the caller's, a function of
//! the shape only. With a scratch per thread, use
//! [`for_each_tile_scratch`](crate::kernels::parallel::for_each_tile_scratch) with the
//! outputs of [`row_tiles`].

use crate::kernels::parallel::{for_each_tile, Tiled};
use std::ops::Range;

/// Runs `f(chunk, rows, parts)` for consecutive ranges of `rows_per_chunk` rows (the last
/// may be shorter) out of `rows`, where `parts[i]` is rows `rows` of `outs[i]`, a row-major
/// matrix with `widths[i]` values per row. Chunks run on `threads` threads; each is run
/// exactly once, so `f` may write its parts freely.
///
/// Panics if an output holds fewer than `rows · widths[i]` values.
///
/// # Examples
///
/// ```
/// use om_core::kernels::chunks::for_each_row_chunk;
///
/// let (mut a, mut b) = (vec![0.0f32; 5 * 3], vec![0.0f32; 5]);
/// for_each_row_chunk(2, [&mut a, &mut b], [3, 1], 5, 2, |_, rows, [a, b]| {
///     a.fill(rows.start as f32);
///     b.fill(rows.len() as f32);
/// });
/// assert_eq!(b, [2.0, 2.0, 2.0, 2.0, 1.0]);
/// assert_eq!(&a[6..9], &[2.0; 3]);
/// ```
pub fn for_each_row_chunk<const N: usize>(
    threads: usize,
    outs: [&mut [f32]; N],
    widths: [usize; N],
    rows: usize,
    rows_per_chunk: usize,
    f: impl Fn(usize, Range<usize>, [&mut [f32]; N]) + Sync + Send,
) {
    let per = rows_per_chunk.max(1);
    for_each_tile(threads, row_tiles(outs, widths, rows, rows_per_chunk), |c, tiles| {
        let r = c * per..((c + 1) * per).min(rows);
        f(c, r, tiles.map(|t| t.into_slice()));
    });
}

/// `outs[i]` as `rows` dense rows of `widths[i]` values in chunks of `rows_per_chunk` rows
/// ([`Tiled::row_bands`]): the outputs of [`for_each_row_chunk`], for
/// [`for_each_tile_scratch`](crate::kernels::parallel::for_each_tile_scratch) when each
/// thread also needs a scratch.
///
/// Panics if an output holds fewer than `rows · widths[i]` values.
///
/// # Examples
///
/// ```
/// use om_core::kernels::chunks::row_tiles;
/// use om_core::kernels::parallel::for_each_tile_scratch;
///
/// let (mut a, mut b) = (vec![0.0f32; 4 * 2], vec![0.0f32; 4]);
/// let mut scratch = vec![0.0f32; 2 * 3]; // two threads' parts of 3
/// for_each_tile_scratch(2, row_tiles([&mut a, &mut b], [2, 1], 4, 1), &mut scratch, 3, |r, tiles, part| {
///     let [a, b] = tiles.map(|t| t.into_slice());
///     part[0] = r as f32; // this thread's own
///     a.fill(part[0]);
///     b[0] = 2.0 * part[0];
/// });
/// assert_eq!(b, [0.0, 2.0, 4.0, 6.0]);
/// ```
pub fn row_tiles<'a, const N: usize>(
    outs: [&'a mut [f32]; N],
    widths: [usize; N],
    rows: usize,
    rows_per_chunk: usize,
) -> [Tiled<'a, f32>; N] {
    let mut widths = widths.into_iter();
    outs.map(|o| {
        let w = widths.next().unwrap_or(0);
        let len = o.len();
        assert!(len >= rows * w, "for_each_row_chunk: an output holds {len} values, {rows} rows of {w} need more");
        Tiled::row_bands(o, rows, w, rows_per_chunk)
    })
}

/// The number of chunks of [`for_each_row_chunk`] over `rows` rows: `rows / rows_per_chunk`
/// rounded up (`rows_per_chunk` 0 counts as 1). Size a scratch per thread with it.
pub fn row_chunk_count(rows: usize, rows_per_chunk: usize) -> usize {
    rows.div_ceil(rows_per_chunk.max(1))
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
