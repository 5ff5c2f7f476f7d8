//! Reductions. Every sum accumulates in f64 in increasing element order and rounds once to
//! f32, so it is exact by construction and independent of the ISA path and thread count.
//!
//! [`sum_view`] sums a strided view in place, without gathering it: an expanded view
//! (stride 0) may hold far more elements than memory, and a run of one repeated value is
//! added by [`repeat_add`] in O(binades) steps with the very bits of the element-by-element
//! sum.

use crate::compute::Settings;
use crate::kernels::norm::on_path;
use crate::kernels::parallel::for_each_chunk_mut;
use crate::layout::{for_each_offset, for_each_row};

/// The 52 mantissa bits of an f64.
const MANTISSA: u64 = (1 << 52) - 1;

/// `s` after `n` sequential f64 additions of `v` (`for _ in 0..n { s += v }`), bit for bit,
/// in a number of steps bounded by the binades crossed rather than by `n`.
///
/// Within one binade of grid `u` the sum moves by a constant `d` per step: `s` is a multiple
/// of `u`, so `fl(s + v) - s` depends only on `v` modulo `u`, except for a tie, which rounds
/// to even; once `s` itself was rounded on that grid it is even and stays even. So after two
/// literal steps inside a binade, the run of steps that keeps every sum at least one grid
/// unit inside the binade is taken in one stride.
pub fn repeat_add(mut s: f64, v: f64, mut n: u64) -> f64 {
    let head = |b: u64| b >> 52; // sign and exponent
    loop {
        if n == 0 {
            return s;
        }
        let prev = s;
        s += v;
        n -= 1;
        if n == 0 {
            return s;
        }
        if !s.is_finite() {
            // inf + finite stays; inf + -inf is NaN and NaN stays: one more step is final.
            return s + v;
        }
        let next = s + v;
        if next == s {
            return s; // a fixed point: every further step leaves `s` alone
        }
        let (bs, bn) = (s.to_bits(), next.to_bits());
        if head(prev.to_bits()) != head(bs) || head(bn) != head(bs) {
            continue; // the binade changes: literal steps (subnormals form one exact binade)
        }
        let (m, mn) = (bs & MANTISSA, bn & MANTISSA);
        let (k, m_end) = if mn > m {
            let d = mn - m;
            let k = ((MANTISSA - m) / d).min(n);
            (k, m + k * d)
        } else {
            let d = m - mn;
            let k = (m.saturating_sub(1) / d).min(n);
            (k, m - k * d)
        };
        s = f64::from_bits((bs & !MANTISSA) | m_end);
        n -= k;
    }
}

/// The f64 sum of one strided run (`len` values `step` apart from `start`), continuing `s`.
fn add_run(s: f64, src: &[f32], start: usize, len: usize, step: usize) -> f64 {
    if step == 0 {
        return repeat_add(s, src[start] as f64, len as u64);
    }
    (0..len).fold(s, |a, i| a + src[start + i * step] as f64)
}

/// Sums of more than this many elements are not taken as a running f64 sum: past 2^53 a
/// running sum of ones stops growing (2^53 + 1 rounds back to 2^53), so such a sum (only
/// an expanded view holds that many elements) is accumulated by `Wide` instead.
pub const EXACT_RUN_LIMIT: u64 = 1 << 53;

/// A double-f64 accumulator (Knuth's two-sum: `hi + lo` holds the running sum to ~106 bits)
/// for sums of more than [`EXACT_RUN_LIMIT`] elements: a repeated value `v` taken `n` times
/// is added as `v·n` split into products that f64 holds exactly (f32 `v` has 24 significant
/// bits, each part of `n` at most 29), so 2^60 ones sum to 2^60 and their mean to 1.
#[derive(Clone, Copy, Default)]
struct Wide {
    hi: f64,
    lo: f64,
}

