//! The LSTM: `lstm_layer` (one direction of one layer) and `lstm` (the stack of layers).

use super::stack::{check_stack, run_stack, stack_cases, state};
use super::*;
use om_core::kernels::gemm::gemm_with_scratch;

/// The read-only inputs of one direction's forward time loop.
#[derive(Clone, Copy)]
pub(super) struct DirForward<'a> {
    /// `x·W_ihᵀ` of every step, `[T·B, 4H]`.
    pub(super) xp: &'a [f32],
    pub(super) b_ih: Option<&'a [f32]>,
    pub(super) b_hh: Option<&'a [f32]>,
    /// The initial hidden state `[B, H]` (zeros when absent).
    pub(super) h0: &'a [f32],
    pub(super) c0: Option<&'a [f32]>,
    /// `W_hhᵀ` `[H, 4H]`, row-major.
    pub(super) whh_t: &'a [f32],
    pub(super) reverse: bool,
}

/// The outputs of one direction's forward time loop (all `[T, B, ·]`) and its step buffer.
pub(super) struct ForwardBufs<'o> {
    pub(super) gates: &'o mut [f32],
    pub(super) c: &'o mut [f32],
    pub(super) tanh_c: &'o mut [f32],
    pub(super) y: &'o mut [f32],
    /// One step's `h·W_hhᵀ`, `[B, 4H]`.
    pub(super) hp: &'o mut [f32],
    /// The scratch of that product (`gemm_scratch_len(settings, B, H, 4H, 4H)` values, so
    /// that a loop run inside a chunk of a parallel section takes no pool memory), or
    /// empty: the product then takes a pooled one.
    pub(super) gemm: &'o mut [f32],
}

/// One direction's forward time loop, `lstm_layer`'s and each direction's of
/// `lstm_pair_layer` (one loop, so the two operators' bits agree by construction).
pub(super) fn forward_loop(settings: Settings, dm: Dims, d: DirForward, o: ForwardBufs) {
    let Dims { t: t_len, b, h, .. } = dm;
    let (gh, bh) = (4 * h, b * h);
    let whh_t = MatRef::row_major(d.whh_t, h, gh);
    for s in 0..t_len {
        let t = time_of(s, t_len, d.reverse);
        let prev = prev_time(t, t_len, d.reverse);
        let (y_t, y_prev) = step_and_prev(o.y, t, prev, bh);
        let (c_t, c_prev) = step_and_prev(o.c, t, prev, bh);
        let h_prev = MatRef::row_major(y_prev.unwrap_or(d.h0), b, h);
        gemm_with_scratch(settings, h_prev, whh_t, MatMut::row_major(o.hp, b, gh), o.gemm);
        let inp = CellInputs { xp: &d.xp[t * b * gh..(t + 1) * b * gh], hp: o.hp, b_ih: d.b_ih, b_hh: d.b_hh, prev: c_prev.or(d.c0) };
        gates::lstm_forward(settings, h, inp, &mut o.gates[t * b * gh..(t + 1) * b * gh], c_t, &mut o.tanh_c[t * bh..(t + 1) * bh], y_t);
    }
}

/// The read-only inputs of one direction's backward time loop.
#[derive(Clone, Copy)]
pub(super) struct DirBackward<'a> {
    pub(super) gates: &'a [f32],
    pub(super) c: &'a [f32],
    pub(super) tanh_c: &'a [f32],
    /// The gradient of the direction's states `[T, B, H]`.
    pub(super) gy: &'a [f32],
    pub(super) c0: Option<&'a [f32]>,
    pub(super) whh: &'a [f32],
    pub(super) reverse: bool,
}

