//! A B operand held in the GEMM's own packed layout ([`PackedB`]), written once by the
//! caller — row by row ([`PackedRow`]), or packed once from a view for several products —
//! and then read by every chunk of a product ([`gemm_packed`](super::gemm_packed)) instead
//! of each chunk packing its columns. (Tried for the convolution's forward, its unfolding
//! written straight into it: slower than unfolding to `[K, P]` and packing, so not used
//! there; figures in `docs/kernels-gemm.md`, "Caller-packed operands".)
//!
//! The layout ([`PackedLayout`]) is the one the chunks pack into themselves: k is cut
//! into the product's k-blocks (equal blocks of at most the path's `kc` steps, the last
//! shorter), each block into micro-panels of NR columns (a zero-padded last panel), a
//! panel holding its steps one after the other, NR values each. So row `i` of B (step
//! `i`) is a run of NR values in every panel of its block, `NR · kb` apart
//! ([`PackedRow`]). The layout depends on the kernel path, the mode (through the path's
//! tile) and `k`, `n` only; the values are copied, never combined, so the product has the
//! bits of [`gemm`](super::gemm) on the same values.

use super::operand::MatRef;
use super::pack::{pack_b, BPanels};
use super::Kernel;
use crate::compute::Settings;
use std::ops::Range;

/// Where the GEMM reads each element of a `k × n` B operand for products at given
/// settings (see the module docs); ask for it with [`PackedLayout::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedLayout {
    k: usize,
    n: usize,
    /// Columns per micro-panel (the tile width of the path).
    nr: usize,
    /// Steps per k-block (the last block may be shorter).
    kc: usize,
}

impl PackedLayout {
    /// The layout of a `k × n` B for products at `settings` (any `m`): the path's tile
    /// width and the product's k-blocks.
    pub fn new(settings: Settings, k: usize, n: usize) -> PackedLayout {
        let kernel = Kernel::select(settings.path, settings.mode);
        debug_assert!(kernel.nr.is_power_of_two(), "PackedRow's runs need a power-of-two tile width");
        PackedLayout { k, n, nr: kernel.nr, kc: super::block_steps(kernel.kc, k) }
    }

    /// Rows (steps) of B.
    pub fn rows(&self) -> usize {
        self.k
    }

    /// Columns of B.
    pub fn cols(&self) -> usize {
        self.n
    }

    /// Floats the packed operand takes: `k` rows of `n` rounded up to whole panels.
    pub fn len(&self) -> usize {
        self.k.saturating_mul(self.padded_cols())
    }

    /// Whether the operand is empty (`k` or `n` is 0).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `n` rounded up to whole micro-panels.
    fn padded_cols(&self) -> usize {
        self.n.div_ceil(self.nr) * self.nr
    }

    /// The k-block holding step `i`: its first step and its length.
    fn block_of(&self, i: usize) -> (usize, usize) {
        let pc = i / self.kc * self.kc;
        (pc, self.kc.min(self.k - pc))
    }

    /// Range of the packed operand holding the panels of columns `col..col + cols` (`col` a
    /// multiple of NR) of the k-block starting at step `pc`, `kb` steps long.
    pub(super) fn panels(&self, pc: usize, kb: usize, col: usize, cols: usize) -> Range<usize> {
        debug_assert!(col.is_multiple_of(self.nr) && pc.is_multiple_of(self.kc));
        let start = pc * self.padded_cols() + col * kb;
        start..start + cols.div_ceil(self.nr) * self.nr * kb
    }
}

/// A `k × n` B operand in the GEMM's packed layout ([`PackedLayout`]), in the caller's
/// buffer: filled row by row ([`PackedB::row_mut`]) or packed from a view
/// ([`PackedB::pack`]), then multiplied with [`gemm_packed`](super::gemm_packed) by as
/// many products (and chunks) as need it.
///
/// Every element `(i, j)`, `j < n`, must be written before the product: the buffer is not
/// cleared (only the padding of the last panel is zeroed, by [`PackedB::new`]).
#[derive(Debug)]
pub struct PackedB<'a> {
    layout: PackedLayout,
    data: &'a mut [f32],
}

