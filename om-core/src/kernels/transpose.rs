//! Transposed copies: [`transpose`] writes the row-major transpose of a (possibly strided)
//! matrix, in square tiles so that both the reads and the writes stay within a few cache
//! lines per tile. It moves values only (no arithmetic), so it cannot change a bit. Used
//! where a GEMM operand is needed transposed (the recurrent weights once per layer call,
//! an attention block's `Kᵀ`, `Vᵀ`, `Pᵀ`), until the GEMM reads transposed operands itself.

/// Side of the square tiles: 16×16 floats is 1 KiB read and 1 KiB written per tile, well
/// inside L1 on any CPU, and a 64-byte line on each side of the copy.
const TILE: usize = 16;

/// `dst[c·rows + r] = src[r·row_stride + c·col_stride]` for `r < rows`, `c < cols`: the
/// `[rows, cols]` matrix read with the given strides, written transposed as a row-major
/// `[cols, rows]` matrix.
///
/// Panics if `dst` holds fewer than `rows · cols` values or `src` is too short.
pub fn transpose(src: &[f32], rows: usize, cols: usize, row_stride: usize, col_stride: usize, dst: &mut [f32]) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(dst.len() >= rows * cols, "transpose: destination too short");
    assert!(src.len() > (rows - 1) * row_stride + (cols - 1) * col_stride, "transpose: source too short");
    for r0 in (0..rows).step_by(TILE) {
        let r1 = (r0 + TILE).min(rows);
        for c0 in (0..cols).step_by(TILE) {
            let c1 = (c0 + TILE).min(cols);
            for c in c0..c1 {
                let out = &mut dst[c * rows + r0..c * rows + r1];
                for (o, r) in out.iter_mut().zip(r0..r1) {
                    *o = src[r * row_stride + c * col_stride];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_definition() {
        for (rows, cols, rs, cs) in [(1, 1, 1, 1), (3, 5, 5, 1), (17, 33, 40, 1), (20, 7, 1, 20), (33, 18, 70, 3)] {
            let src: Vec<f32> = (0..(rows - 1) * rs + (cols - 1) * cs + 1).map(|i| i as f32).collect();
            let mut dst = vec![-1.0f32; rows * cols];
            transpose(&src, rows, cols, rs, cs, &mut dst);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(dst[c * rows + r], src[r * rs + c * cs], "{rows}x{cols} at ({r}, {c})");
                }
            }
        }
    }
}
