//! Linear, Conv2d, BatchNorm2d, LayerNorm and Embedding.

use super::{const_param, uniform_param, Forward, Module};
use om_core::rng::{self, Rng};
use om_core::{Error, Result, Tensor};

/// `y = x·Wᵀ + b` (`torch.nn.Linear`): `weight` `[out, in]` and `bias` `[out]` drawn from
/// `U(−1/√in, 1/√in)` (PyTorch's `kaiming_uniform_(a=√5)` and its bias rule), weight
/// first, from one generator seeded with one draw of the default stream
/// ([`om_core::rng::manual_seed`]) or with the `seed` of [`Linear::with_seed`].
#[derive(Module)]
pub struct Linear {
    /// `[out_features, in_features]`.
    #[module(param)]
    pub weight: Tensor,
    /// `[out_features]`, if any.
    #[module(param)]
    pub bias: Option<Tensor>,
}

impl Linear {
    /// A layer with a bias, drawn from the default stream.
    pub fn new(in_features: usize, out_features: usize) -> Result<Linear> {
        Linear::with_seed(in_features, out_features, true, rng::next_seed())
    }

    /// A layer with or without a bias, drawn from the default stream.
    pub fn with_bias(in_features: usize, out_features: usize, bias: bool) -> Result<Linear> {
        Linear::with_seed(in_features, out_features, bias, rng::next_seed())
    }

    /// A layer with or without a bias, drawn from its own generator seeded with `seed`
    /// (the same weights on every call and machine).
    pub fn with_seed(in_features: usize, out_features: usize, bias: bool, seed: u64) -> Result<Linear> {
        if in_features == 0 {
            return Err(Error::argument("Linear", "in_features must be positive"));
        }
        let bound = 1.0 / (in_features as f32).sqrt();
        let mut rng = Rng::new(seed);
        let weight = uniform_param(&[out_features, in_features], bound, &mut rng)?;
        let bias = if bias { Some(uniform_param(&[out_features], bound, &mut rng)?) } else { None };
        Ok(Linear { weight, bias })
    }
}

impl Forward for Linear {
    /// Applies the layer over the last axis of `x` (`[..., in]` → `[..., out]`).
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::linear(x, &self.weight, self.bias.as_ref())
    }
}

/// Options of [`Conv2d`] beyond the channel counts and kernel size (PyTorch's defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dOptions {
    /// Step between windows (rows, columns).
    pub stride: [usize; 2],
    /// Zeros added on each side (rows: top and bottom, columns: left and right).
    pub padding: [usize; 2],
    /// Spacing between kernel taps.
    pub dilation: [usize; 2],
    /// Channel groups (both channel counts must divide by it).
    pub groups: usize,
    /// Whether the layer has a bias.
    pub bias: bool,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions { stride: [1, 1], padding: [0, 0], dilation: [1, 1], groups: 1, bias: true }
    }
}

impl Conv2dOptions {
    /// The defaults with `padding` zeros on every side.
    pub fn padding(p: usize) -> Conv2dOptions {
        Conv2dOptions { padding: [p, p], ..Conv2dOptions::default() }
    }
}

/// 2-d convolution (`torch.nn.Conv2d`): `weight` `[out, in/groups, kH, kW]` and `bias`
/// `[out]` drawn from `U(−1/√fan_in, 1/√fan_in)` with `fan_in = in/groups·kH·kW`, from
/// one draw of the default stream or the `seed` of [`Conv2d::with_seed`].
#[derive(Module)]
pub struct Conv2d {
    /// `[out_channels, in_channels/groups, kH, kW]`.
    #[module(param)]
    pub weight: Tensor,
    /// `[out_channels]`, if any.
    #[module(param)]
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation, groups.
    #[module(skip)]
    pub options: Conv2dOptions,
}

