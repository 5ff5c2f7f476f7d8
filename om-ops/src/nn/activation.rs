//! Activation modules (`torch.nn.ReLU`, `GELU`, ...): the element-wise operators as
//! [`Forward`] modules without parameters, for [`super::Sequential`].

use super::{Forward, Module};
use crate::GeluForm;
use om_core::{Result, Tensor};

/// An activation applying `$op` to its input: a unit struct, or a struct of one `f32`
/// hyperparameter with its PyTorch default, passed after the input.
macro_rules! activation {
    ($(#[$doc:meta])* $name:ident { $(#[$fdoc:meta])* $field:ident = $default:expr } => $op:path) => {
        $(#[$doc])*
        #[derive(Module, Clone, Copy, Debug, PartialEq)]
        pub struct $name {
            $(#[$fdoc])*
            pub $field: f32,
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $field: $default }
            }
        }

        impl Forward for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                $op(x, self.$field)
            }
        }
    };
    ($(#[$doc:meta])* $name:ident => $op:path) => {
        $(#[$doc])*
        #[derive(Module, Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name;

        impl Forward for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                $op(x)
            }
        }
    };
}

activation!(
    /// `max(x, 0)` (`torch.nn.ReLU`).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_ops::nn::{Forward, ReLU};
    /// use om_ops::Tensor;
    /// let x = Tensor::from_vec(vec![-1.0, 0.0, 2.0], &[3])?;
    /// assert_eq!(ReLU.forward(&x)?.to_vec(), [0.0, 0.0, 2.0]);
    /// # Ok::<(), om_ops::Error>(())
    /// ```
    ReLU => crate::relu
);
activation!(
    /// `tanh(x)` (`torch.nn.Tanh`).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_ops::nn::{Forward, Tanh};
    /// use om_ops::Tensor;
    /// let y = Tanh.forward(&Tensor::from_vec(vec![-1.0, 0.0, 1.0], &[3])?)?.to_vec();
    /// assert!(y.iter().zip([-1f32.tanh(), 0.0, 1f32.tanh()]).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), om_ops::Error>(())
    /// ```
    Tanh => crate::tanh
);
activation!(
    /// `1 / (1 + e^−x)` (`torch.nn.Sigmoid`).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_ops::nn::{Forward, Sigmoid};
    /// use om_ops::Tensor;
    /// let y = Sigmoid.forward(&Tensor::from_vec(vec![0.0, 2.0], &[2])?)?.to_vec();
    /// assert_eq!(y[0], 0.5);
    /// assert!((y[1] - 1.0 / (1.0 + (-2f32).exp())).abs() < 1e-6);
    /// # Ok::<(), om_ops::Error>(())
    /// ```
    Sigmoid => crate::sigmoid
);
activation!(
    /// `x·σ(x)` (`torch.nn.SiLU`).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_ops::nn::{Forward, SiLU};
    /// use om_ops::Tensor;
    /// let y = SiLU.forward(&Tensor::from_vec(vec![0.0, 1.0], &[2])?)?.to_vec();
    /// assert_eq!(y[0], 0.0);
    /// assert!((y[1] - 1.0 / (1.0 + (-1f32).exp())).abs() < 1e-6);
    /// # Ok::<(), om_ops::Error>(())
    /// ```
    SiLU => crate::silu
);
/// Softmax along one axis (`torch.nn.Softmax(dim)`): [`crate::softmax()`] of the input,
/// values along `axis` in `(0, 1]` summing to 1. A negative axis counts from the end.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Forward, Softmax};
/// use om_ops::Tensor;
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// let y = Softmax::new(0).forward(&x)?;
/// let col = y.to_vec();
/// assert!((col[0] + col[2] - 1.0).abs() < 1e-6 && (col[1] + col[3] - 1.0).abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Module, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Softmax {
    /// The axis the values are normalised along.
    pub axis: isize,
}

impl Softmax {
    /// Softmax along `axis` (PyTorch's `dim`; `-1` is the last axis).
    pub fn new(axis: isize) -> Softmax {
        Softmax { axis }
    }
}

impl Forward for Softmax {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::softmax(x, self.axis)
    }
}

/// Log-softmax along one axis (`torch.nn.LogSoftmax(dim)`): [`crate::log_softmax()`] of the
/// input. A negative axis counts from the end.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Forward, LogSoftmax};
/// use om_ops::Tensor;
/// let x = Tensor::from_vec(vec![0.0, 0.0], &[1, 2])?;
/// let y = LogSoftmax::new(-1).forward(&x)?;
/// assert_eq!(y.to_vec(), vec![-std::f32::consts::LN_2; 2]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Module, Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogSoftmax {
    /// The axis the values are normalised along.
    pub axis: isize,
}

impl LogSoftmax {
    /// Log-softmax along `axis` (PyTorch's `dim`; `-1` is the last axis).
    pub fn new(axis: isize) -> LogSoftmax {
        LogSoftmax { axis }
    }
}

impl Forward for LogSoftmax {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::log_softmax(x, self.axis)
    }
}

