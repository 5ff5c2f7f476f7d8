//! The GRU: `gru_layer` (one direction of one layer) and `gru` (the stack of layers).

use super::stack::{check_stack, run_stack, stack_cases, state};
use super::*;

/// One direction of one GRU layer (PyTorch gate order `r,z,n`): `x` `[T, B, I]`, `w_ih`
/// `[3H, I]`, `w_hh` `[3H, H]`, optional biases `[3H]` and initial state `h0` `[B, H]`.
/// Returns every step's hidden state `[T, B, H]` (a reverse layer runs `t = T−1..0`). Per
/// step: `r = σ((W_ir x + b_ir) + (W_hr h + b_hr))`, `z` likewise, `n = tanh((W_in x + b_in) +
/// r·(W_hn h + b_hn))`, `h = (1−z)·n + z·h'`. Backward through time in reverse step order
/// with `dX[t] = [dar, daz, dan]`, `dH[t] = [dar, daz, dan·r]`, `dh' = dH[t]·W_hh + dh·z`;
/// then `dx = dX·W_ih`, `dW_ih = dXᵀ·x`, `dW_hh = dHᵀ·H_prev`, `db_ih = Σ dX`, `db_hh = Σ dH`.
///
/// # Examples
///
/// ```
/// use om_ops::{gru_layer, Tensor};
/// // H = 1, zero weights: only the bias acts, r = z = σ(0) = ½ and n = tanh(1).
/// let x = Tensor::zeros(&[2, 1, 3])?; // T = 2 steps, batch 1, 3 features
/// let (w_ih, w_hh) = (Tensor::zeros(&[3, 3])?, Tensor::zeros(&[3, 1])?);
/// let b_ih = Tensor::from_vec(vec![0.0, 0.0, 1.0], &[3])?; // gate rows r, z, n
/// let y = gru_layer(&x, &w_ih, &w_hh, Some(&b_ih), None, None, false)?;
/// assert_eq!(y.shape(), [2, 1, 1]);
/// // h = (1 − z)·n + z·h', from h' = 0.
/// let n = 1f32.tanh();
/// let h1 = 0.5 * n;
/// let want = [h1, 0.5 * n + 0.5 * h1];
/// assert!(y.to_vec().iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5));
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(saved = [x, w_ih, w_hh, gates: owned, hn: owned, out, h0], attrs = [reverse: bool])]
pub mod gru_layer {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        x: &Tensor,
        w_ih: &Tensor,
        w_hh: &Tensor,
        b_ih: Option<&Tensor>,
        b_hh: Option<&Tensor>,
        h0: Option<&Tensor>,
        reverse: bool,
    ) -> Result<(Tensor, Owned)> {
        let mut p = Prologue::new(NAME, 3, x, w_ih, w_hh, b_ih, b_hh, &[("h0", h0)])?;
        let (Dims { t: t_len, b, h, .. }, settings) = (p.dm, p.settings);
        let (gh, bh) = (3 * h, b * h);
        let [y, gates, hn] = {
            Tensor::build_many_f32([&[t_len, b, h], &[t_len, b, gh], &[t_len, b, h]], |[y, gates, hn_all]| {
                // W_hhᵀ, copied row-major once by the prologue, for every step's product.
                let whh_t = MatRef::row_major(p.whh_t.get(), h, gh);
                for s in 0..t_len {
                    let t = time_of(s, t_len, reverse);
                    let (y_t, y_prev) = step_and_prev(y, t, prev_time(t, t_len, reverse), bh);
                    // The cell update reads h' only when there is one (no h0: none at the
                    // first step); the product reads zeros then.
                    let h_prev = y_prev.or(p.has_h0.then(|| p.h0.get()));
                    let a = MatRef::row_major(h_prev.unwrap_or(p.h0.get()), b, h);
                    gemm(settings, a, whh_t, MatMut::row_major(p.hp.get_mut(), b, gh));
                    let inp = p.cell_inputs(t, gh, h_prev);
                    gates::gru_forward(settings, h, inp, &mut gates[t * b * gh..(t + 1) * b * gh], &mut hn_all[t * bh..(t + 1) * bh], y_t);
                }
                Ok(())
            })
        }?;
        Ok((y, Owned { gates, hn }))
    }

    fn backward(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        gradients(r, g, d).map_err(|e| e.with_op(NAME))
    }

    /// The body of `backward` (`backward` names the operator in a refused buffer's error).
    fn gradients(r: &Record, g: &Tensor, d: &mut Grads) -> Result<()> {
        let dm = record_dims(&r.input_shapes);
        let Dims { t: t_len, b, h, .. } = dm;
        let (gh, bh) = (3 * h, b * h);
        let settings = Compute::settings();
        let h0 = Scratch::of(r.h0.as_ref().map(|s| s.tensor()))?;
        let h_prev = r.out().try_with_f32(|y| previous_states(y, h0.as_ref().map(Scratch::get), dm, r.reverse))??;
        let mut dxg = Scratch::new(t_len * b * gh)?;
        let mut dhg = Scratch::new(t_len * b * gh)?;
        let mut dh_next = Scratch::zeroed(bh)?;
        let mut direct = Scratch::new(bh)?;
        r.gates().try_with_f32(|gates| {
            r.hn().try_with_f32(|hn_all| {
                g.try_with_f32(|gy| {
                    r.w_hh().try_with_f32(|whh| {
                        let (dxg, dhg) = (dxg.get_mut(), dhg.get_mut());
                        for s in (0..t_len).rev() {
                            let t = time_of(s, t_len, r.reverse);
                            let (rows, units) = (t * b * gh..(t + 1) * b * gh, t * bh..(t + 1) * bh);
                            let inp = GruGrads {
                                gates: &gates[rows.clone()],
                                hn: &hn_all[units.clone()],
                                h_prev: Some(&h_prev.get()[units.clone()]),
                                gy: &gy[units],
                                dh_next: dh_next.get(),
                            };
                            gates::gru_backward(settings, h, inp, &mut dxg[rows.clone()], &mut dhg[rows], direct.get_mut());
                            gemm(
                                settings,
                                MatRef::with_stride(&dhg[t * b * gh..], b, gh, gh),
                                MatRef::with_stride(whh, gh, h, h),
                                MatMut::with_stride(dh_next.get_mut(), b, h, h),
                            );
                            for (v, &dd) in dh_next.get_mut().iter_mut().zip(direct.get()) {
                                *v += dd;
                            }
                        }
                    })
                })
            })
        })????;
        let needs = [d.needs_x(), d.needs_w_ih(), d.needs_w_hh(), d.needs_b_ih(), d.needs_b_hh()];
        emit_parameter_grads!(d, parameter_grads(settings, dm, gh, dxg.get(), Some(dhg.get()), r.x(), r.w_ih(), h_prev.get(), needs)?);
        if d.needs_h0() {
            d.h0(Tensor::from_slice(dh_next.get(), &[b, h])?);
        }
        Ok(())
    }
    fn cases() -> Vec<Case> {
        let inp = Case::input;
        vec![
            Case::new(
                "full",
                vec![
                    inp(&[3, 2, 3], -1.0, 1.0, 1),
                    inp(&[6, 3], -0.6, 0.6, 2),
                    inp(&[6, 2], -0.6, 0.6, 3),
                    inp(&[6], -0.5, 0.5, 4),
                    inp(&[6], -0.5, 0.5, 5),
                    inp(&[2, 2], -1.0, 1.0, 6),
                ],
                |t| super::gru_layer(&t[0], &t[1], &t[2], Some(&t[3]), Some(&t[4]), Some(&t[5]), false),
            ),
            Case::new(
                "reverse_full",
                vec![
                    inp(&[4, 2, 2], -1.0, 1.0, 7),
                    inp(&[9, 2], -0.6, 0.6, 8),
                    inp(&[9, 3], -0.6, 0.6, 9),
                    inp(&[9], -0.5, 0.5, 10),
                    inp(&[9], -0.5, 0.5, 11),
                    inp(&[2, 3], -1.0, 1.0, 12),
                ],
                |t| super::gru_layer(&t[0], &t[1], &t[2], Some(&t[3]), Some(&t[4]), Some(&t[5]), true),
            ),
            Case::new(
                "reverse_plain",
                vec![inp(&[3, 2, 3], -1.0, 1.0, 13), inp(&[6, 3], -0.6, 0.6, 14), inp(&[6, 2], -0.6, 0.6, 15)],
                |t| super::gru_layer(&t[0], &t[1], &t[2], None, None, None, true),
            ),
            // Batch-first storage read as [T, B, I]; b_hh and h0 only.
            Case::new(
                "transposed_bhh_h0",
                vec![
                    inp(&[2, 3, 2], -1.0, 1.0, 16),
                    inp(&[6, 2], -0.6, 0.6, 17),
                    inp(&[6, 2], -0.6, 0.6, 18),
                    inp(&[6], -0.5, 0.5, 19),
                    inp(&[2, 2], -1.0, 1.0, 20),
                ],
                |t| super::gru_layer(&crate::transpose(&t[0], 0, 1)?, &t[1], &t[2], None, Some(&t[3]), Some(&t[4]), false),
            ),
            Case::new(
                "bih_only",
                vec![inp(&[2, 1, 2], -1.0, 1.0, 21), inp(&[3, 2], -0.6, 0.6, 22), inp(&[3, 1], -0.6, 0.6, 23), inp(&[3], -0.5, 0.5, 24)],
                |t| super::gru_layer(&t[0], &t[1], &t[2], Some(&t[3]), None, None, false),
            ),
        ]
    }
}

