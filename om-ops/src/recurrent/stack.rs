//! The layer stack of `lstm` and `gru`: weights, configuration, output, argument checks,
//! the run over layers and directions, and the gradient-check cases of a stack.

use super::*;

// ===== multi-layer compositions =====

/// The weights of one layer and direction, as in a PyTorch state dict: `w_ih` =
/// `weight_ih_l{k}[_reverse]` (`[gH, I]` for layer 0, `[gH, dirs·H]` above), `w_hh` =
/// `weight_hh_l{k}[_reverse]` (`[gH, H]`), `b_ih`/`b_hh` = `bias_ih_l{k}[_reverse]`/
/// `bias_hh_l{k}[_reverse]` (`[gH]`, absent for `bias=False`); `g` is 4 (LSTM) or 3 (GRU).
#[derive(Clone, Debug)]
pub struct RnnWeights {
    /// Input-to-hidden weights `[gH, I]`.
    pub w_ih: Tensor,
    /// Hidden-to-hidden weights `[gH, H]`.
    pub w_hh: Tensor,
    /// Input-side bias `[gH]`.
    pub b_ih: Option<Tensor>,
    /// Hidden-side bias `[gH]`.
    pub b_hh: Option<Tensor>,
}

impl RnnWeights {
    /// Weights with both biases.
    pub fn new(w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor) -> RnnWeights {
        RnnWeights { w_ih, w_hh, b_ih: Some(b_ih), b_hh: Some(b_hh) }
    }

    /// Weights without biases (`bias=False`).
    pub fn without_bias(w_ih: Tensor, w_hh: Tensor) -> RnnWeights {
        RnnWeights { w_ih, w_hh, b_ih: None, b_hh: None }
    }

    /// The weights as the layer checks borrow them.
    pub(super) fn borrowed(&self) -> LayerWeights<'_> {
        LayerWeights { w_ih: &self.w_ih, w_hh: &self.w_hh, b_ih: self.b_ih.as_ref(), b_hh: self.b_hh.as_ref() }
    }

    /// Takes the weights from a flat list in PyTorch's parameter order: per layer and
    /// direction `w_ih, w_hh, b_ih, b_hh` (with `bias`) or `w_ih, w_hh` (without).
    pub fn from_flat(ts: &[Tensor], bias: bool) -> Vec<RnnWeights> {
        let per = if bias { 4 } else { 2 };
        ts.chunks(per)
            .map(|c| RnnWeights {
                w_ih: c[0].clone(),
                w_hh: c[1].clone(),
                b_ih: c.get(2).filter(|_| bias).cloned(),
                b_hh: c.get(3).filter(|_| bias).cloned(),
            })
            .collect()
    }
}

/// The structure of a recurrent stack: PyTorch's `num_layers`, `bidirectional` and
/// `batch_first` of `nn.LSTM`/`nn.GRU`, with PyTorch's defaults (`Default`: one layer,
/// unidirectional, time-major) and a builder method per field.
///
/// ```
/// use om_ops::RnnConfig;
/// // nn.LSTM(.., num_layers=2, bidirectional=True, batch_first=True)
/// let c = RnnConfig::default().layers(2).bidirectional(true).batch_first(true);
/// assert_eq!(c, RnnConfig { layers: 2, bidirectional: true, batch_first: true });
/// assert_eq!(RnnConfig::default(), RnnConfig::new(1));
/// assert_eq!(c.dirs(), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RnnConfig {
    /// Number of stacked layers (at least 1).
    pub layers: usize,
    /// Whether each layer also runs in reverse (outputs concatenated on the feature axis).
    pub bidirectional: bool,
    /// Whether `x` and `y` are `[B, T, F]` instead of `[T, B, F]`.
    pub batch_first: bool,
}

impl RnnConfig {
    /// `layers` unidirectional layers, time-major.
    pub fn new(layers: usize) -> RnnConfig {
        RnnConfig { layers, bidirectional: false, batch_first: false }
    }

