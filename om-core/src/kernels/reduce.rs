//! Reductions. Every sum accumulates in f64 in increasing element order and rounds once to
//! f32, so it is exact by construction and independent of the ISA path and thread count.

/// Sum of all values.
pub fn sum_all(x: &[f32]) -> f32 {
    x.iter().fold(0.0f64, |acc, &v| acc + v as f64) as f32
}

/// For `x` viewed as `[outer, len, inner]` (contiguous), sums over the middle axis into
/// `out` (`[outer, inner]`), scaling each sum by `scale` in f64 before rounding.
pub fn sum_axis(x: &[f32], outer: usize, len: usize, inner: usize, scale: f64, out: &mut [f32]) {
    if inner == 1 {
        return sum_rows(&x[..outer * len], len, scale, &mut out[..outer]);
    }
    let mut acc = crate::pool::F64Scratch::zeroed(inner);
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
}

/// Rows summed side by side: one sum per row, `ROWS` independent f64 chains at a time (each
/// still adds its row's elements in order), so the adds overlap instead of waiting on one
/// chain's latency.
const ROWS: usize = 8;

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
        let mut acc = [0.0f64; ROWS];
        for i in 0..len {
            for (a, row) in acc.iter_mut().zip(&rows) {
                *a += row[i] as f64;
            }
        }
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
    use super::*;

    #[test]
    fn row_sums_side_by_side_equal_one_row_at_a_time() {
        for (outer, len) in [(1, 1), (7, 3), (8, 64), (19, 5), (33, 1), (4, 0)] {
            let x: Vec<f32> = (0..outer * len).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.37).collect();
            let mut fast = vec![f32::NAN; outer];
            sum_axis(&x, outer, len, 1, 1.0 / 3.0, &mut fast);
            let slow: Vec<f32> =
                (0..outer).map(|r| (x[r * len..(r + 1) * len].iter().fold(0.0f64, |a, &v| a + v as f64) * (1.0 / 3.0)) as f32).collect();
            assert_eq!(fast.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), slow.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        }
    }
}