/// One direction's backward time loop, `lstm_layer`'s and each direction's of
/// `lstm_pair_layer`. `dc_next`
/// holds the gradient of the final cell state on entry; `dg` receives every step's
/// pre-activation gradients `[T, B, 4H]`, `dh_next` and `dc_next` those of `h0`, `c0`.
/// `gemm` is the scratch of each step's `dg·W_hh` (`gemm_scratch_len(settings, B, 4H, H, H)`
/// values, or empty: the product then takes a pooled one).
pub(super) fn backward_loop(
    settings: Settings,
    dm: Dims,
    d: DirBackward,
    dg: &mut [f32],
    dh_next: &mut [f32],
    dc_next: &mut [f32],
    gemm: &mut [f32],
) {
    let Dims { t: t_len, b, h, .. } = dm;
    let (gh, bh) = (4 * h, b * h);
    for s in (0..t_len).rev() {
        let t = time_of(s, t_len, d.reverse);
        let c_prev = match prev_time(t, t_len, d.reverse) {
            Some(p) => Some(&d.c[p * bh..(p + 1) * bh]),
            None => d.c0,
        };
        let inp = LstmGrads {
            gates: &d.gates[t * b * gh..(t + 1) * b * gh],
            tanh_c: &d.tanh_c[t * bh..(t + 1) * bh],
            c_prev,
            gy: &d.gy[t * bh..(t + 1) * bh],
            dh_next,
        };
        gates::lstm_backward(settings, h, inp, dc_next, &mut dg[t * b * gh..(t + 1) * b * gh]);
        gemm_with_scratch(
            settings,
            MatRef::with_stride(&dg[t * b * gh..], b, gh, gh),
            MatRef::with_stride(d.whh, gh, h, h),
            MatMut::with_stride(dh_next, b, h, h),
            gemm,
        );
    }
}

/// One direction of one LSTM layer (PyTorch gate order `i,f,g,o`): `x` `[T, B, I]`,
/// `w_ih` `[4H, I]`, `w_hh` `[4H, H]`, optional biases `[4H]` and initial states `h0`, `c0`
/// `[B, H]` (zeros if absent). Returns every step's hidden state `y` `[T, B, H]`; a reverse
/// layer runs `t = T−1..0` and `y[t]` is its state at `t`. Per step: `a = (x·W_ihᵀ + b_ih) +
/// (h·W_hhᵀ + b_hh)`, `c = f·c' + i·g`, `h = o·tanh c`. Backward through time in reverse
/// step order (`dh = gy + dh'`, `dc = dc' + dh·o·(1−tanh²c)`, `dh' = dG·W_hh`, `dc' = dc·f`),
/// then `dx = dG·W_ih`, `dW_ih = dGᵀ·x`, `dW_hh = dGᵀ·H_prev`, `db_ih = db_hh = Σ dG`.
///
/// With `final_cell` the output has one more row, `[T + 1, B, H]`: rows `0..T` are `y` and
/// row `T` is the final cell state `c_n` (the cell state of the last step processed), so
/// that [`lstm()`] can return `c_n` with its gradient — its gradient enters the backward
/// loop as the cell-state gradient after the last step (`dc' = g[T]` instead of 0).
///
/// # Examples
///
/// ```
/// use om_ops::{lstm_layer, Tensor};
/// // H = 1, zero weights: only the bias acts, i = f = o = σ(0) = ½ and g = tanh(1).
/// let x = Tensor::zeros(&[2, 1, 3])?; // T = 2 steps, batch 1, 3 features
/// let (w_ih, w_hh) = (Tensor::zeros(&[4, 3])?, Tensor::zeros(&[4, 1])?);
/// let b_ih = Tensor::from_vec(vec![0.0, 0.0, 1.0, 0.0], &[4])?; // gate rows i, f, g, o
/// let y = lstm_layer(&x, &w_ih, &w_hh, Some(&b_ih), None, None, None, false, false)?;
/// assert_eq!(y.shape(), [2, 1, 1]);
/// // c = f·c' + i·g, h = o·tanh c, from c' = 0.
/// let g = 1f32.tanh();
/// let c1 = 0.5 * g;
/// let c2 = 0.5 * c1 + 0.5 * g;
/// let want = [0.5 * c1.tanh(), 0.5 * c2.tanh()];
/// assert!(y.to_vec().iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5));
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x, w_ih, w_hh, gates: owned, c: owned, tanh_c: owned, out, h0, c0], attrs = [reverse: bool, final_cell: bool])]
pub mod lstm_layer {
    use super::*;