impl<'a> PackedB<'a> {
    /// The operand in `data` (its first [`PackedLayout::len`] floats), with the padding
    /// columns of the last panel zeroed.
    ///
    /// # Panics
    /// If `data` is shorter than the layout.
    pub fn new(layout: PackedLayout, data: &'a mut [f32]) -> PackedB<'a> {
        let len = layout.len();
        assert!(data.len() >= len, "PackedB: the layout takes {len} floats, the buffer has {}", data.len());
        let mut b = PackedB { layout, data: &mut data[..len] };
        let (n, pad) = (layout.n, layout.padded_cols());
        if pad > n {
            for i in 0..layout.k {
                b.row_mut(i).fill_padding(n..pad);
            }
        }
        b
    }

    /// Packs the view `b` (`k × n`, any strides) into `data`, as a chunk of a product
    /// packs its part of it: B packed once for every chunk of the products that use it.
    ///
    /// # Panics
    /// If the view's shape is not the layout's, or `data` is shorter than the layout.
    pub fn pack(layout: PackedLayout, b: MatRef, data: &'a mut [f32]) -> PackedB<'a> {
        assert!(
            b.rows() == layout.k && b.cols() == layout.n,
            "PackedB: a {}×{} view for a {}×{} layout",
            b.rows(),
            b.cols(),
            layout.k,
            layout.n
        );
        let len = layout.len();
        assert!(data.len() >= len, "PackedB: the layout takes {len} floats, the buffer has {}", data.len());
        let (k, n, nr) = (layout.k, layout.n, layout.nr);
        for pc in (0..k).step_by(layout.kc.max(1)) {
            let kb = layout.kc.min(k - pc);
            pack_b(&b, BPanels { nr, col: 0, cols: n, first: 0, pc, kb }, &mut data[layout.panels(pc, kb, 0, n)]);
        }
        PackedB { layout, data: &mut data[..len] }
    }

    /// The layout.
    pub fn layout(&self) -> PackedLayout {
        self.layout
    }

    /// Row `i` (step `i`) of B, to write.
    ///
    /// # Panics
    /// If `i >= k`.
    pub fn row_mut(&mut self, i: usize) -> PackedRow<'_> {
        let l = self.layout;
        assert!(i < l.k, "PackedB: row {i} of {}", l.k);
        let (pc, kb) = l.block_of(i);
        let start = pc * l.padded_cols() + (i - pc) * l.nr;
        let stride = l.nr * kb;
        let panels = l.padded_cols() / l.nr;
        let end = if panels == 0 { start } else { start + (panels - 1) * stride + l.nr };
        PackedRow { data: &mut self.data[start..end], width: l.nr, stride, cols: l.n }
    }

    /// Calls `f(i, row)` for each row `i` of `rows` in order, with row `i` to write (as
    /// [`PackedB::row_mut`], stepping from row to row instead of locating each).
    ///
    /// # Panics
    /// If `rows` reaches past B.
    #[inline]
    pub fn for_each_row_mut(&mut self, rows: Range<usize>, mut f: impl FnMut(usize, PackedRow)) {
        let l = self.layout;
        assert!(rows.end <= l.k, "PackedB: rows {rows:?} of {}", l.k);
        let (pad, nr) = (l.padded_cols(), l.nr);
        if rows.is_empty() || pad == 0 {
            rows.for_each(|i| f(i, PackedRow { data: &mut [], width: nr, stride: 0, cols: 0 }));
            return;
        }
        let (mut pc, mut kb) = l.block_of(rows.start);
        for i in rows {
            if i == pc + kb {
                (pc, kb) = (i, l.kc.min(l.k - i));
            }
            let start = pc * pad + (i - pc) * nr;
            let stride = nr * kb;
            let end = start + (pad / nr - 1) * stride + nr;
            f(i, PackedRow { data: &mut self.data[start..end], width: nr, stride, cols: l.n });
        }
    }

    /// Element `(i, j)`.
    ///
    /// # Panics
    /// If it lies outside B.
    pub fn at(&self, i: usize, j: usize) -> f32 {
        let l = self.layout;
        assert!(i < l.k && j < l.n, "PackedB: ({i}, {j}) outside {}×{}", l.k, l.n);
        let (pc, kb) = l.block_of(i);
        self.data[pc * l.padded_cols() + j / l.nr * l.nr * kb + (i - pc) * l.nr + j % l.nr]
    }

    /// The packed values.
    pub(super) fn data(&self) -> &[f32] {
        self.data
    }
}

/// One row of a matrix stored as runs of `width` consecutive columns (a power of two),
/// `stride` apart: a row of a [`PackedB`] (runs of NR columns, one per micro-panel) or a
/// plain row-major row ([`PackedRow::contiguous`]: one run). Writers address columns; the
/// split into runs is this type's (shifts and masks, no division: rows of a few dozen
/// values are written a few runs at a time, so the per-call work counts).
#[derive(Debug)]
pub struct PackedRow<'a> {
    data: &'a mut [f32],
    width: usize,
    stride: usize,
    cols: usize,
}

