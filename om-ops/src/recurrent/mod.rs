//! Recurrent layers: `lstm_layer` and `gru_layer` (one direction of one layer, with
//! backpropagation through time as an explicit loop) and the compositions `lstm` and `gru`
//! (any number of layers, bidirectional, batch-first, optional initial states), following
//! `torch.nn.LSTM`/`torch.nn.GRU`: gate rows stacked `i,f,g,o` (LSTM) and `r,z,n` (GRU).
//!
//! Products run on the canonical-order GEMM: the input projection of all steps is one
//! `[T·B, I]×[I, gH]` product against `W_ihᵀ`, each step one `[B, H]×[H, gH]` product
//! against `W_hhᵀ`; the weight and input gradients are single products over all steps after
//! the backward loop. Transposed operands (`W_ihᵀ`, `W_hhᵀ`, `dGᵀ`) are read in place by the
//! GEMM's packing, never copied. Gate sums, activations and cell updates of a step run over
//! the whole `[B, gH]` block in the lane loops of `om_core::kernels::gates` (the same f32
//! operations per element on every path) and the bias gradients are f64 sums in increasing
//! row order, so exact mode gives the same bits on every kernel path and thread count. Every
//! buffer comes from the pool. Layouts, saved slots and the order of the backward loop are
//! in `docs/ops-recurrent.md`.
//!
//! Files: `lstm.rs` (`lstm_layer`, `lstm`), `gru.rs` (`gru_layer`, `gru`), `stack.rs` (the
//! layer stack both run: [`RnnWeights`], [`RnnConfig`], [`RnnOutput`]); the helpers shared
//! by the cells are here.

use om_core::compute::{Compute, Settings};
use om_core::kernels::gates::{self, CellInputs, GruGrads, LstmGrads};
use om_core::kernels::gemm::{gemm, gemm_with_scratch, MatMut, MatRef};
use om_core::kernels::transpose::transpose;
use om_core::pool::{Buffer, F64Scratch};
use om_core::{Case, Error, Result, Tensor};
use om_macros::op;

// The files are `lstm.rs` and `gru.rs`; the modules have other names because the
// operators `lstm` and `gru` (their generated modules) are re-exported from here.
pub(crate) mod bilstm;
#[path = "gru.rs"]
pub(crate) mod gru_cell;
#[path = "lstm.rs"]
pub(crate) mod lstm_cell;
pub(crate) mod stack;

pub use bilstm::*;
pub use gru_cell::*;
pub use lstm_cell::*;
pub use stack::*;

// ===== shared helpers =====

/// A pooled f32 scratch of `len` values. Every constructor fails with
/// `Error::OutOfMemory` (naming no operator yet) when the pool refuses the buffer.
struct Scratch {
    buf: Buffer,
    len: usize,
}

impl Scratch {
    fn new(len: usize) -> Result<Scratch> {
        Ok(Scratch { buf: Buffer::try_new(bytes(len))?, len })
    }

    fn zeroed(len: usize) -> Result<Scratch> {
        Ok(Scratch { buf: Buffer::try_zeroed(bytes(len))?, len })
    }

    /// A pooled copy of the values of an optional tensor (a bias, an initial state).
    fn of(t: Option<&Tensor>) -> Result<Option<Scratch>> {
        let Some(t) = t else { return Ok(None) };
        t.try_with_f32(|v| {
            let mut s = Scratch::new(v.len())?;
            s.get_mut().copy_from_slice(v);
            Ok(Some(s))
        })?
    }

    fn get(&self) -> &[f32] {
        &self.buf.f32()[..self.len]
    }

    fn get_mut(&mut self) -> &mut [f32] {
        &mut self.buf.f32_mut()[..self.len]
    }
}

/// The bytes of `len` floats (saturating: an impossible count is refused by the pool).
fn bytes(len: usize) -> usize {
    len.saturating_mul(4)
}