impl Wide {
    fn add(&mut self, x: f64) {
        let s = self.hi + x;
        let bb = s - self.hi;
        let err = (self.hi - (s - bb)) + (x - bb);
        self.hi = s;
        self.lo += err;
        // Renormalise so `lo` stays far below `hi`.
        let t = self.hi + self.lo;
        self.lo -= t - self.hi;
        self.hi = t;
    }

    fn add_repeated(&mut self, v: f64, n: u64) {
        const PART: u32 = 29;
        let mask = (1u64 << PART) - 1;
        for k in (0..3).rev() {
            let part = (n >> (k * PART)) & mask;
            if part != 0 {
                // Exact: 24 + 29 significant bits, scaled by a power of two.
                self.add(v * part as f64 * 2f64.powi((k * PART) as i32));
            }
        }
    }

    fn add_run(&mut self, src: &[f32], start: usize, len: usize, step: usize) {
        if step == 0 {
            self.add_repeated(src[start] as f64, len as u64);
        } else {
            (0..len).for_each(|i| self.add(src[start + i * step] as f64));
        }
    }

    /// The sum scaled by `scale` (a power of two or `1/n`), rounded to f32.
    fn scaled(self, scale: f64) -> f32 {
        (self.hi * scale + self.lo * scale) as f32
    }
}

/// Sums the strided view (`shape`, `strides`, `offset`) of `src` over `axis` (all axes when
/// `None`) into `out` (the other axes in row-major order), each f64 sum scaled by `scale`
/// before rounding: the bits of [`sum_axis`] on the gathered view, without gathering it.
/// A sum of more than [`EXACT_RUN_LIMIT`] elements (an expanded view) is accumulated
/// without saturating (see `Wide`).
pub fn sum_view(src: &[f32], shape: &[usize], strides: &[usize], offset: usize, axis: Option<usize>, scale: f64, out: &mut [f32]) {
    let empty = shape.contains(&0);
    let count = |dims: &[usize]| dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64)).unwrap_or(u64::MAX);
    match axis {
        None if !empty && count(shape) > EXACT_RUN_LIMIT => {
            let mut w = Wide::default();
            for_each_row(shape, [strides], [offset], |[start], len, [step]| w.add_run(src, start, len, step));
            out[0] = w.scaled(scale);
        }
        None => {
            let mut s = 0.0f64;
            if !empty {
                for_each_row(shape, [strides], [offset], |[start], len, [step]| s = add_run(s, src, start, len, step));
            }
            out[0] = (s * scale) as f32;
        }
        Some(a) => {
            let (len, step) = (shape[a], strides[a]);
            let mut rest_shape = shape.to_vec();
            let mut rest_strides = strides.to_vec();
            rest_shape.remove(a);
            rest_strides.remove(a);
            if rest_shape.contains(&0) {
                return;
            }
            let wide = len as u64 > EXACT_RUN_LIMIT;
            let mut i = 0;
            for_each_offset(&rest_shape, &rest_strides, offset, |base| {
                out[i] = if wide {
                    let mut w = Wide::default();
                    w.add_run(src, base, len, step);
                    w.scaled(scale)
                } else {
                    let s = if len == 0 { 0.0 } else { add_run(0.0, src, base, len, step) };
                    (s * scale) as f32
                };
                i += 1;
            });
        }
    }
}

/// For `x` viewed as `[outer, len, inner]` (contiguous), sums over the middle axis into
/// `out` (`[outer, inner]`), scaling each sum by `scale` in f64 before rounding. Fails
/// if the `inner` doubles of scratch are refused (see [`crate::pool::F64Scratch`]).
pub fn sum_axis(x: &[f32], outer: usize, len: usize, inner: usize, scale: f64, out: &mut [f32]) -> crate::Result<()> {
    if inner == 1 {
        sum_rows(&x[..outer * len], len, scale, &mut out[..outer]);
        return Ok(());
    }
    let mut acc = crate::pool::F64Scratch::try_zeroed(inner)?;
    for o in 0..outer {
        let a = acc.values();
        a.fill(0.0);
        let base = o * len * inner;
        for l in 0..len {
            let row = &x[base + l * inner..base + (l + 1) * inner];
            for (s, &v) in a.iter_mut().zip(row) {
                *s += v as f64;
            }
        }
        for (dst, &s) in out[o * inner..(o + 1) * inner].iter_mut().zip(a.iter()) {
            *dst = (s * scale) as f32;
        }
    }
    Ok(())
}

