//! Linear, Conv2d, BatchNorm2d, LayerNorm and Embedding.

use super::{const_param, uniform_param, Forward, Module};
use crate::{Conv2dOptions, ConvTranspose2dOptions, Pair};
use om_core::rng::{self, Rng};
use om_core::{Error, Result, Tensor};

/// `y = x·Wᵀ + b` (`torch.nn.Linear`): `weight` `[out, in]` and `bias` `[out]` drawn from
/// `U(−1/√in, 1/√in)` (PyTorch's `kaiming_uniform_(a=√5)` and its bias rule), weight
/// first, from one generator seeded with one draw of the default stream
/// ([`om_core::rng::manual_seed`]) or with the `seed` of [`Linear::with_seed`].
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Forward, Linear};
/// use om_ops::Tensor;
/// let fc = Linear::new(20, 30)?; // nn.Linear(20, 30)
/// let x = Tensor::randn(&[128, 20])?;
/// assert_eq!(fc.forward(&x)?.shape(), &[128, 30]);
/// assert_eq!(fc.weight.shape(), &[30, 20]);
/// let bound = 1.0 / 20f32.sqrt();
/// assert!(fc.weight.to_vec().iter().all(|w| w.abs() <= bound));
/// // y = x·Wᵀ + b: a zero input gives the bias.
/// let y0 = fc.forward(&Tensor::zeros(&[1, 20])?)?;
/// assert_eq!(y0.to_vec(), fc.bias.as_ref().unwrap().to_vec());
/// assert!(Linear::with_bias(20, 30, false)?.bias.is_none()); // bias=False
/// # Ok::<(), om_ops::Error>(())
/// ```
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

/// 2-d convolution (`torch.nn.Conv2d`): `weight` `[out, in/groups, kH, kW]` and `bias`
/// `[out]` drawn from `U(−1/√fan_in, 1/√fan_in)` with `fan_in = in/groups·kH·kW`, from
/// one draw of the default stream or the `seed` of [`Conv2d::with_seed`]. Stride, padding,
/// dilation and groups are the [`Conv2dOptions`] that [`crate::conv2d()`] takes
/// (PyTorch's defaults); [`Conv2d::without_bias`] is PyTorch's `bias=False`.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Conv2d, Forward};
/// use om_ops::{Conv2dOptions, Tensor};
/// let x = Tensor::randn(&[2, 3, 8, 8])?;
/// let conv = Conv2d::new(3, 4, 3)?; // nn.Conv2d(3, 4, 3)
/// assert_eq!(conv.forward(&x)?.shape(), &[2, 4, 6, 6]);
/// // nn.Conv2d(3, 6, (3, 1), stride=2, padding=1, groups=3, bias=False)
/// let conv = Conv2d::with_options(3, 6, [3, 1], Conv2dOptions::default().stride(2).padding(1).groups(3))?.without_bias();
/// assert_eq!(conv.forward(&x)?.shape(), &[2, 6, 4, 5]);
/// assert!(conv.bias.is_none());
/// # Ok::<(), om_ops::Error>(())
/// ```
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

/// The kernel size of layer `what` as `[kH, kW]`, refusing negative sizes.
fn kernel_size(what: &'static str, kernel: impl Into<Pair>) -> Result<[usize; 2]> {
    kernel.into().get(what, "kernel size")
}

/// Checks the channel counts of layer `what` against `groups`.
fn check_groups(what: &'static str, in_channels: usize, out_channels: usize, g: usize) -> Result<()> {
    if g == 0 || !in_channels.is_multiple_of(g) || !out_channels.is_multiple_of(g) {
        return Err(Error::argument(what, format!("groups {g} must divide in_channels {in_channels} and out_channels {out_channels}")));
    }
    Ok(())
}

impl Conv2d {
    /// A convolution with a `kernel` of an int or (kH, kW), PyTorch's default options
    /// (stride 1, no padding) and a bias, drawn from the default stream.
    pub fn new(in_channels: usize, out_channels: usize, kernel: impl Into<Pair>) -> Result<Conv2d> {
        Conv2d::with_options(in_channels, out_channels, kernel, Conv2dOptions::default())
    }

    /// A convolution with explicit options and a bias, drawn from the default stream.
    pub fn with_options(in_channels: usize, out_channels: usize, kernel: impl Into<Pair>, options: Conv2dOptions) -> Result<Conv2d> {
        Conv2d::with_seed(in_channels, out_channels, kernel, options, rng::next_seed())
    }

