//! Typed GEMM operands: [`MatRef`] (a read-only strided matrix view: row-major,
//! column-major — a transposed operand read in place — or any other strides), [`MatMut`]
//! (a row-major output with a row stride) and [`Bias`] (a vector added in the epilogue).
//!
//! Each constructor checks once that every element the view describes lies inside its
//! slice (the kernels then use raw pointers), so a swapped leading dimension is caught at
//! construction instead of reading the wrong elements.

use super::TileBias;

/// A read-only `rows × cols` matrix: element `(i, j)` is
/// `data[i · row_stride + j · col_stride]`.
///
/// Strides may be anything, including 0 (a broadcast row or column); the packers read
/// row-major (`col_stride == 1`) and column-major (`row_stride == 1`) views fastest.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

/// The index one past the last element of a strided view, or `None` on overflow; 0 for an
/// empty view.
fn extent(rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> Option<usize> {
    if rows == 0 || cols == 0 {
        return Some(0);
    }
    (rows - 1).checked_mul(row_stride)?.checked_add((cols - 1).checked_mul(col_stride)?)?.checked_add(1)
}

impl<'a> MatRef<'a> {
    /// The view, or `None` if some element it describes lies outside `data` (or its
    /// index overflows).
    pub fn new(data: &'a [f32], rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> Option<MatRef<'a>> {
        (extent(rows, cols, row_stride, col_stride)? <= data.len()).then_some(MatRef { data, rows, cols, row_stride, col_stride })
    }

    /// A dense row-major view of the first `rows · cols` values of `data`.
    ///
    /// # Panics
    /// If `data` holds fewer than `rows · cols` values.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> MatRef<'a> {
        Self::with_stride(data, rows, cols, cols)
    }

    /// A row-major view whose rows start `row_stride` values apart (a leading dimension).
    ///
    /// # Panics
    /// If the last row does not fit in `data`.
    pub fn with_stride(data: &'a [f32], rows: usize, cols: usize, row_stride: usize) -> MatRef<'a> {
        Self::new(data, rows, cols, row_stride, 1)
            .unwrap_or_else(|| panic!("MatRef: {rows}×{cols} with row stride {row_stride} does not fit in {} values", data.len()))
    }

    /// The transposed view (`cols × rows`, strides swapped); nothing is copied.
    pub fn t(self) -> MatRef<'a> {
        MatRef { rows: self.cols, cols: self.rows, row_stride: self.col_stride, col_stride: self.row_stride, ..self }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Distance between consecutive rows.
    pub fn row_stride(&self) -> usize {
        self.row_stride
    }

    /// Distance between consecutive columns.
    pub fn col_stride(&self) -> usize {
        self.col_stride
    }

    /// The underlying slice (every element of the view lies inside it).
    pub(super) fn data(&self) -> &'a [f32] {
        self.data
    }

    /// Whether the rows are contiguous (`col_stride == 1`, or a single column).
    pub(super) fn rows_contiguous(&self) -> bool {
        self.col_stride == 1 || self.cols <= 1
    }

    /// Whether the columns are contiguous (`row_stride == 1`, or a single row).
    pub(super) fn cols_contiguous(&self) -> bool {
        self.row_stride == 1 || self.rows <= 1
    }

    /// Element `(i, j)` (bounds checked by the slice).
    pub(super) fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.row_stride + j * self.col_stride]
    }
}

/// A writable row-major `rows × cols` matrix: element `(i, j)` is `data[i · row_stride + j]`.
/// Rows never overlap (`row_stride ≥ cols` whenever there are two rows or more).
#[derive(Debug)]
pub struct MatMut<'a> {
    data: &'a mut [f32],
    rows: usize,
    cols: usize,
    row_stride: usize,
}

impl<'a> MatMut<'a> {
    /// The view, or `None` if its rows would overlap or the last row does not fit in `data`.
    pub fn new(data: &'a mut [f32], rows: usize, cols: usize, row_stride: usize) -> Option<MatMut<'a>> {
        let fits = extent(rows, cols, row_stride, 1)? <= data.len();
        let disjoint = rows <= 1 || cols == 0 || row_stride >= cols;
        (fits && disjoint).then_some(MatMut { data, rows, cols, row_stride })
    }

    /// A dense row-major view of the first `rows · cols` values of `data`.
    ///
    /// # Panics
    /// If `data` holds fewer than `rows · cols` values.
    pub fn row_major(data: &'a mut [f32], rows: usize, cols: usize) -> MatMut<'a> {
        Self::with_stride(data, rows, cols, cols)
    }

    /// A row-major view whose rows start `row_stride` values apart (a leading dimension).
    ///
    /// # Panics
    /// If the rows overlap or the last row does not fit in `data`.
    pub fn with_stride(data: &'a mut [f32], rows: usize, cols: usize, row_stride: usize) -> MatMut<'a> {
        let len = data.len();
        Self::new(data, rows, cols, row_stride)
            .unwrap_or_else(|| panic!("MatMut: {rows}×{cols} with row stride {row_stride} does not fit in {len} values"))
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Distance between consecutive rows.
    pub fn row_stride(&self) -> usize {
        self.row_stride
    }

    /// The slice from the first to the last element of the view (empty for an empty view).
    pub(super) fn span(&mut self) -> &mut [f32] {
        let end = extent(self.rows, self.cols, self.row_stride, 1).unwrap_or(0);
        &mut self.data[..end]
    }

    /// Row `i` (its `cols` values).
    pub(super) fn row_mut(&mut self, i: usize) -> &mut [f32] {
        &mut self.data[i * self.row_stride..][..self.cols]
    }
}

/// A vector added to every output after its whole k accumulation (`C = A·B + bias`), so
/// the result has the bits of the product followed by a separate broadcast add.
#[derive(Clone, Copy, Debug)]
pub enum Bias<'a> {
    /// `C[i][j] += bias[j]` (length `cols` of C): a linear layer's bias.
    PerCol(&'a [f32]),
    /// `C[i][j] += bias[i]` (length `rows` of C): a convolution's bias over output channels.
    PerRow(&'a [f32]),
}

impl Bias<'_> {
    /// Adds the bias to `out`, the columns `col..col + out.len()` of row `row` of C.
    pub(super) fn add_to_row(&self, row: usize, col: usize, out: &mut [f32]) {
        match *self {
            Bias::PerCol(b) => {
                let len = out.len();
                for (o, &v) in out.iter_mut().zip(&b[col..col + len]) {
                    *o += v;
                }
            }
            Bias::PerRow(b) => {
                let v = b[row];
                out.iter_mut().for_each(|o| *o += v);
            }
        }
    }

    /// The values of the tile of C at `row..row + rows`, `col..col + cols`, for a register
    /// kernel to add before its store (bounds checked here).
    pub(super) fn for_tile(&self, row: usize, rows: usize, col: usize, cols: usize) -> TileBias {
        match *self {
            Bias::PerCol(b) => TileBias::Cols(b[col..col + cols].as_ptr()),
            Bias::PerRow(b) => TileBias::Rows(b[row..row + rows].as_ptr()),
        }
    }

    /// Checks the length against a `rows × cols` output.
    pub(super) fn check(&self, rows: usize, cols: usize) {
        match *self {
            Bias::PerCol(b) => assert_eq!(b.len(), cols, "gemm: per-column bias needs {cols} values"),
            Bias::PerRow(b) => assert_eq!(b.len(), rows, "gemm: per-row bias needs {rows} values"),
        }
    }
}