/// Gaussian error linear unit (`torch.nn.GELU`): the exact erf form by default,
/// `GELU { form: GeluForm::Tanh }` for PyTorch's `approximate='tanh'`.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Forward, GELU};
/// use om_ops::{GeluForm, Tensor};
/// let x = Tensor::from_vec(vec![0.0, 1.0], &[2])?;
/// // x·Φ(x): Φ(1) = 0.8413447 (nn.GELU())
/// let y = GELU::default().forward(&x)?.to_vec();
/// assert!(y[0] == 0.0 && (y[1] - 0.8413447).abs() < 1e-6);
/// // nn.GELU(approximate='tanh'): 0.5·(1 + tanh(√(2/π)·(1 + 0.044715)))
/// let t = GELU { form: GeluForm::Tanh }.forward(&x)?.to_vec();
/// let want = 0.5 * (1.0 + ((2.0 / std::f32::consts::PI).sqrt() * 1.044715).tanh());
/// assert!((t[1] - want).abs() < 1e-6);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[allow(clippy::upper_case_acronyms)] // PyTorch's name
#[derive(Module, Clone, Copy, Debug, PartialEq, Eq)]
pub struct GELU {
    /// Which formula.
    #[module(skip)]
    pub form: GeluForm,
}

impl Default for GELU {
    fn default() -> Self {
        GELU { form: GeluForm::Erf }
    }
}

impl Forward for GELU {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::gelu(x, self.form)
    }
}

activation!(
    /// `x` for `x ≥ 0`, `negative_slope·x` below (`torch.nn.LeakyReLU`, slope 0.01 by
    /// default).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_ops::nn::{Forward, LeakyReLU};
    /// use om_ops::Tensor;
    /// let x = Tensor::from_vec(vec![-2.0, 3.0], &[2])?;
    /// assert_eq!(LeakyReLU::default().forward(&x)?.to_vec(), [-0.02, 3.0]); // nn.LeakyReLU()
    /// assert_eq!(LeakyReLU { negative_slope: 0.5 }.forward(&x)?.to_vec(), [-1.0, 3.0]);
    /// # Ok::<(), om_ops::Error>(())
    /// ```
    LeakyReLU {
        /// The slope for negative inputs.
        negative_slope = 0.01
    } => crate::leaky_relu
);
activation!(
    /// `x` for `x > 0`, `alpha·(e^x − 1)` below (`torch.nn.ELU`, alpha 1 by default).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_ops::nn::{Forward, ELU};
    /// use om_ops::Tensor;
    /// let x = Tensor::from_vec(vec![-1.0, 2.0], &[2])?;
    /// let y = ELU::default().forward(&x)?.to_vec(); // nn.ELU()
    /// assert!((y[0] - ((-1f32).exp() - 1.0)).abs() < 1e-6 && y[1] == 2.0);
    /// let y = ELU { alpha: 2.0 }.forward(&x)?.to_vec();
    /// assert!((y[0] - 2.0 * ((-1f32).exp() - 1.0)).abs() < 1e-6);
    /// # Ok::<(), om_ops::Error>(())
    /// ```
    #[allow(clippy::upper_case_acronyms)] // PyTorch's name
    ELU {
        /// The scale of the negative part.
        alpha = 1.0
    } => crate::elu
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activations_apply_their_operator_and_have_no_parameters() -> Result<()> {
        let x = Tensor::from_vec(vec![-2.0, -0.5, 0.0, 1.5], &[4])?;
        let cases: [(&dyn Forward, Tensor); 10] = [
            (&ReLU, crate::relu(&x)?),
            (&Tanh, crate::tanh(&x)?),
            (&Sigmoid, crate::sigmoid(&x)?),
            (&SiLU, crate::silu(&x)?),
            (&Softmax::new(-1), crate::softmax(&x, -1)?),
            (&LogSoftmax::new(-1), crate::log_softmax(&x, -1)?),
            (&Softmax::new(0), crate::softmax(&x, 0)?),
            (&GELU::default(), crate::gelu(&x, GeluForm::Erf)?),
            (&LeakyReLU::default(), crate::leaky_relu(&x, 0.01)?),
            (&ELU::default(), crate::elu(&x, 1.0)?),
        ];
        for (m, want) in cases {
            assert_eq!(m.forward(&x)?.to_vec(), want.to_vec());
            assert!(m.parameters().is_empty() && m.buffers().is_empty());
        }
        // Another axis of a matrix, and an axis it does not have.
        let m = Tensor::from_vec(vec![1.0, -1.0, 0.5, 2.0, 0.0, 3.0], &[2, 3])?;
        assert_eq!(Softmax::new(0).forward(&m)?.to_vec(), crate::softmax(&m, 0)?.to_vec());
        assert_eq!(LogSoftmax::new(-2).forward(&m)?.to_vec(), crate::log_softmax(&m, 0)?.to_vec());
        assert!(Softmax::new(2).forward(&m).is_err());
        Ok(())
    }
}
