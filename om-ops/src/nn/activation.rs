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
    ReLU => crate::relu
);
activation!(
    /// `tanh(x)` (`torch.nn.Tanh`).
    Tanh => crate::tanh
);
activation!(
    /// `1 / (1 + e^−x)` (`torch.nn.Sigmoid`).
    Sigmoid => crate::sigmoid
);
activation!(
    /// `x·σ(x)` (`torch.nn.SiLU`).
    SiLU => crate::silu
);
activation!(
    /// Softmax over the last axis (`torch.nn.Softmax(dim=-1)`).
    Softmax => softmax_last
);
activation!(
    /// Log-softmax over the last axis (`torch.nn.LogSoftmax(dim=-1)`).
    LogSoftmax => log_softmax_last
);

/// [`crate::softmax`] over the last axis.
fn softmax_last(x: &Tensor) -> Result<Tensor> {
    crate::softmax(x, -1)
}

/// [`crate::log_softmax`] over the last axis.
fn log_softmax_last(x: &Tensor) -> Result<Tensor> {
    crate::log_softmax(x, -1)
}

/// Gaussian error linear unit (`torch.nn.GELU`): the exact erf form by default,
/// `GELU { form: GeluForm::Tanh }` for PyTorch's `approximate='tanh'`.
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
    LeakyReLU {
        /// The slope for negative inputs.
        negative_slope = 0.01
    } => crate::leaky_relu
);
activation!(
    /// `x` for `x > 0`, `alpha·(e^x − 1)` below (`torch.nn.ELU`, alpha 1 by default).
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
        let cases: [(&dyn Forward, Tensor); 9] = [
            (&ReLU, crate::relu(&x)?),
            (&Tanh, crate::tanh(&x)?),
            (&Sigmoid, crate::sigmoid(&x)?),
            (&SiLU, crate::silu(&x)?),
            (&Softmax, crate::softmax(&x, -1)?),
            (&LogSoftmax, crate::log_softmax(&x, -1)?),
            (&GELU::default(), crate::gelu(&x, GeluForm::Erf)?),
            (&LeakyReLU::default(), crate::leaky_relu(&x, 0.01)?),
            (&ELU::default(), crate::elu(&x, 1.0)?),
        ];
        for (m, want) in cases {
            assert_eq!(m.forward(&x)?.to_vec(), want.to_vec());
            assert!(m.parameters().is_empty() && m.buffers().is_empty());
        }
        Ok(())
    }
}