    /// The number of stacked layers (at least 1). Default 1.
    pub fn layers(self, layers: usize) -> RnnConfig {
        RnnConfig { layers, ..self }
    }

    /// Whether each layer also runs in reverse. Default off.
    pub fn bidirectional(self, bidirectional: bool) -> RnnConfig {
        RnnConfig { bidirectional, ..self }
    }

    /// Whether `x` and `y` are `[B, T, F]` instead of `[T, B, F]`. Default off.
    pub fn batch_first(self, batch_first: bool) -> RnnConfig {
        RnnConfig { batch_first, ..self }
    }

    /// Number of directions (1 or 2).
    pub fn dirs(&self) -> usize {
        if self.bidirectional {
            2
        } else {
            1
        }
    }
}

impl Default for RnnConfig {
    /// PyTorch's defaults: one layer, unidirectional, time-major.
    fn default() -> Self {
        RnnConfig::new(1)
    }
}

/// The outputs of `lstm`/`gru`.
#[derive(Clone, Debug)]
pub struct RnnOutput {
    /// Every step's hidden state of the last layer: `[T, B, dirs·H]` (`[B, T, dirs·H]`
    /// batch-first).
    pub y: Tensor,
    /// The final hidden state of every layer and direction `[layers·dirs, B, H]` (step
    /// T−1 of a forward layer, step 0 of a reverse one).
    pub h_n: Tensor,
    /// The final cell state of every layer and direction `[layers·dirs, B, H]` (LSTM only;
    /// `None` for a GRU), as `torch.nn.LSTM` returns it: pass it back as `c0` (with `h_n`
    /// as `h0`) to continue a long sequence in chunks.
    pub c_n: Option<Tensor>,
}