    // The operator's public signature: `#[op]` takes each tensor input as its own
    // parameter (the generated function carries the same allowance).
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        x: &Tensor,
        w_ih: &Tensor,
        w_hh: &Tensor,
        b_ih: Option<&Tensor>,
        b_hh: Option<&Tensor>,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
        reverse: bool,
        final_cell: bool,
    ) -> Result<(Tensor, Owned)> {
        let mut p = Prologue::new(NAME, 4, x, LayerWeights { w_ih, w_hh, b_ih, b_hh }, &[("h0", h0), ("c0", c0)])?;
        let (Dims { t: t_len, b, h, .. }, settings) = (p.dm, p.settings);
        let (gh, bh) = (4 * h, b * h);
        let c0 = Scratch::of(c0)?;
        let mut owned = None;
        let y = {
            Tensor::build_f32(&[t_len + usize::from(final_cell), b, h], |y| {
                // The time loop `lstm_pair_layer` runs for each of its directions (field by
                // field: `p.hp` is written below while these borrows live).
                let dir = DirForward {
                    xp: p.xp.get(),
                    b_ih: p.b_ih.as_ref().map(Scratch::get),
                    b_hh: p.b_hh.as_ref().map(Scratch::get),
                    h0: p.h0.get(),
                    c0: c0.as_ref().map(Scratch::get),
                    whh_t: p.whh_t.get(),
                    reverse,
                };
                let [gates, c, tanh_c] =
                    Tensor::build_many_f32([&[t_len, b, gh], &[t_len, b, h], &[t_len, b, h]], |[gates, c_all, tc_all]| {
                        let bufs =
                            ForwardBufs { gates, c: c_all, tanh_c: tc_all, y: &mut y[..t_len * bh], hp: p.hp.get_mut(), gemm: &mut [] };
                        forward_loop(settings, p.dm, dir, bufs);
                        if final_cell {
                            let last = time_of(t_len - 1, t_len, reverse);
                            y[t_len * bh..].copy_from_slice(&c_all[last * bh..(last + 1) * bh]);
                        }
                        Ok(())
                    })?;
                owned = Some(Owned { gates, c, tanh_c });
                Ok(())
            })
        }?;
        Ok((y, owned.expect("built")))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let dm = record_dims(&r.input_shapes);
        let Dims { t: t_len, b, h, .. } = dm;
        let (gh, bh) = (4 * h, b * h);
        let settings = Compute::settings();
        let c0 = Scratch::of(r.c0.as_ref().map(|s| s.tensor()))?;
        let mut dg = Scratch::new(t_len * b * gh)?;
        let mut dh_next = Scratch::zeroed(bh)?;
        let mut dc_next = Scratch::zeroed(bh)?;
        if r.final_cell {
            // The gradient of c_n is the cell-state gradient after the last step.
            g.try_with_f32(|gy| dc_next.get_mut().copy_from_slice(&gy[t_len * bh..]))?;
        }
        r.gates().try_with_f32(|gates| {
            r.c().try_with_f32(|c_all| {
                r.tanh_c().try_with_f32(|tc_all| {
                    g.try_with_f32(|gy| {
                        r.w_hh().try_with_f32(|whh| {
                            let dir = DirBackward {
                                gates,
                                c: c_all,
                                tanh_c: tc_all,
                                gy,
                                c0: c0.as_ref().map(Scratch::get),
                                whh,
                                reverse: r.reverse,
                            };
                            backward_loop(settings, dm, dir, dg.get_mut(), dh_next.get_mut(), dc_next.get_mut(), &mut []);
                        })
                    })
                })
            })
        })?????;
        let needs = [d.needs_x(), d.needs_w_ih(), d.needs_w_hh(), d.needs_b_ih(), d.needs_b_hh()];
        let h_prev = if needs[2] {
            let h0 = Scratch::of(r.h0.as_ref().map(|s| s.tensor()))?;
            r.out().try_with_f32(|y| previous_states(y, h0.as_ref().map(Scratch::get), dm, r.reverse))??
        } else {
            Scratch::new(0)?
        };
        emit_parameter_grads!(
            d,
            parameter_grads(
                settings,
                dm,
                gh,
                GradProducts { dx_gates: dg.get(), dh_gates: None, x: r.x(), w_ih: r.w_ih(), h_prev: h_prev.get() },
                needs
            )?
        );
        if d.needs_h0() {
            d.h0(Tensor::from_slice(dh_next.get(), &[b, h])?);
        }
        if d.needs_c0() {
            d.c0(Tensor::from_slice(dc_next.get(), &[b, h])?);
        }
        Ok(())
    }
    fn cases() -> Vec<Case> {
        let inp = Case::input;
        let w = |t: &[Tensor], k: usize| Some(t[k].clone());
        vec![
            Case::new(
                "full",
                vec![
                    inp(&[3, 2, 3], -1.0, 1.0, 1),
                    inp(&[8, 3], -0.6, 0.6, 2),
                    inp(&[8, 2], -0.6, 0.6, 3),
                    inp(&[8], -0.5, 0.5, 4),
                    inp(&[8], -0.5, 0.5, 5),
                    inp(&[2, 2], -1.0, 1.0, 6),
                    inp(&[2, 2], -1.0, 1.0, 7),
                ],
                move |t| super::lstm_layer(&t[0], &t[1], &t[2], w(t, 3).as_ref(), w(t, 4).as_ref(), Some(&t[5]), Some(&t[6]), false, false),
            ),
            Case::new(
                "reverse_full",
                vec![
                    inp(&[4, 2, 2], -1.0, 1.0, 8),
                    inp(&[12, 2], -0.6, 0.6, 9),
                    inp(&[12, 3], -0.6, 0.6, 10),
                    inp(&[12], -0.5, 0.5, 11),
                    inp(&[12], -0.5, 0.5, 12),
                    inp(&[2, 3], -1.0, 1.0, 13),
                    inp(&[2, 3], -1.0, 1.0, 14),
                ],
                move |t| super::lstm_layer(&t[0], &t[1], &t[2], w(t, 3).as_ref(), w(t, 4).as_ref(), Some(&t[5]), Some(&t[6]), true, false),
            ),
            Case::new(
                "reverse_plain",
                vec![inp(&[3, 2, 3], -1.0, 1.0, 15), inp(&[8, 3], -0.6, 0.6, 16), inp(&[8, 2], -0.6, 0.6, 17)],
                |t| super::lstm_layer(&t[0], &t[1], &t[2], None, None, None, None, true, false),
            ),
            // Batch-first storage read as [T, B, I]; h0 only, b_hh only.
            Case::new(
                "transposed_h0_only",
                vec![
                    inp(&[2, 3, 2], -1.0, 1.0, 18),
                    inp(&[8, 2], -0.6, 0.6, 19),
                    inp(&[8, 2], -0.6, 0.6, 20),
                    inp(&[8], -0.5, 0.5, 21),
                    inp(&[2, 2], -1.0, 1.0, 22),
                ],
                |t| super::lstm_layer(&crate::transpose(&t[0], 0, 1)?, &t[1], &t[2], None, Some(&t[3]), Some(&t[4]), None, false, false),
            ),
            Case::new(
                "c0_only",
                vec![
                    inp(&[2, 1, 2], -1.0, 1.0, 23),
                    inp(&[4, 2], -0.6, 0.6, 24),
                    inp(&[4, 1], -0.6, 0.6, 25),
                    inp(&[4], -0.5, 0.5, 26),
                    inp(&[1, 1], -1.0, 1.0, 27),
                ],
                |t| super::lstm_layer(&t[0], &t[1], &t[2], Some(&t[3]), None, None, Some(&t[4]), false, false),
            ),
            // The final cell state as an extra output row, both directions.
            Case::new(
                "final_cell",
                vec![
                    inp(&[3, 2, 3], -1.0, 1.0, 28),
                    inp(&[8, 3], -0.6, 0.6, 29),
                    inp(&[8, 2], -0.6, 0.6, 30),
                    inp(&[8], -0.5, 0.5, 31),
                    inp(&[2, 2], -1.0, 1.0, 32),
                    inp(&[2, 2], -1.0, 1.0, 33),
                ],
                move |t| super::lstm_layer(&t[0], &t[1], &t[2], w(t, 3).as_ref(), None, Some(&t[4]), Some(&t[5]), false, true),
            ),
            Case::new(
                "reverse_final_cell_plain",
                vec![inp(&[4, 1, 2], -1.0, 1.0, 34), inp(&[12, 2], -0.6, 0.6, 35), inp(&[12, 3], -0.6, 0.6, 36)],
                |t| super::lstm_layer(&t[0], &t[1], &t[2], None, None, None, None, true, true),
            ),
        ]
    }
}