/// Multi-layer, optionally bidirectional GRU as `torch.nn.GRU` (no dropout): `x`
/// `[T, B, I]` (`[B, T, I]` batch-first), one [`RnnWeights`] per layer and direction in
/// PyTorch's order, optional `h0` `[layers·dirs, B, H]`. Returns the last layer's states
/// `y` and the final hidden states `h_n`.
/// Backward: through `gru_layer` (and the concatenation of directions).
///
/// # Examples
///
/// ```
/// use om_ops::{gru, select, RnnConfig, RnnWeights, Tensor};
/// let (t, b, i, h) = (4, 2, 3, 5);
/// let x = Tensor::randn_with_seed(&[b, t, i], 1)?; // batch-first
/// // Two layers: layer 1 reads layer 0's H features.
/// let w = |rows, cols, seed| Tensor::randn_with_seed(&[rows, cols], seed);
/// let weights = vec![
///     RnnWeights::new(w(3 * h, i, 2)?, w(3 * h, h, 3)?, Tensor::zeros(&[3 * h])?, Tensor::zeros(&[3 * h])?),
///     RnnWeights::new(w(3 * h, h, 4)?, w(3 * h, h, 5)?, Tensor::zeros(&[3 * h])?, Tensor::zeros(&[3 * h])?),
/// ];
/// let out = gru(&x, None, &weights, RnnConfig::new(2).batch_first(true))?;
/// assert_eq!(out.y.shape(), [b, t, h]);
/// assert_eq!(out.h_n.shape(), [2, b, h]);
/// assert!(out.c_n.is_none());
/// // The last layer's final state is its output at the last step.
/// assert_eq!(select(&out.h_n, 0, 1)?.to_vec(), select(&out.y, 1, t as isize - 1)?.to_vec());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[op(composition)]
pub mod gru {
    use super::*;

    pub fn forward(x: &Tensor, h0: Option<&Tensor>, weights: &[RnnWeights], config: RnnConfig) -> Result<RnnOutput> {
        let (xt, _) = check_stack(NAME, 3, x, weights, &[("h0", h0)], config)?;
        run_stack(
            xt,
            weights,
            config,
            |inp, w, k, reverse| {
                let h = state(h0, k)?;
                Ok((crate::gru_layer(inp, &w.w_ih, &w.w_hh, w.b_ih.as_ref(), w.b_hh.as_ref(), h.as_ref(), reverse)?, None))
            },
            None,
        )
    }

    fn cases() -> Vec<Case> {
        stack_cases(3, |x, h0, _, w, cfg| super::gru(x, h0, w, cfg))
    }
}