impl Conv2d {
    /// A `kernel×kernel` convolution with the default options (stride 1, no padding, bias).
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize) -> Result<Conv2d> {
        Conv2d::with_options(in_channels, out_channels, [kernel, kernel], Conv2dOptions::default())
    }

    /// A convolution with explicit options, drawn from the default stream.
    pub fn with_options(in_channels: usize, out_channels: usize, kernel: [usize; 2], options: Conv2dOptions) -> Result<Conv2d> {
        Conv2d::with_seed(in_channels, out_channels, kernel, options, rng::next_seed())
    }

    /// A convolution with explicit options, drawn from its own generator seeded with `seed`.
    pub fn with_seed(in_channels: usize, out_channels: usize, kernel: [usize; 2], options: Conv2dOptions, seed: u64) -> Result<Conv2d> {
        let g = options.groups;
        if g == 0 || !in_channels.is_multiple_of(g) || !out_channels.is_multiple_of(g) {
            return Err(Error::argument(
                "Conv2d",
                format!("groups {g} must divide in_channels {in_channels} and out_channels {out_channels}"),
            ));
        }
        let fan_in = in_channels / g * kernel[0] * kernel[1];
        if fan_in == 0 {
            return Err(Error::argument("Conv2d", "in_channels and the kernel size must be positive"));
        }
        let bound = 1.0 / (fan_in as f32).sqrt();
        let mut rng = Rng::new(seed);
        let weight = uniform_param(&[out_channels, in_channels / g, kernel[0], kernel[1]], bound, &mut rng)?;
        let bias = if options.bias { Some(uniform_param(&[out_channels], bound, &mut rng)?) } else { None };
        Ok(Conv2d { weight, bias, options })
    }
}

impl Forward for Conv2d {
    /// Convolves `x` `[N, C, H, W]`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let o = &self.options;
        let [ph, pw] = o.padding;
        crate::conv2d(x, &self.weight, self.bias.as_ref(), o.stride, [ph, pw, ph, pw], o.dilation, o.groups)
    }
}

/// 2-d transposed convolution (`torch.nn.ConvTranspose2d`): `weight`
/// `[in, out/groups, kH, kW]` and `bias` `[out]` drawn from `U(−1/√fan_in, 1/√fan_in)` with
/// PyTorch's `fan_in = out/groups·kH·kW` (its fan rule reads the weight's second axis).
/// `options.padding` is PyTorch's symmetric crop.
#[derive(Module)]
pub struct ConvTranspose2d {
    /// `[in_channels, out_channels/groups, kH, kW]`.
    #[module(param)]
    pub weight: Tensor,
    /// `[out_channels]`, if any.
    #[module(param)]
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation, groups.
    #[module(skip)]
    pub options: Conv2dOptions,
    /// Extra rows/columns at the bottom/right of the output.
    pub output_padding: [usize; 2],
}

impl ConvTranspose2d {
    /// A `kernel×kernel` transposed convolution with the default options.
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize) -> Result<ConvTranspose2d> {
        ConvTranspose2d::with_options(in_channels, out_channels, [kernel, kernel], Conv2dOptions::default())
    }

    /// A transposed convolution with explicit options and no output padding, drawn from
    /// the default stream.
    pub fn with_options(in_channels: usize, out_channels: usize, kernel: [usize; 2], options: Conv2dOptions) -> Result<ConvTranspose2d> {
        ConvTranspose2d::with_seed(in_channels, out_channels, kernel, options, rng::next_seed())
    }

    /// A transposed convolution with explicit options, drawn from its own generator seeded
    /// with `seed`.
    pub fn with_seed(
        in_channels: usize,
        out_channels: usize,
        kernel: [usize; 2],
        options: Conv2dOptions,
        seed: u64,
    ) -> Result<ConvTranspose2d> {
        let g = options.groups;
        if g == 0 || !in_channels.is_multiple_of(g) || !out_channels.is_multiple_of(g) {
            return Err(Error::argument(
                "ConvTranspose2d",
                format!("groups {g} must divide in_channels {in_channels} and out_channels {out_channels}"),
            ));
        }
        let fan_in = out_channels / g * kernel[0] * kernel[1];
        if fan_in == 0 || in_channels == 0 {
            return Err(Error::argument("ConvTranspose2d", "channel counts and the kernel size must be positive"));
        }
        let bound = 1.0 / (fan_in as f32).sqrt();
        let mut rng = Rng::new(seed);
        let weight = uniform_param(&[in_channels, out_channels / g, kernel[0], kernel[1]], bound, &mut rng)?;
        let bias = if options.bias { Some(uniform_param(&[out_channels], bound, &mut rng)?) } else { None };
        Ok(ConvTranspose2d { weight, bias, options, output_padding: [0, 0] })
    }
}

impl Forward for ConvTranspose2d {
    /// Up-samples `x` `[N, C, H, W]`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let o = &self.options;
        crate::conv_transpose2d(x, &self.weight, self.bias.as_ref(), o.stride, o.padding, self.output_padding, o.dilation, o.groups)
    }
}