/// Multi-layer, optionally bidirectional LSTM as `torch.nn.LSTM` (no dropout, no
/// projections): `x` `[T, B, I]` (`[B, T, I]` batch-first), one [`RnnWeights`] per layer
/// and direction in PyTorch's order, optional `h0`, `c0` `[layers·dirs, B, H]`. Layer l+1
/// reads the concatenation of layer l's directions. Returns the last layer's states `y`,
/// the final hidden states `h_n` and the final cell states `c_n` (`Some`), each with its
/// gradient: a long sequence can be run in chunks, each chunk starting from the previous
/// chunk's `h_n`, `c_n`, with the same values as one run over the whole sequence.
/// A bidirectional layer runs as one [`lstm_pair_layer`](crate::lstm_pair_layer) (its two
/// directions at the same time on the thread team, with the bits of two `lstm_layer`s).
/// Backward: through `lstm_layer` (one direction) or `lstm_pair_layer` (both).
///
/// # Examples
///
/// ```
/// use om_ops::{lstm, select, slice, RnnConfig, RnnWeights, Tensor};
/// let (t, b, i, h) = (5, 2, 3, 4);
/// let x = Tensor::randn_with_seed(&[t, b, i], 1)?;
/// // One bidirectional layer: the forward direction's weights, then the reverse one's.
/// let weights: Vec<RnnWeights> = (0..2)
///     .map(|d| Ok(RnnWeights::without_bias(Tensor::randn_with_seed(&[4 * h, i], 2 + d)?, Tensor::randn_with_seed(&[4 * h, h], 4 + d)?)))
///     .collect::<om_ops::Result<_>>()?;
/// let out = lstm(&x, None, None, &weights, RnnConfig::default().bidirectional(true))?;
/// assert_eq!(out.y.shape(), [t, b, 2 * h]);
/// assert_eq!(out.h_n.shape(), [2, b, h]);
/// assert_eq!(out.c_n.as_ref().map(|c| c.shape().to_vec()), Some(vec![2, b, h]));
/// // h_n holds the forward direction's last step and the reverse direction's first.
/// let last = slice(&select(&out.y, 0, t as isize - 1)?, 1, 0, h as isize, 1)?;
/// let first = slice(&select(&out.y, 0, 0)?, 1, h as isize, 2 * h as isize, 1)?;
/// assert_eq!(select(&out.h_n, 0, 0)?.to_vec(), last.to_vec());
/// assert_eq!(select(&out.h_n, 0, 1)?.to_vec(), first.to_vec());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(composition)]
pub mod lstm {
    use super::*;