    /// A convolution with explicit options and a bias, drawn from its own generator seeded
    /// with `seed` (the weight first, so [`without_bias`](Self::without_bias) leaves it as
    /// PyTorch's `bias=False` draws it).
    pub fn with_seed(
        in_channels: usize,
        out_channels: usize,
        kernel: impl Into<Pair>,
        options: Conv2dOptions,
        seed: u64,
    ) -> Result<Conv2d> {
        let kernel = kernel_size("Conv2d", kernel)?;
        let g = options.groups_count();
        check_groups("Conv2d", in_channels, out_channels, g)?;
        let fan_in = super::checked_size("Conv2d", "the fan-in (in_channels/groups × kernel)", &[in_channels / g, kernel[0], kernel[1]])?;
        if fan_in == 0 {
            return Err(Error::argument("Conv2d", "in_channels and the kernel size must be positive"));
        }
        let bound = 1.0 / (fan_in as f32).sqrt();
        let mut rng = Rng::new(seed);
        let weight = uniform_param(&[out_channels, in_channels / g, kernel[0], kernel[1]], bound, &mut rng)?;
        let bias = Some(uniform_param(&[out_channels], bound, &mut rng)?);
        Ok(Conv2d { weight, bias, options })
    }

    /// The layer without its bias (PyTorch's `bias=False`).
    pub fn without_bias(self) -> Conv2d {
        Conv2d { bias: None, ..self }
    }
}

impl Forward for Conv2d {
    /// Convolves `x` `[N, C, H, W]` (or unbatched `[C, H, W]`).
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::conv2d(x, &self.weight, self.bias.as_ref(), self.options)
    }
}

/// 2-d transposed convolution (`torch.nn.ConvTranspose2d`): `weight`
/// `[in, out/groups, kH, kW]` and `bias` `[out]` drawn from `U(−1/√fan_in, 1/√fan_in)` with
/// PyTorch's `fan_in = out/groups·kH·kW` (its fan rule reads the weight's second axis).
/// Stride, padding (PyTorch's symmetric crop), output padding, dilation and groups are the
/// [`ConvTranspose2dOptions`] that [`crate::conv_transpose2d()`] takes.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{ConvTranspose2d, Forward};
/// use om_ops::{ConvTranspose2dOptions, Tensor};
/// let x = Tensor::randn(&[2, 4, 5, 5])?;
/// // nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)
/// let o = ConvTranspose2dOptions::default().stride(2).padding(1).output_padding(1);
/// let up = ConvTranspose2d::with_options(4, 6, 3, o)?;
/// assert_eq!(up.forward(&x)?.shape(), &[2, 6, 10, 10]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Module)]
pub struct ConvTranspose2d {
    /// `[in_channels, out_channels/groups, kH, kW]`.
    #[module(param)]
    pub weight: Tensor,
    /// `[out_channels]`, if any.
    #[module(param)]
    pub bias: Option<Tensor>,
    /// Stride, padding, output padding, dilation, groups.
    #[module(skip)]
    pub options: ConvTranspose2dOptions,
}

impl ConvTranspose2d {
    /// A transposed convolution with a `kernel` of an int or (kH, kW), PyTorch's default
    /// options and a bias, drawn from the default stream.
    pub fn new(in_channels: usize, out_channels: usize, kernel: impl Into<Pair>) -> Result<ConvTranspose2d> {
        ConvTranspose2d::with_options(in_channels, out_channels, kernel, ConvTranspose2dOptions::default())
    }

    /// A transposed convolution with explicit options and a bias, drawn from the default
    /// stream.
    pub fn with_options(
        in_channels: usize,
        out_channels: usize,
        kernel: impl Into<Pair>,
        options: ConvTranspose2dOptions,
    ) -> Result<ConvTranspose2d> {
        ConvTranspose2d::with_seed(in_channels, out_channels, kernel, options, rng::next_seed())
    }