impl<'a> PackedRow<'a> {
    /// A contiguous row (`data.len()` columns).
    #[inline]
    pub fn contiguous(data: &'a mut [f32]) -> PackedRow<'a> {
        let cols = data.len();
        // One run: every column lies in the first `width`.
        let width = cols.max(1).next_power_of_two();
        PackedRow { data, width, stride: width, cols }
    }

    /// Columns of the row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Calls `f(j, run)` for each stored run of the columns `cols`, in increasing order:
    /// `run` holds columns `j..j + run.len()`.
    ///
    /// # Panics
    /// If `cols` reaches past the row.
    #[inline]
    pub fn for_each_run(&mut self, cols: Range<usize>, mut f: impl FnMut(usize, &mut [f32])) {
        assert!(cols.start <= cols.end && cols.end <= self.cols, "PackedRow: columns {cols:?} of {}", self.cols);
        self.runs(cols, &mut f);
    }

    /// [`PackedRow::for_each_run`] without the check against the row's columns (the
    /// padding of a packed row lies past them).
    #[inline]
    fn runs(&mut self, cols: Range<usize>, f: &mut impl FnMut(usize, &mut [f32])) {
        let (shift, mask) = (self.width.trailing_zeros(), self.width - 1);
        let mut j = cols.start;
        while j < cols.end {
            let (piece, off) = (j >> shift, j & mask);
            let len = (self.width - off).min(cols.end - j);
            let at = piece * self.stride + off;
            f(j, &mut self.data[at..at + len]);
            j += len;
        }
    }

    /// Writes `src` to columns `col..col + src.len()`.
    #[inline]
    pub fn write(&mut self, col: usize, src: &[f32]) {
        // The tile widths: whole runs copied at a constant length (a few vector moves
        // instead of a `memcpy` call per run).
        match self.width {
            32 => self.write_runs::<32>(col, src),
            16 => self.write_runs::<16>(col, src),
            8 => self.write_runs::<8>(col, src),
            _ => self.for_each_run(col..col + src.len(), |j, run| run.copy_from_slice(&src[j - col..][..run.len()])),
        }
    }

    /// [`PackedRow::write`] for runs of `W` columns.
    #[inline]
    fn write_runs<const W: usize>(&mut self, col: usize, mut src: &[f32]) {
        assert!(col + src.len() <= self.cols, "PackedRow: columns {col}..{} of {}", col + src.len(), self.cols);
        let (mut piece, off) = (col / W, col % W);
        if off != 0 {
            let len = (W - off).min(src.len());
            let at = piece * self.stride + off;
            self.data[at..at + len].copy_from_slice(&src[..len]);
            (src, piece) = (&src[len..], piece + 1);
        }
        let mut whole = src.chunks_exact(W);
        for run in &mut whole {
            let at = piece * self.stride;
            self.data[at..at + W].copy_from_slice(run);
            piece += 1;
        }
        let rest = whole.remainder();
        if !rest.is_empty() {
            let at = piece * self.stride;
            self.data[at..at + rest.len()].copy_from_slice(rest);
        }
    }

    /// Writes every `step`-th value of `src` (from its first) to columns `col..col + len`.
    #[inline]
    pub fn write_strided(&mut self, col: usize, len: usize, src: &[f32], step: usize) {
        self.for_each_run(col..col + len, |j, run| {
            let from = &src[(j - col) * step..];
            run.iter_mut().zip(from.iter().step_by(step)).for_each(|(o, &v)| *o = v);
        });
    }

    /// Sets columns `cols` to `v`.
    #[inline]
    pub fn fill(&mut self, cols: Range<usize>, v: f32) {
        self.for_each_run(cols, |_, run| run.fill(v));
    }

    /// Sets column `col` to `v`.
    ///
    /// # Panics
    /// If `col` lies past the row.
    #[inline]
    pub fn set(&mut self, col: usize, v: f32) {
        assert!(col < self.cols, "PackedRow: column {col} of {}", self.cols);
        self.data[(col >> self.width.trailing_zeros()) * self.stride + (col & (self.width - 1))] = v;
    }

    /// Zeroes the padding columns `cols` (past the row's own).
    fn fill_padding(&mut self, cols: Range<usize>) {
        self.runs(cols, &mut |_, run: &mut [f32]| run.fill(0.0));
    }
}