/// Most columns of [`column_sums`] per chunk of the thread team (their f64 sums, 4 KiB, stay
/// in L1 while the rows stream through). Each chunk walks the rows in order and reads its
/// columns of each row contiguously: half the columns (two chunks for two threads), at most
/// this many. With 64 columns per chunk, a `[1024, 1024]` gradient was read 256 bytes per
/// 4 KiB row, a page per read, which the hardware prefetchers do not follow (3% of the
/// encoder step at 1 thread, Intel Xeon, perf). The chunks depend on the shape only, and
/// columns are independent: the bits never depend on them.
const COLUMN_SUM_CHUNK: usize = 512;

/// The column sums of the `[rows, cols]` row-major `g` into `out` (`cols` values): each
/// column accumulated in f64 over the rows in increasing order from `+0.0` and rounded once
/// (a bias gradient: the bits of summing the broadcast dimension away). The columns are
/// shared among the thread team; the per-row additions run on the machine's widest lanes
/// (`settings.path`), each lane one column's f64 chain, so every path gives the same bits.
///
/// # Panics
/// If `g` holds fewer than `rows · cols` values or `out` is not `cols` long.
///
/// # Examples
///
/// ```
/// use om_core::compute::Compute;
/// use om_core::kernels::reduce::column_sums;
/// let g = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]; // [[1, 2, 3], [4, 5, 6]]
/// let mut out = [0.0f32; 3];
/// column_sums(Compute::settings(), &g, 2, 3, &mut out);
/// assert_eq!(out, [5.0, 7.0, 9.0]);
/// ```
pub fn column_sums(settings: Settings, g: &[f32], rows: usize, cols: usize, out: &mut [f32]) {
    assert!(
        out.len() == cols && g.len() >= rows.saturating_mul(cols),
        "column_sums: {} values for {rows} × {cols}, {} sums",
        g.len(),
        out.len()
    );
    if cols == 0 {
        return;
    }
    let per = cols.div_ceil(2).next_multiple_of(16).min(COLUMN_SUM_CHUNK);
    for_each_chunk_mut(settings.threads, out, per, |i, o| {
        let c0 = i * per;
        let mut acc = [0.0f64; COLUMN_SUM_CHUNK];
        let acc = &mut acc[..o.len()];
        on_path!(settings.path, _isa, (g: &'a [f32], acc: &'a mut [f64], c0: usize, cols: usize, rows: usize) {
            for row in g.chunks_exact(cols).take(rows) {
                add_widened(acc, &row[c0..c0 + acc.len()]);
            }
        });
        o.iter_mut().zip(acc.iter()).for_each(|(o, &a)| *o = a as f32);
    });
}

/// `acc[i] += v[i] as f64` for every `i`: one f64 addition per element (the compiler
/// vectorises it inside the caller's instruction set; each lane is the scalar addition).
#[inline(always)]
fn add_widened(acc: &mut [f64], v: &[f32]) {
    acc.iter_mut().zip(v).for_each(|(a, &v)| *a += v as f64);
}