/// Batch normalisation of `[N, C, H, W]` (`torch.nn.BatchNorm2d`): `weight` (γ) 1,
/// `bias` (β) 0, `running_mean` 0, `running_var` 1, momentum 0.1, ε 1e-5. In training
/// mode it normalises with the batch statistics and the operator updates the running
/// stats in place; in evaluation mode it uses the running stats.
#[derive(Module)]
pub struct BatchNorm2d {
    /// γ `[C]`.
    #[module(param)]
    pub weight: Tensor,
    /// β `[C]`.
    #[module(param)]
    pub bias: Tensor,
    /// `[C]`, no gradient.
    #[module(buffer)]
    pub running_mean: Tensor,
    /// `[C]`, no gradient.
    #[module(buffer)]
    pub running_var: Tensor,
    /// Weight of the batch statistics in the running-stat update.
    pub momentum: f32,
    /// Added to the variance.
    pub eps: f32,
    /// Training (batch statistics) or evaluation (running statistics).
    #[module(training)]
    pub training: bool,
}

impl BatchNorm2d {
    /// A layer over `channels` channels, in training mode.
    pub fn new(channels: usize) -> Result<BatchNorm2d> {
        Ok(BatchNorm2d {
            weight: const_param(&[channels], 1.0)?,
            bias: const_param(&[channels], 0.0)?,
            running_mean: Tensor::zeros(&[channels])?,
            running_var: Tensor::ones(&[channels])?,
            momentum: 0.1,
            eps: 1e-5,
            training: true,
        })
    }
}

impl Forward for BatchNorm2d {
    /// Normalises `x` `[N, C, H, W]` per channel.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::batch_norm2d(
            x,
            Some(&self.weight),
            Some(&self.bias),
            Some(&self.running_mean),
            Some(&self.running_var),
            self.training,
            self.momentum,
            self.eps,
        )
    }
}

/// Layer normalisation over the last axis (`torch.nn.LayerNorm` with one normalised
/// dimension): `weight` (γ) 1, `bias` (β) 0, ε 1e-5.
#[derive(Module)]
pub struct LayerNorm {
    /// γ `[D]`.
    #[module(param)]
    pub weight: Tensor,
    /// β `[D]`.
    #[module(param)]
    pub bias: Tensor,
    /// Added to the variance.
    pub eps: f32,
}

impl LayerNorm {
    /// A layer over a last axis of `dim` features.
    pub fn new(dim: usize) -> Result<LayerNorm> {
        Ok(LayerNorm { weight: const_param(&[dim], 1.0)?, bias: const_param(&[dim], 0.0)?, eps: 1e-5 })
    }
}

impl Forward for LayerNorm {
    /// Normalises every row of the last axis of `x`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::layer_norm(x, Some(&self.weight), Some(&self.bias), self.eps)
    }
}

/// A lookup table (`torch.nn.Embedding`): `weight` `[num, dim]` drawn from N(0, 1); the
/// `padding_idx` row, if any, starts at zero and receives no gradient.
#[derive(Module)]
pub struct Embedding {
    /// `[num_embeddings, embedding_dim]`.
    #[module(param)]
    pub weight: Tensor,
    /// The row whose gradient is always zero.
    pub padding_idx: Option<usize>,
}

impl Embedding {
    /// A table of `num` rows of `dim` features, drawn from the default stream.
    pub fn new(num: usize, dim: usize, padding_idx: Option<usize>) -> Result<Embedding> {
        Embedding::with_seed(num, dim, padding_idx, rng::next_seed())
    }

    /// A table drawn from its own generator seeded with `seed`.
    pub fn with_seed(num: usize, dim: usize, padding_idx: Option<usize>, seed: u64) -> Result<Embedding> {
        if let Some(p) = padding_idx {
            if p >= num {
                return Err(Error::argument("Embedding", format!("padding_idx {p} is out of range for {num} rows")));
            }
        }
        let weight = Tensor::randn_with_seed(&[num, dim], seed)?;
        if let Some(p) = padding_idx {
            weight.update_f32("Embedding", |w| w[p * dim..(p + 1) * dim].fill(0.0))?;
        }
        Ok(Embedding { weight: weight.requires_grad()?, padding_idx })
    }
}

impl Forward for Embedding {
    /// The rows of `ids` (`i32`, any shape) → `[..ids, dim]`.
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        crate::embedding(&self.weight, ids, self.padding_idx.map(|p| p as i64))
    }
}