/// Validates a stack: `x` rank 3 f32, the weight count, every layer's weight shapes (layer
/// l > 0 reads `dirs·H` features) and the `[layers·dirs, B, H]` initial states. Returns
/// `(x as [T, B, I], H)`.
pub(super) fn check_stack(
    op: &'static str,
    gates: usize,
    x: &Tensor,
    weights: &[RnnWeights],
    states: &[(&'static str, Option<&Tensor>)],
    config: RnnConfig,
) -> Result<(Tensor, usize)> {
    x.expect_f32(op, "x")?;
    if x.rank() != 3 {
        let layout = if config.batch_first { "[B, T, I]" } else { "[T, B, I]" };
        return Err(Error::shape(op, &[x.shape()], format!("x must be {layout} (rank 3), got rank {}", x.rank())));
    }
    let xt = if config.batch_first { crate::transpose(x, 0, 1)? } else { x.clone() };
    if config.layers == 0 {
        return Err(Error::argument(op, "layers must be at least 1"));
    }
    let dirs = config.dirs();
    if weights.len() != config.layers * dirs {
        return Err(Error::argument(
            op,
            format!(
                "expected {} weight sets ({} layers × {dirs} directions, PyTorch order: layer 0 forward, layer 0 reverse, …), got {}",
                config.layers * dirs,
                config.layers,
                weights.len()
            ),
        ));
    }
    let w0 = &weights[0].w_hh;
    if w0.rank() != 2 || w0.shape()[1] == 0 {
        return Err(Error::shape(op, &[w0.shape()], format!("w_hh must be [{gates}·H, H] with H ≥ 1, got {:?}", w0.shape())));
    }
    let h = w0.shape()[1];
    let (t, b) = (xt.shape()[0], xt.shape()[1]);
    for (k, w) in weights.iter().enumerate() {
        let features = if k < dirs { xt.shape()[2] } else { dirs * h };
        let dm = check_layer(op, gates, &[t, b, features], w.borrowed(), &[])?;
        if dm.h != h {
            return Err(Error::shape(op, &[w0.shape(), w.w_hh.shape()], format!("weight set {k} has H = {}, set 0 has H = {h}", dm.h)));
        }
    }
    for &(arg, s) in states {
        if let Some(s) = s {
            s.expect_f32(op, arg)?;
            if s.shape() != [config.layers * dirs, b, h] {
                return Err(Error::shape(
                    op,
                    &[x.shape(), s.shape()],
                    format!("`{arg}` must be [layers·dirs, B, H] = [{}, {b}, {h}], got {:?}", config.layers * dirs, s.shape()),
                ));
            }
        }
    }
    Ok((xt, h))
}

/// Both directions of one bidirectional layer at once: `pair(input, forward weights,
/// reverse weights, k)` (`k` the forward direction's weight set) returns the states of both
/// directions side by side `[T, B, 2H]` and their final cell states `[B, 2H]`.
pub(super) type PairLayer<'a> = &'a dyn Fn(&Tensor, &RnnWeights, &RnnWeights, usize) -> Result<(Tensor, Tensor)>;

/// Runs a stack of layers: `layer(input, weights, k, reverse)` runs weight set `k` and
/// returns its states `[T, B, H]` and, for an LSTM, its final cell state `[B, H]`; a
/// bidirectional layer runs on `pair` when given (both directions at once), else as two
/// `layer` calls and a concatenation.
pub(super) fn run_stack(
    xt: Tensor,
    weights: &[RnnWeights],
    config: RnnConfig,
    layer: impl Fn(&Tensor, &RnnWeights, usize, bool) -> Result<(Tensor, Option<Tensor>)>,
    pair: Option<PairLayer>,
) -> Result<RnnOutput> {
    let dirs = config.dirs();
    let t_len = xt.shape()[0];
    let mut input = xt;
    with_tensor_list(|finals| {
        with_tensor_list(|cells| {
            for l in 0..config.layers {
                if let (2, Some(pair)) = (dirs, pair) {
                    let k = l * dirs;
                    let (y, cell) = pair(&input, &weights[k], &weights[k + 1], k)?;
                    let h = y.shape()[2] / 2;
                    let half = |t: &Tensor, axis: isize, dir: usize| crate::slice(t, axis, (dir * h) as isize, ((dir + 1) * h) as isize, 1);
                    for (dir, last) in [(0, t_len as isize - 1), (1, 0)] {
                        finals.push(crate::unsqueeze(&crate::select(&half(&y, 2, dir)?, 0, last)?, 0)?);
                        cells.push(crate::unsqueeze(&half(&cell, 1, dir)?, 0)?);
                    }
                    input = y;
                    continue;
                }
                let mut run = |dir: usize| -> Result<Tensor> {
                    let k = l * dirs + dir;
                    let reverse = dir == 1;
                    let (y, cell) = layer(&input, &weights[k], k, reverse)?;
                    let last = if reverse { 0 } else { t_len as isize - 1 };
                    finals.push(crate::unsqueeze(&crate::select(&y, 0, last)?, 0)?);
                    if let Some(c) = cell {
                        cells.push(crate::unsqueeze(&c, 0)?);
                    }
                    Ok(y)
                };
                let forward = run(0)?;
                input = if dirs == 1 { forward } else { crate::concat(&[forward, run(1)?], 2)? };
            }
            let y = if config.batch_first { crate::transpose(&input, 0, 1)? } else { input };
            let c_n = if cells.is_empty() { None } else { Some(crate::concat(cells, 0)?) };
            Ok(RnnOutput { y, h_n: crate::concat(finals, 0)?, c_n })
        })
    })
}

thread_local! {
    /// Emptied tensor lists kept for [`with_tensor_list`], so a warm step does not allocate one.
    static TENSOR_LISTS: std::cell::RefCell<Vec<Vec<Tensor>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with an empty tensor list whose capacity is reused across calls on this thread
/// (the list is emptied, dropping its handles, before it is kept again).
fn with_tensor_list<R>(f: impl FnOnce(&mut Vec<Tensor>) -> R) -> R {
    let mut list = TENSOR_LISTS.with(|l| l.borrow_mut().pop()).unwrap_or_default();
    let out = f(&mut list);
    list.clear();
    let _ = TENSOR_LISTS.try_with(|l| l.borrow_mut().push(list));
    out
}

/// The `[B, H]` slice `k` of an optional `[layers·dirs, B, H]` state.
pub(super) fn state(s: Option<&Tensor>, k: usize) -> Result<Option<Tensor>> {
    s.map(|s| crate::select(s, 0, k as isize)).transpose()
}

/// A stack under test: `(x, h0, c0, weights, config)`.
type StackFn = fn(&Tensor, Option<&Tensor>, Option<&Tensor>, &[RnnWeights], RnnConfig) -> Result<RnnOutput>;

/// Gradient-check cases of a stack with `gates` gate blocks: the checked function is the
/// concatenation of `y`, `h_n` and (LSTM) `c_n`, flattened.
pub(super) fn stack_cases(gates: usize, f: StackFn) -> Vec<Case> {
    let lstm = gates == 4;
    let spec = |name, [t, b, i, h, layers]: [usize; 5], [bidirectional, batch_first, bias, states]: [bool; 4]| {
        (name, [t, b, i, h], RnnConfig { layers, bidirectional, batch_first }, bias, states)
    };
    let specs = [
        spec("one_layer", [3, 2, 3, 2, 1], [false, false, true, false]),
        spec("two_layers_states", [3, 2, 2, 2, 2], [false, false, true, true]),
        spec("bidirectional_no_bias", [3, 2, 2, 2, 1], [true, false, false, false]),
        spec("bidirectional_two_layers_batch_first_states", [2, 2, 2, 2, 2], [true, true, true, true]),
        spec("batch_first_no_bias_states", [4, 1, 2, 3, 1], [false, true, false, true]),
    ];
    specs
        .into_iter()
        .enumerate()
        .map(|(n, (name, [t, b, i, h], config, bias, states))| {
            let RnnConfig { layers, batch_first, .. } = config;
            let dirs = config.dirs();
            let mut seed = 100 * n as u64;
            let mut next = || {
                seed += 1;
                seed
            };
            let x_shape = if batch_first { [b, t, i] } else { [t, b, i] };
            let mut inputs = vec![Case::input(&x_shape, -1.0, 1.0, next())];
            let n_states = if states {
                if lstm {
                    2
                } else {
                    1
                }
            } else {
                0
            };
            for _ in 0..n_states {
                inputs.push(Case::input(&[layers * dirs, b, h], -1.0, 1.0, next()));
            }
            for l in 0..layers {
                let features = if l == 0 { i } else { dirs * h };
                for _ in 0..dirs {
                    inputs.push(Case::input(&[gates * h, features], -0.6, 0.6, next()));
                    inputs.push(Case::input(&[gates * h, h], -0.6, 0.6, next()));
                    if bias {
                        inputs.push(Case::input(&[gates * h], -0.5, 0.5, next()));
                        inputs.push(Case::input(&[gates * h], -0.5, 0.5, next()));
                    }
                }
            }
            Case::new(name, inputs, move |ts| {
                let (h0, c0) = match n_states {
                    2 => (Some(&ts[1]), Some(&ts[2])),
                    1 => (Some(&ts[1]), None),
                    _ => (None, None),
                };
                let weights = RnnWeights::from_flat(&ts[1 + n_states..], bias);
                let out = f(&ts[0], h0, c0, &weights, config)?;
                let mut parts = vec![crate::reshape(&out.y, [-1])?, crate::reshape(&out.h_n, [-1])?];
                if let Some(c_n) = &out.c_n {
                    parts.push(crate::reshape(c_n, [-1])?);
                }
                crate::concat(&parts, 0)
            })
        })
        .collect()
}