    /// A transposed convolution with explicit options and a bias, drawn from its own
    /// generator seeded with `seed` (the weight first).
    pub fn with_seed(
        in_channels: usize,
        out_channels: usize,
        kernel: impl Into<Pair>,
        options: ConvTranspose2dOptions,
        seed: u64,
    ) -> Result<ConvTranspose2d> {
        let kernel = kernel_size("ConvTranspose2d", kernel)?;
        let g = options.groups_count();
        check_groups("ConvTranspose2d", in_channels, out_channels, g)?;
        let fan_in =
            super::checked_size("ConvTranspose2d", "the fan-in (out_channels/groups × kernel)", &[out_channels / g, kernel[0], kernel[1]])?;
        if fan_in == 0 || in_channels == 0 {
            return Err(Error::argument("ConvTranspose2d", "channel counts and the kernel size must be positive"));
        }
        let bound = 1.0 / (fan_in as f32).sqrt();
        let mut rng = Rng::new(seed);
        let weight = uniform_param(&[in_channels, out_channels / g, kernel[0], kernel[1]], bound, &mut rng)?;
        let bias = Some(uniform_param(&[out_channels], bound, &mut rng)?);
        Ok(ConvTranspose2d { weight, bias, options })
    }

    /// The layer without its bias (PyTorch's `bias=False`).
    pub fn without_bias(self) -> ConvTranspose2d {
        ConvTranspose2d { bias: None, ..self }
    }
}

impl Forward for ConvTranspose2d {
    /// Up-samples `x` `[N, C, H, W]` (or unbatched `[C, H, W]`).
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::conv_transpose2d(x, &self.weight, self.bias.as_ref(), self.options)
    }
}

/// Batch normalisation of `[N, C, H, W]` (`torch.nn.BatchNorm2d`): `weight` (γ) 1,
/// `bias` (β) 0, `running_mean` 0, `running_var` 1, momentum 0.1, ε 1e-5. In training
/// mode it normalises with the batch statistics and the operator updates the running
/// stats in place; in evaluation mode it uses the running stats.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{BatchNorm2d, Forward, Module};
/// use om_ops::Tensor;
/// let mut bn = BatchNorm2d::new(3)?; // nn.BatchNorm2d(3)
/// let x = Tensor::full(&[4, 3, 2, 2], 2.0)?;
/// // Training: the batch statistics (mean 2, variance 0) normalise every value to 0 …
/// assert_eq!(bn.forward(&x)?.to_vec(), vec![0.0; 48]);
/// // … and the running stats move by momentum 0.1: mean 0.9·0 + 0.1·2, var 0.9·1 + 0.1·0.
/// assert!(bn.running_mean.to_vec().iter().all(|m| (m - 0.2).abs() < 1e-6));
/// assert!(bn.running_var.to_vec().iter().all(|v| (v - 0.9).abs() < 1e-6));
/// // Evaluation: the running stats, (2 − 0.2) / √(0.9 + 1e-5).
/// bn.eval();
/// let y = bn.forward(&x)?.to_vec();
/// assert!((y[0] - 1.8 / (0.9f32 + 1e-5).sqrt()).abs() < 1e-5);
/// # Ok::<(), om_ops::Error>(())
/// ```
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
            crate::BatchNormOptions::train().training(self.training).momentum(self.momentum).eps(self.eps),
        )
    }
}

/// Layer normalisation over the last axis (`torch.nn.LayerNorm` with one normalised
/// dimension): `weight` (γ) 1, `bias` (β) 0, ε 1e-5.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Forward, LayerNorm};
/// use om_ops::Tensor;
/// let ln = LayerNorm::new(4)?; // nn.LayerNorm(4)
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 10.0, 10.0, 10.0, 10.0], &[2, 4])?;
/// let y = ln.forward(&x)?.to_vec();
/// // Row 0: mean 2.5, biased variance 1.25; row 1 is constant, so all zeros.
/// let want = [-1.5, -0.5, 0.5, 1.5].map(|d: f32| d / (1.25f32 + 1e-5).sqrt());
/// assert!(y[..4].iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5));
/// assert_eq!(&y[4..], &[0.0; 4]);
/// # Ok::<(), om_ops::Error>(())
/// ```
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
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Embedding, Forward};
/// use om_ops::Tensor;
/// let emb = Embedding::new(10, 3, Some(0))?; // nn.Embedding(10, 3, padding_idx=0)
/// let ids = Tensor::from_vec_i32(vec![1, 2, 4, 5, 4, 3, 2, 0], &[2, 4])?;
/// let y = emb.forward(&ids)?;
/// assert_eq!(y.shape(), &[2, 4, 3]);
/// let (y, w) = (y.to_vec(), emb.weight.to_vec());
/// assert_eq!(&y[..3], &w[3..6]); // id 1 reads row 1
/// assert_eq!(&y[21..], &[0.0; 3]); // the padding row starts at zero
/// assert!(Embedding::new(10, 3, Some(10)).is_err());
/// # Ok::<(), om_ops::Error>(())
/// ```
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