/// Rows summed side by side: one sum per row, `ROWS` independent f64 chains at a time (each
/// still adds its row's elements in order), so the adds overlap instead of waiting on one
/// chain's latency. Also the lockstep of the norms (`norm.rs`) and the convolution's
/// channel sums (`conv/mod.rs`). Measured 2026-12-02 on an Intel Xeon model 167 (`sum_axis`
/// over rows of 64, 256 and 4096 floats, 1 thread): 4 rows took 0.999–1.03× and 16 rows
/// 1.007–1.011× the time of 8 (medians of 5–7 interleaved runs; docs/performance.md,
/// "Tuning constants").
pub(crate) const ROWS: usize = 8;

/// `acc[k] + Σ rows[k][i] as f64` for `K` equally long rows, side by side: step `i` adds
/// element `i` of every row, so each row's sum is the sequential f64 sum of its elements
/// in increasing order (the same bits as one row at a time) while the `K` chains overlap.
/// The one side-by-side f64 row sum of the kernels (reductions, norms, convolution bias).
///
/// Panics if a row is shorter than the first.
#[inline(always)]
pub(crate) fn sum_side_by_side<const K: usize>(rows: [&[f32]; K], acc: [f64; K]) -> [f64; K] {
    fold_side_by_side(rows, acc, |s, _, v| s + v as f64)
}

/// `K` folds over `K` equally long rows, side by side: `acc[k] = f(acc[k], k, rows[k][i])`
/// for `i` in increasing order ([`sum_side_by_side`] with any per-element step).
///
/// Panics if a row is shorter than the first.
#[inline(always)]
pub(crate) fn fold_side_by_side<const K: usize>(rows: [&[f32]; K], mut acc: [f64; K], f: impl Fn(f64, usize, f32) -> f64) -> [f64; K] {
    let len = rows[0].len();
    let rows = rows.map(|r| &r[..len]);
    #[allow(clippy::needless_range_loop)] // `i` indexes K rows in lockstep
    for i in 0..len {
        for k in 0..K {
            acc[k] = f(acc[k], k, rows[k][i]);
        }
    }
    acc
}

