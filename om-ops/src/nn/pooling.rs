//! `MaxPool2d` and `AvgPool2d`: `torch.nn.MaxPool2d`/`AvgPool2d`, layers without parameters
//! that apply [`crate::max_pool2d()`] / [`crate::avg_pool2d()`] with their [`Pool2d`].

use super::{Forward, Module};
use crate::pooling::{Pool2d, PoolKind};
use om_core::{Result, Tensor};

/// `torch.nn.MaxPool2d`: the max over each window of `[N, C, H, W]` (or `[C, H, W]`), with
/// a [`Pool2d`] or just a kernel size (stride = kernel, PyTorch's default).
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Forward, MaxPool2d};
/// use om_ops::{Pool2d, Tensor};
/// let x = Tensor::randn(&[8, 1, 8, 8])?;
/// let pool = MaxPool2d::new(2)?; // nn.MaxPool2d(2)
/// assert_eq!(pool.forward(&x)?.shape(), &[8, 1, 4, 4]);
/// // nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)
/// let pool = MaxPool2d::new(Pool2d::new(3).stride(2).padding(1).ceil_mode(true))?;
/// assert_eq!(pool.forward(&x)?.shape(), &[8, 1, 5, 5]);
/// assert!(MaxPool2d::new(0).is_err());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Module, Clone, Copy, Debug)]
pub struct MaxPool2d {
    /// The window, stride, padding, dilation and `ceil_mode`.
    #[module(skip)]
    pub options: Pool2d,
}

impl MaxPool2d {
    /// A max-pooling layer; an `Error::Argument` for options no input could accept (a
    /// kernel, stride or dilation of 0, a negative value, padding above half the kernel,
    /// `count_include_pad(false)`).
    pub fn new(options: impl Into<Pool2d>) -> Result<MaxPool2d> {
        let options = options.into();
        options.checked("MaxPool2d", PoolKind::Max)?;
        Ok(MaxPool2d { options })
    }
}

impl Forward for MaxPool2d {
    /// [`crate::max_pool2d()`] with this layer's options.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::max_pool2d(x, self.options)
    }
}

/// `torch.nn.AvgPool2d`: the mean over each window of `[N, C, H, W]` (or `[C, H, W]`), with
/// a [`Pool2d`] or just a kernel size (stride = kernel, padding counted in the divisor:
/// PyTorch's defaults).
///
/// # Examples
///
/// ```
/// use om_ops::nn::{AvgPool2d, Forward};
/// use om_ops::{Pool2d, Tensor};
/// let x = Tensor::ones(&[2, 3, 6, 6])?;
/// let pool = AvgPool2d::new(2)?; // nn.AvgPool2d(2)
/// assert_eq!(pool.forward(&x)?.to_vec(), vec![1.0; 2 * 3 * 3 * 3]);
/// // nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
/// let pool = AvgPool2d::new(Pool2d::new(3).stride(1).padding(1).count_include_pad(false))?;
/// assert_eq!(pool.forward(&x)?.shape(), &[2, 3, 6, 6]);
/// assert!(AvgPool2d::new(Pool2d::new(2).dilation(2)).is_err());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Module, Clone, Copy, Debug)]
pub struct AvgPool2d {
    /// The window, stride, padding, `ceil_mode` and `count_include_pad`.
    #[module(skip)]
    pub options: Pool2d,
}

impl AvgPool2d {
    /// An average-pooling layer; an `Error::Argument` for options no input could accept (a
    /// kernel or stride of 0, a negative value, padding above half the kernel, a dilation).
    pub fn new(options: impl Into<Pool2d>) -> Result<AvgPool2d> {
        let options = options.into();
        options.checked("AvgPool2d", PoolKind::Avg)?;
        Ok(AvgPool2d { options })
    }
}

impl Forward for AvgPool2d {
    /// [`crate::avg_pool2d()`] with this layer's options.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::avg_pool2d(x, self.options)
    }
}