    pub fn forward(x: &Tensor, h0: Option<&Tensor>, c0: Option<&Tensor>, weights: &[RnnWeights], config: RnnConfig) -> Result<RnnOutput> {
        let (xt, _) = check_stack(NAME, 4, x, weights, &[("h0", h0), ("c0", c0)], config)?;
        let layer = |inp: &Tensor, w: &RnnWeights, k: usize, reverse: bool| {
            let (h, c) = (state(h0, k)?, state(c0, k)?);
            let out = crate::lstm_layer(inp, &w.w_ih, &w.w_hh, w.b_ih.as_ref(), w.b_hh.as_ref(), h.as_ref(), c.as_ref(), reverse, true)?;
            // Rows 0..T are the states; row T is the final cell state.
            let t_len = inp.shape()[0];
            Ok((crate::slice(&out, 0, 0, t_len as isize, 1)?, Some(crate::select(&out, 0, t_len as isize)?)))
        };
        // Both directions of a bidirectional layer at once (their time loops in parallel).
        let pair = |inp: &Tensor, f: &RnnWeights, r: &RnnWeights, k: usize| -> Result<(Tensor, Tensor)> {
            let (hf, cf, hr, cr) = (state(h0, k)?, state(c0, k)?, state(h0, k + 1)?, state(c0, k + 1)?);
            let out = crate::lstm_pair_layer(
                inp,
                &f.w_ih,
                &f.w_hh,
                f.b_ih.as_ref(),
                f.b_hh.as_ref(),
                hf.as_ref(),
                cf.as_ref(),
                &r.w_ih,
                &r.w_hh,
                r.b_ih.as_ref(),
                r.b_hh.as_ref(),
                hr.as_ref(),
                cr.as_ref(),
            )?;
            let t_len = inp.shape()[0];
            Ok((crate::slice(&out, 0, 0, t_len as isize, 1)?, crate::select(&out, 0, t_len as isize)?))
        };
        run_stack(xt, weights, config, layer, Some(&pair))
    }

    fn cases() -> Vec<Case> {
        stack_cases(4, super::lstm)
    }
}