/// `out[r] = scale · Σ x[r·len .. (r+1)·len]` for contiguous rows of `len` (`len` may be 0).
fn sum_rows(x: &[f32], len: usize, scale: f64, out: &mut [f32]) {
    if len == 0 {
        out.fill(0.0);
        return;
    }
    let mut blocks = x.chunks_exact(ROWS * len);
    let mut outs = out.chunks_exact_mut(ROWS);
    for (block, dst) in (&mut blocks).zip(&mut outs) {
        let rows: [&[f32]; ROWS] = std::array::from_fn(|r| &block[r * len..(r + 1) * len]);
        let acc = sum_side_by_side(rows, [0.0f64; ROWS]);
        for (d, a) in dst.iter_mut().zip(acc) {
            *d = (a * scale) as f32;
        }
    }
    for (row, d) in blocks.remainder().chunks_exact(len).zip(outs.into_remainder()) {
        *d = (row.iter().fold(0.0f64, |a, &v| a + v as f64) * scale) as f32;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sums_of_more_than_2_53_elements_do_not_saturate() {
        let mut out = [0.0f32];
        let big = 1usize << 30;
        sum_view(&[1.0], &[big, big], &[0, 0], 0, None, 1.0, &mut out);
        assert_eq!(out[0], 2f32.powi(60));
        sum_view(&[1.0], &[big, big], &[0, 0], 0, None, 1.0 / 2f64.powi(60), &mut out);
        assert_eq!(out[0], 1.0);
        sum_view(&[0.1], &[big, big], &[0, 0], 0, None, 1.0, &mut out);
        assert_eq!(out[0], (0.1f32 as f64 * 2f64.powi(60)) as f32);
        let mut two = [0.0f32; 2];
        sum_view(&[3.0, -0.5], &[1 << 60, 2], &[0, 1], 0, Some(0), 1.0, &mut two);
        assert_eq!(two, [3.0 * 2f32.powi(60), -0.5 * 2f32.powi(60)]);
        // Ordinary sizes keep the running f64 sum's bits (saturation below 2^53 is not reached).
        sum_view(&[1.0], &[1 << 20], &[0], 0, None, 1.0, &mut out);
        assert_eq!(out[0], 2f32.powi(20));
    }

    use super::*;

    /// A small deterministic generator (SplitMix64).
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    #[test]
    fn repeated_adds_match_the_literal_loop_bit_for_bit() {
        let mut st = 7u64;
        let literal = |s: f64, v: f64, n: u64| (0..n).fold(s, |a, _| a + v);
        // Ties at every scale (v = odd halves of a grid unit), signs mixed, starts far away.
        let mut cases: Vec<(f64, f64, u64)> = vec![
            (0.0, 1.0, 100_000),
            (0.0, 0.5, 70_000),
            (2f64.powi(52), 0.5, 10_000),
            (2f64.powi(52), 1.5, 10_000),
            (2f64.powi(53) - 4.0, 1.5, 10_000),
            (1e6, -0.75, 3_000_000),
            (-3.0, 1.0, 10),
            (0.0, -0.0, 5),
            (f64::MAX, f64::MAX, 3),
            (1.0, f64::NAN, 3),
            (0.0, 3.0e-39, 10_000),
            (0.0, 5e-324, 1 << 20),
            (1e-310, -3e-323, 1 << 20),
            (2f64.powi(-1022) - 2e-320, 1e-323, 1 << 20),
        ];
        for _ in 0..400 {
            let v = f32::from_bits(next(&mut st) as u32 & 0xbfff_ffff) as f64; // finite, |v| < 2
            let scale = 2f64.powi((next(&mut st) % 80) as i32 - 20);
            let s0 = match next(&mut st) % 3 {
                0 => 0.0,
                1 => v * scale,
                _ => -(v * scale) * 1.000_000_1,
            };
            cases.push((s0, v, next(&mut st) % 50_000));
        }
        for (s0, v, n) in cases {
            let (fast, slow) = (repeat_add(s0, v, n), literal(s0, v, n));
            assert_eq!(fast.to_bits(), slow.to_bits(), "{s0} + {v} x {n}: {fast} vs {slow}");
        }
        // Summing 1.0 2^60 times saturates at 2^53 (2^53 + 1 rounds back to 2^53).
        assert_eq!(repeat_add(0.0, 1.0, 1 << 60), 2f64.powi(53));
        assert_eq!(repeat_add(0.0, 5e-324, 1 << 62), 2f64.powi(-1021));
    }

    #[test]
    fn view_sums_match_gathered_sums() {
        // [3, 1, 4] expanded to [3, 5, 4] with a transposed inner pair, summed every way.
        let src: Vec<f32> = (0..12).map(|i| (i as f32 - 5.5) * 0.37).collect();
        let shape = [3usize, 5, 4];
        let strides = [4usize, 0, 1];
        let mut gathered = vec![];
        for_each_offset(&shape, &strides, 0, |o| gathered.push(src[o]));
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let mut all = [0.0f32];
        sum_view(&src, &shape, &strides, 0, None, 1.0 / 60.0, &mut all);
        let mut want = [0.0f32];
        sum_axis(&gathered, 1, 60, 1, 1.0 / 60.0, &mut want).unwrap();
        assert_eq!(bits(&all), bits(&want));
        for a in 0..3 {
            let outer: usize = shape[..a].iter().product();
            let inner: usize = shape[a + 1..].iter().product();
            let mut got = vec![0.0f32; 60 / shape[a]];
            sum_view(&src, &shape, &strides, 0, Some(a), 1.0, &mut got);
            let mut want = vec![0.0f32; 60 / shape[a]];
            sum_axis(&gathered, outer, shape[a], inner, 1.0, &mut want).unwrap();
            assert_eq!(bits(&got), bits(&want), "axis {a}");
        }
    }

    /// The side-by-side sum continues each row's own sequential f64 sum from its
    /// accumulator (as the norms and the convolution's channel sums use it): magnitudes
    /// from 1e-4 to 1e4 make any other order or grouping change the bits.
    #[test]
    fn side_by_side_sums_continue_each_rows_own_sequence() {
        fn check<const K: usize>(len: usize, seed: u64) {
            let mut st = seed;
            let mut value = || {
                let r = next(&mut st);
                ((r % 2001) as f32 - 1000.0) * 10f32.powi((r >> 32) as i32 % 9 - 4)
            };
            let data: Vec<Vec<f32>> = (0..K).map(|_| (0..len).map(|_| value()).collect()).collect();
            let acc: [f64; K] = std::array::from_fn(|k| value() as f64 / 3.0 + k as f64);
            let rows: [&[f32]; K] = std::array::from_fn(|k| &data[k][..]);
            let got = sum_side_by_side(rows, acc);
            let sq = fold_side_by_side(rows, acc, |s, k, v| s + (v as f64 - k as f64) * (v as f64 - k as f64));
            for k in 0..K {
                let want = data[k].iter().fold(acc[k], |s, &v| s + v as f64);
                assert_eq!(got[k].to_bits(), want.to_bits(), "K {K} len {len} row {k}");
                let want = data[k].iter().fold(acc[k], |s, &v| s + (v as f64 - k as f64) * (v as f64 - k as f64));
                assert_eq!(sq[k].to_bits(), want.to_bits(), "K {K} len {len} row {k} (fold)");
            }
        }
        for (len, seed) in [(0, 1), (1, 2), (7, 3), (64, 4), (1000, 5)] {
            check::<{ ROWS }>(len, seed);
            check::<1>(len, seed);
            check::<3>(len, seed);
        }
    }

    #[test]
    fn row_sums_side_by_side_equal_one_row_at_a_time() {
        for (outer, len) in [(1, 1), (7, 3), (8, 64), (19, 5), (33, 1), (4, 0)] {
            let x: Vec<f32> = (0..outer * len).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.37).collect();
            let mut fast = vec![f32::NAN; outer];
            sum_axis(&x, outer, len, 1, 1.0 / 3.0, &mut fast).unwrap();
            let slow: Vec<f32> =
                (0..outer).map(|r| (x[r * len..(r + 1) * len].iter().fold(0.0f64, |a, &v| a + v as f64) * (1.0 / 3.0)) as f32).collect();
            assert_eq!(fast.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), slow.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        }
    }
    /// Every column's f64 sum over the rows in order, rounded once, on every path at 1 and 2
    /// threads; the shapes cover chunk edges (columns not a multiple of the lane width or of
    /// 16, more columns than a chunk holds), NaN, ±∞, −0 and subnormals.
    #[test]
    fn column_sums_are_the_sequential_f64_sums_on_every_path() {
        let mut st = 11u64;
        let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 1e-40, -3e-39];
        for &(rows, cols) in &[(1, 1), (3, 7), (17, 33), (64, 256), (5, 1030), (9, 2049), (0, 5)] {
            let g: Vec<f32> = (0..rows * cols)
                .map(|i| {
                    if i % 97 == 5 {
                        specials[i % specials.len()]
                    } else {
                        f32::from_bits((next(&mut st) >> 32) as u32 & 0x807f_ffff | 0x3f00_0000) * 3.0
                    }
                })
                .collect();
            let reference: Vec<u32> =
                (0..cols).map(|c| ((0..rows).fold(0.0f64, |a, r| a + g[r * cols + c] as f64) as f32).to_bits()).collect();
            for path in crate::compute::KernelPath::supported() {
                for threads in [1, 2] {
                    let settings = Settings { mode: crate::compute::Mode::Fast, threads, path };
                    let mut out = vec![1.0f32; cols];
                    column_sums(settings, &g, rows, cols, &mut out);
                    let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(got, reference, "{rows}×{cols} {path:?} threads {threads}");
                }
            }
        }
    }
}