/// Step `t` of a `[T, len]` buffer for writing, with the step `prev` (≠ `t`) for reading.
fn step_and_prev(buf: &mut [f32], t: usize, prev: Option<usize>, len: usize) -> (&mut [f32], Option<&[f32]>) {
    match prev {
        Some(p) if p < t => {
            let (lo, hi) = buf.split_at_mut(t * len);
            (&mut hi[..len], Some(&lo[p * len..(p + 1) * len]))
        }
        Some(p) => {
            let (lo, hi) = buf.split_at_mut(p * len);
            (&mut lo[t * len..(t + 1) * len], Some(&hi[..len]))
        }
        None => (&mut buf[t * len..(t + 1) * len], None),
    }
}

/// Sizes of one recurrent layer.
#[derive(Clone, Copy, Debug)]
struct Dims {
    t: usize,
    b: usize,
    i: usize,
    h: usize,
}

/// The weights of one direction of one layer as an operator received them: `w_ih`
/// `[gH, I]`, `w_hh` `[gH, H]` and the optional biases `[gH]` (`g` gate blocks).
#[derive(Clone, Copy)]
struct LayerWeights<'a> {
    w_ih: &'a Tensor,
    w_hh: &'a Tensor,
    b_ih: Option<&'a Tensor>,
    b_hh: Option<&'a Tensor>,
}

