//! Lstm and Gru stacks over `om_ops::lstm` / `om_ops::gru`.

use super::{uniform_param, Module};
use crate::{RnnConfig, RnnOutput, RnnWeights};
use om_core::rng::{self, Rng};
use om_core::{Error, Result, Tensor};

/// The weights of a `gates`-gate stack, PyTorch's names and order: for each layer, for
/// each direction, `weight_ih_l{k}`, `weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}`
/// (`_reverse` suffix for the reverse direction), all from `U(−1/√H, 1/√H)`.
///
/// The one hand-written `Module` impl of the crate: PyTorch computes these names from the
/// layer and direction (`weight_hh_l1_reverse`), which no field layout spells.
struct Stack {
    weights: Vec<RnnWeights>,
    config: RnnConfig,
}

impl Stack {
    fn new(what: &'static str, gates: usize, input: usize, hidden: usize, config: RnnConfig, seed: u64) -> Result<Stack> {
        if hidden == 0 || input == 0 || config.layers == 0 {
            return Err(Error::argument(what, "input size, hidden size and layer count must be positive"));
        }
        let rows = super::checked_size(what, "gates × hidden size", &[gates, hidden])?;
        super::checked_size(what, "directions × hidden size", &[config.dirs(), hidden])?;
        let bound = 1.0 / (hidden as f32).sqrt();
        let mut rng = Rng::new(seed);
        let mut weights = Vec::new();
        for layer in 0..config.layers {
            let in_f = if layer == 0 { input } else { config.dirs() * hidden };
            for _ in 0..config.dirs() {
                let w_ih = uniform_param(&[rows, in_f], bound, &mut rng)?;
                let w_hh = uniform_param(&[rows, hidden], bound, &mut rng)?;
                let b_ih = uniform_param(&[rows], bound, &mut rng)?;
                let b_hh = uniform_param(&[rows], bound, &mut rng)?;
                weights.push(RnnWeights::new(w_ih, w_hh, b_ih, b_hh));
            }
        }
        Ok(Stack { weights, config })
    }
}

impl Module for Stack {
    fn visit_parameters(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        for (i, w) in self.weights.iter().enumerate() {
            let (layer, dir) = (i / self.config.dirs(), i % self.config.dirs());
            let sfx = if dir == 1 { format!("l{layer}_reverse") } else { format!("l{layer}") };
            f(&format!("weight_ih_{sfx}"), &w.w_ih);
            f(&format!("weight_hh_{sfx}"), &w.w_hh);
            if let Some(b) = &w.b_ih {
                f(&format!("bias_ih_{sfx}"), b);
            }
            if let Some(b) = &w.b_hh {
                f(&format!("bias_hh_{sfx}"), b);
            }
        }
    }
}

/// A multi-layer, optionally bidirectional LSTM (`torch.nn.LSTM` without dropout or
/// projections), initialised as PyTorch does.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Lstm, Module};
/// use om_ops::{RnnConfig, Tensor};
/// let rnn = Lstm::new(10, 20, RnnConfig::new(2))?; // nn.LSTM(10, 20, 2)
/// let x = Tensor::randn(&[5, 3, 10])?; // [T, B, input]
/// let (h0, c0) = (Tensor::zeros(&[2, 3, 20])?, Tensor::zeros(&[2, 3, 20])?);
/// let out = rnn.forward(&x, Some(&h0), Some(&c0))?;
/// assert_eq!(out.y.shape(), &[5, 3, 20]);
/// assert_eq!(out.h_n.shape(), &[2, 3, 20]);
/// assert_eq!(out.c_n.unwrap().shape(), &[2, 3, 20]);
/// // The last step of the last layer's output is that layer's final hidden state.
/// assert_eq!(&out.y.to_vec()[4 * 60..], &out.h_n.to_vec()[60..]);
/// let names: Vec<String> = rnn.parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names[..4], ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Module)]
pub struct Lstm {
    #[module(flatten)]
    stack: Stack,
}

impl Lstm {
    /// `config.layers` layers of `hidden` units reading `input` features, drawn from the
    /// default stream.
    pub fn new(input: usize, hidden: usize, config: RnnConfig) -> Result<Lstm> {
        Lstm::with_seed(input, hidden, config, rng::next_seed())
    }

    /// The same, drawn from its own generator seeded with `seed`.
    pub fn with_seed(input: usize, hidden: usize, config: RnnConfig, seed: u64) -> Result<Lstm> {
        Ok(Lstm { stack: Stack::new("Lstm", 4, input, hidden, config, seed)? })
    }

    /// Runs the stack on `x` (`[T, B, I]`, or `[B, T, I]` batch-first) from optional
    /// states `[layers·dirs, B, H]`.
    pub fn forward(&self, x: &Tensor, h0: Option<&Tensor>, c0: Option<&Tensor>) -> Result<RnnOutput> {
        crate::lstm(x, h0, c0, &self.stack.weights, self.stack.config)
    }
}

/// A multi-layer, optionally bidirectional GRU (`torch.nn.GRU` without dropout),
/// initialised as PyTorch does.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Gru, Module};
/// use om_ops::{RnnConfig, Tensor};
/// // nn.GRU(10, 20, bidirectional=True, batch_first=True)
/// let rnn = Gru::new(10, 20, RnnConfig::new(1).bidirectional(true).batch_first(true))?;
/// let out = rnn.forward(&Tensor::randn(&[3, 5, 10])?, None)?; // [B, T, input], h0 = 0
/// assert_eq!(out.y.shape(), &[3, 5, 40]); // both directions on the feature axis
/// assert_eq!(out.h_n.shape(), &[2, 3, 20]);
/// assert!(out.c_n.is_none());
/// assert_eq!(rnn.parameters()[4].0, "weight_ih_l0_reverse");
/// assert_eq!(rnn.parameters()[0].1.shape(), &[60, 10]); // 3 gates · 20
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Module)]
pub struct Gru {
    #[module(flatten)]
    stack: Stack,
}

impl Gru {
    /// `config.layers` layers of `hidden` units reading `input` features, drawn from the
    /// default stream.
    pub fn new(input: usize, hidden: usize, config: RnnConfig) -> Result<Gru> {
        Gru::with_seed(input, hidden, config, rng::next_seed())
    }

    /// The same, drawn from its own generator seeded with `seed`.
    pub fn with_seed(input: usize, hidden: usize, config: RnnConfig, seed: u64) -> Result<Gru> {
        Ok(Gru { stack: Stack::new("Gru", 3, input, hidden, config, seed)? })
    }

    /// Runs the stack on `x` (`[T, B, I]`, or `[B, T, I]` batch-first) from an optional
    /// state `[layers·dirs, B, H]`.
    pub fn forward(&self, x: &Tensor, h0: Option<&Tensor>) -> Result<RnnOutput> {
        crate::gru(x, h0, &self.stack.weights, self.stack.config)
    }
}