/// Validates the tensors of one layer with `gates` gate blocks (4 for LSTM, 3 for GRU).
/// `x_shape` is the layer input's shape `[T, B, I]`; `states` are the optional `[B, H]`
/// initial states with their names.
fn check_layer(
    op: &'static str,
    gates: usize,
    x_shape: &[usize],
    w: LayerWeights,
    states: &[(&'static str, Option<&Tensor>)],
) -> Result<Dims> {
    let LayerWeights { w_ih, w_hh, b_ih, b_hh } = w;
    w_ih.expect_f32(op, "w_ih")?;
    w_hh.expect_f32(op, "w_hh")?;
    for (arg, b) in [("b_ih", b_ih), ("b_hh", b_hh)] {
        if let Some(b) = b {
            b.expect_f32(op, arg)?;
        }
    }
    for &(arg, s) in states {
        if let Some(s) = s {
            s.expect_f32(op, arg)?;
        }
    }
    if x_shape.len() != 3 {
        return Err(Error::shape(op, &[x_shape], format!("x must be [T, B, I] (rank 3), got rank {}", x_shape.len())));
    }
    let (t, b, i) = (x_shape[0], x_shape[1], x_shape[2]);
    if t == 0 {
        return Err(Error::shape(op, &[x_shape], "the sequence is empty (T = 0)"));
    }
    if i == 0 {
        return Err(Error::shape(op, &[x_shape], "the input size must be at least 1 (as in PyTorch; an empty batch is fine)"));
    }
    if w_hh.rank() != 2 || w_hh.shape()[1] == 0 || w_hh.shape()[0] != gates * w_hh.shape()[1] {
        return Err(Error::shape(op, &[w_hh.shape()], format!("w_hh must be [{gates}·H, H] with H ≥ 1, got {:?}", w_hh.shape())));
    }
    let h = w_hh.shape()[1];
    if w_ih.shape() != [gates * h, i] {
        return Err(Error::shape(
            op,
            &[x_shape, w_ih.shape(), w_hh.shape()],
            format!("w_ih must be [{gates}·H, I] = [{}, {i}] (H = {h} from w_hh, I = {i} from x), got {:?}", gates * h, w_ih.shape()),
        ));
    }
    for (arg, bias) in [("b_ih", b_ih), ("b_hh", b_hh)] {
        if let Some(bias) = bias {
            if bias.shape() != [gates * h] {
                return Err(Error::shape(
                    op,
                    &[w_hh.shape(), bias.shape()],
                    format!("`{arg}` must be [{gates}·H] = [{}], got {:?}", gates * h, bias.shape()),
                ));
            }
        }
    }
    for &(arg, s) in states {
        if let Some(s) = s {
            if s.shape() != [b, h] {
                return Err(Error::shape(op, &[x_shape, s.shape()], format!("`{arg}` must be [B, H] = [{b}, {h}], got {:?}", s.shape())));
            }
        }
    }
    Ok(Dims { t, b, i, h })
}

/// Forward step `s` (0-based in processing order) visits time `t`.
fn time_of(s: usize, t_len: usize, reverse: bool) -> usize {
    if reverse {
        t_len - 1 - s
    } else {
        s
    }
}

/// The time visited just before `t` (None at the first step).
fn prev_time(t: usize, t_len: usize, reverse: bool) -> Option<usize> {
    if reverse {
        (t + 1 < t_len).then_some(t + 1)
    } else {
        t.checked_sub(1)
    }
}

/// A layer's prologue products from the values of `xs` `[T·B, I]`, `w_ih` `[gH, I]` and
/// `w_hh` `[gH, H]`: the input projection `x·W_ihᵀ` for all steps into `xp` `[T·B, gH]` (one
/// GEMM reading `W_ih` transposed in place) and the copy `W_hhᵀ` into `whh_t` `[H, gH]`.
/// The product packs into the caller's `gemm` scratch when it holds
/// `gemm_scratch_len(settings, T·B, I, gH, gH)` values (so that it can run inside a chunk),
/// else into a pooled buffer (an empty `gemm` outside a parallel section).
fn project_into(
    settings: Settings,
    dm: Dims,
    gh: usize,
    [xs, w_ih, w_hh]: [&[f32]; 3],
    xp: &mut [f32],
    whh_t: &mut [f32],
    gemm: &mut [f32],
) {
    let rows = dm.t * dm.b;
    let (a, b) = (MatRef::row_major(xs, rows, dm.i), MatRef::row_major(w_ih, gh, dm.i).t());
    gemm_with_scratch(settings, a, b, MatMut::row_major(xp, rows, gh), gemm);
    transpose(w_hh, gh, dm.h, dm.h, 1, whh_t);
}

/// The previous hidden states of every step in time order (`[T·B, H]`): the state of the
/// step processed just before `t`, `h0` (or zeros) at the first step.
fn previous_states(y: &[f32], h0: Option<&[f32]>, dm: Dims, reverse: bool) -> Result<Scratch> {
    let bh = dm.b * dm.h;
    let mut out = Scratch::new(dm.t * bh)?;
    previous_states_into(out.get_mut(), h0, dm, reverse, |p, dst| dst.copy_from_slice(&y[p * bh..(p + 1) * bh]));
    Ok(out)
}

/// [`previous_states`] into `out` (`[T·B, H]`), step `p`'s `[B, H]` states written into a
/// block by `state(p, block)` (the pair layer reads them out of its interleaved output).
fn previous_states_into(out: &mut [f32], h0: Option<&[f32]>, dm: Dims, reverse: bool, mut state: impl FnMut(usize, &mut [f32])) {
    let bh = dm.b * dm.h;
    for t in 0..dm.t {
        let dst = &mut out[t * bh..(t + 1) * bh];
        match (prev_time(t, dm.t, reverse), h0) {
            (Some(p), _) => state(p, dst),
            (None, Some(h0)) => dst.copy_from_slice(h0),
            (None, None) => dst.fill(0.0),
        }
    }
}

/// What the gradients of a layer's inputs are products of, after the backward loop.
#[derive(Clone, Copy)]
struct GradProducts<'a> {
    /// `dX`: every step's pre-activation gradients of the input side, `[T·B, gH]`.
    dx_gates: &'a [f32],
    /// `dH`, those of the hidden side, when they differ from `dX` (GRU); `None` when they
    /// are `dX` (LSTM).
    dh_gates: Option<&'a [f32]>,
    /// The layer input `[T, B, I]`.
    x: &'a Tensor,
    /// `W_ih` `[gH, I]`.
    w_ih: &'a Tensor,
    /// Every step's previous hidden state `H_prev`, `[T·B, H]`.
    h_prev: &'a [f32],
}

/// The gradients after the backward loop, each a single product over all steps:
/// `dx = dX·W_ih`, `dW_ih = dXᵀ·x`, `dW_hh = dHᵀ·H_prev`, and the f64 row sums of `dX` and
/// `dH` (increasing row order) for the biases. Returns `[dx, dw_ih, dw_hh, db_ih, db_hh]`,
/// each only when `needs` says so.
fn parameter_grads(settings: Settings, dm: Dims, gh: usize, p: GradProducts, needs: [bool; 5]) -> Result<[Option<Tensor>; 5]> {
    let GradProducts { dx_gates, dh_gates, x, w_ih, h_prev } = p;
    let rows = dm.t * dm.b;
    let mut out: [Option<Tensor>; 5] = Default::default();
    // dXᵀ and dHᵀ are read transposed in place.
    let dxt = MatRef::row_major(dx_gates, rows, gh).t();
    if needs[0] {
        out[0] = Some(w_ih.try_with_f32(|ws| {
            Tensor::build_f32(&[dm.t, dm.b, dm.i], |dx| {
                gemm(settings, MatRef::row_major(dx_gates, rows, gh), MatRef::row_major(ws, gh, dm.i), MatMut::row_major(dx, rows, dm.i));
                Ok(())
            })
        })??);
    }
    if needs[1] {
        out[1] = Some(x.try_with_f32(|xs| {
            Tensor::build_f32(&[gh, dm.i], |dw| {
                gemm(settings, dxt, MatRef::row_major(xs, rows, dm.i), MatMut::row_major(dw, gh, dm.i));
                Ok(())
            })
        })??);
    }
    if needs[2] {
        let dht = dh_gates.map_or(dxt, |dhg| MatRef::row_major(dhg, rows, gh).t());
        out[2] = Some(Tensor::build_f32(&[gh, dm.h], |dw| {
            gemm(settings, dht, MatRef::row_major(h_prev, rows, dm.h), MatMut::row_major(dw, gh, dm.h));
            Ok(())
        })?);
    }
    if needs[3] || (needs[4] && dh_gates.is_none()) {
        let s = row_sums(dx_gates, gh)?;
        if needs[4] && dh_gates.is_none() {
            out[4] = Some(s.clone());
        }
        if needs[3] {
            out[3] = Some(s);
        }
    }
    if let (true, Some(dhg)) = (needs[4], dh_gates) {
        out[4] = Some(row_sums(dhg, gh)?);
    }
    Ok(out)
}

/// Column sums of the row-major `[rows, cols]` matrix `m`: f64 in increasing row order,
/// rounded once.
fn row_sums(m: &[f32], cols: usize) -> Result<Tensor> {
    let mut acc = F64Scratch::try_zeroed(cols)?;
    Tensor::build_f32(&[cols], |out| {
        column_sums_into(m, acc.values(), out);
        Ok(())
    })
}

/// [`row_sums`] into `out` (`cols = out.len()` values), accumulating in `acc` (as many
/// f64 zeros): the one loop of both, so their bits agree.
fn column_sums_into(m: &[f32], acc: &mut [f64], out: &mut [f32]) {
    for row in m.chunks_exact(out.len()) {
        for (s, &v) in acc.iter_mut().zip(row) {
            *s += v as f64;
        }
    }
    for (o, &s) in out.iter_mut().zip(acc.iter()) {
        *o = s as f32;
    }
}

/// The shapes of the inputs of a layer record: `[T, B, I]` and `H`.
fn record_dims(input_shapes: &[om_core::layout::Dims]) -> Dims {
    let (x, w_hh) = (&input_shapes[0], &input_shapes[2]);
    Dims { t: x[0], b: x[1], i: x[2], h: w_hh[1] }
}

/// What both layers' forwards start from: the validated sizes, the settings, every step's
/// input projection `x·W_ihᵀ`, pooled copies of the biases and of the initial hidden state
/// (zeros when absent), and the buffer of one step's hidden projection `h·W_hhᵀ`.
struct Prologue {
    dm: Dims,
    settings: Settings,
    xp: Scratch,
    b_ih: Option<Scratch>,
    b_hh: Option<Scratch>,
    h0: Scratch,
    has_h0: bool,
    hp: Scratch,
    /// `W_hhᵀ`, `[H, gH]` row-major: copied once per call, so every step's product packs a
    /// row-major operand instead of transposing `W_hh` again (the same bits: the GEMM
    /// reads a transposed view exactly as its row-major copy).
    whh_t: Scratch,
}

impl Prologue {
    /// Validates one layer with `gates` gate blocks (`states`: its optional `[B, H]`
    /// initial states by name, the hidden state first) and prepares its buffers.
    fn new(op: &'static str, gates: usize, x: &Tensor, w: LayerWeights, states: &[(&'static str, Option<&Tensor>)]) -> Result<Prologue> {
        let mut p = Prologue::unfilled(op, gates, x, w, states)?;
        let (settings, dm, gh) = (p.settings, p.dm, gates * p.dm.h);
        let (xp, whh_t) = (p.xp.get_mut(), p.whh_t.get_mut());
        x.try_with_f32(|xs| {
            w.w_ih.try_with_f32(|wi| w.w_hh.try_with_f32(|wh| project_into(settings, dm, gh, [xs, wi, wh], xp, whh_t, &mut [])))
        })???;
        Ok(p)
    }

    /// As [`Prologue::new`] without the products: `xp` (`[T·B, gH]`) and `whh_t` are
    /// allocated but not written (`lstm_pair_layer` writes them on the thread of their
    /// direction, with [`project_into`]).
    fn unfilled(
        op: &'static str,
        gates: usize,
        x: &Tensor,
        w: LayerWeights,
        states: &[(&'static str, Option<&Tensor>)],
    ) -> Result<Prologue> {
        x.expect_f32(op, "x")?;
        let dm = check_layer(op, gates, x.shape(), w, states)?;
        let gh = gates * dm.h;
        let settings = Compute::settings();
        let h0 = states.first().and_then(|&(_, h0)| h0);
        Ok(Prologue {
            dm,
            settings,
            xp: Scratch::new((dm.t * dm.b).saturating_mul(gh))?,
            b_ih: Scratch::of(w.b_ih)?,
            b_hh: Scratch::of(w.b_hh)?,
            h0: match Scratch::of(h0)? {
                Some(h0) => h0,
                None => Scratch::zeroed(dm.b * dm.h)?,
            },
            has_h0: h0.is_some(),
            hp: Scratch::new(dm.b * gh)?,
            whh_t: Scratch::new(gh * dm.h)?,
        })
    }

    /// The step inputs of time `t`, after `hp` holds the step's hidden projection; `prev`
    /// is the previous state the cell update reads (`c'` for the LSTM, `h'` for the GRU).
    fn cell_inputs<'a>(&'a self, t: usize, gh: usize, prev: Option<&'a [f32]>) -> CellInputs<'a> {
        let rows = t * self.dm.b * gh..(t + 1) * self.dm.b * gh;
        CellInputs {
            xp: &self.xp.get()[rows],
            hp: self.hp.get(),
            b_ih: self.b_ih.as_ref().map(Scratch::get),
            b_hh: self.b_hh.as_ref().map(Scratch::get),
            prev,
        }
    }
}

/// Emits `[dx, dw_ih, dw_hh, db_ih, db_hh]` from [`parameter_grads`] to the inputs of a
/// layer's `Grads` (the two layers' generated `Grads` share these method names).
macro_rules! emit_parameter_grads {
    ($d:ident, $grads:expr) => {{
        let [dx, dwih, dwhh, dbih, dbhh] = $grads;
        if let Some(t) = dx {
            $d.x(t);
        }
        if let Some(t) = dwih {
            $d.w_ih(t);
        }
        if let Some(t) = dwhh {
            $d.w_hh(t);
        }
        if let Some(t) = dbih {
            $d.b_ih(t);
        }
        if let Some(t) = dbhh {
            $d.b_hh(t);
        }
    }};
}
// For `lstm.rs` and `gru.rs` (a `macro_rules!` is otherwise visible only below it).
use emit_parameter_grads;

#[cfg(test)]
mod tests;
