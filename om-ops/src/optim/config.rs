//! The one way optimizers are configured: [`hyper_params!`] declares an optimizer's
//! hyper-parameters once (name, type, PyTorch's default, allowed range) and generates the
//! config struct (public fields, `Default`), a chaining setter per field, the range checks
//! and the state-file form (`hyper.NAME` tensors). Each optimizer's `validate` adds the
//! rules that tie fields together (SGD's Nesterov).
//!
//! Ranges are PyTorch's constructor checks, with NaN and infinities refused as well.

use om_core::{Error, Result, Tensor};
use std::collections::BTreeMap;

/// The range a hyper-parameter must lie in.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Range {
    /// `[0, ∞)`, finite (learning rates, ε, weight decay, momentum, ...).
    NonNegative,
    /// `[0, 1)` (Adam's betas).
    Unit,
    /// Any finite number (SGD's dampening).
    Finite,
}

/// A hyper-parameter's type: its range check and its form in a state file.
pub(crate) trait Hyper: Sized + Copy {
    /// Checks `self` against `range`, the error naming `op` and the field `name`.
    fn check(self, op: &'static str, name: &str, range: Range) -> Result<()>;
    /// The value as a tensor (`f32` scalars; `i32` 0/1 for flags; `[2]` for pairs).
    fn to_tensor(self) -> Result<Tensor>;
    /// The value back from [`Hyper::to_tensor`]'s form, or `None` if `t` is not of it.
    fn from_tensor(t: &Tensor) -> Option<Self>;
}

impl Hyper for f32 {
    fn check(self, op: &'static str, name: &str, range: Range) -> Result<()> {
        let (ok, want) = match range {
            Range::NonNegative => (self >= 0.0 && self.is_finite(), "a finite number ≥ 0"),
            Range::Unit => ((0.0..1.0).contains(&self), "in [0, 1)"),
            Range::Finite => (self.is_finite(), "finite"),
        };
        if ok {
            Ok(())
        } else {
            Err(Error::argument(op, format!("{name} must be {want}, got {self}")))
        }
    }

    fn to_tensor(self) -> Result<Tensor> {
        Tensor::from_vec(vec![self], &[])
    }

    fn from_tensor(t: &Tensor) -> Option<f32> {
        (t.dtype() == om_core::DType::F32 && t.shape().is_empty()).then(|| t.to_vec()[0])
    }
}

impl Hyper for (f32, f32) {
    fn check(self, op: &'static str, name: &str, range: Range) -> Result<()> {
        self.0.check(op, &format!("{name}.0"), range)?;
        self.1.check(op, &format!("{name}.1"), range)
    }

    fn to_tensor(self) -> Result<Tensor> {
        Tensor::from_vec(vec![self.0, self.1], &[2])
    }

    fn from_tensor(t: &Tensor) -> Option<(f32, f32)> {
        (t.dtype() == om_core::DType::F32 && t.shape() == [2]).then(|| {
            let v = t.to_vec();
            (v[0], v[1])
        })
    }
}

impl Hyper for bool {
    fn check(self, _: &'static str, _: &str, _: Range) -> Result<()> {
        Ok(())
    }

    fn to_tensor(self) -> Result<Tensor> {
        Tensor::from_vec_i32(vec![self as i32], &[])
    }

    fn from_tensor(t: &Tensor) -> Option<bool> {
        if t.dtype() != om_core::DType::I32 || !t.shape().is_empty() {
            return None;
        }
        match t.to_vec_i32()[0] {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}

/// The state-file key of hyper-parameter `name`.
pub(crate) fn hyper_key(name: &str) -> String {
    format!("hyper.{name}")
}

/// Removes hyper-parameter `name` from a state file's tensors and reads it.
pub(crate) fn take_hyper<T: Hyper>(op: &'static str, file: &mut BTreeMap<String, Tensor>, name: &str, from: &str) -> Result<T> {
    let key = hyper_key(name);
    let t = file.remove(&key).ok_or_else(|| Error::argument(op, format!("{from} has no `{key}` (is it a state file of {op}?)")))?;
    T::from_tensor(&t).ok_or_else(|| {
        Error::argument(op, format!("`{key}` in {from} is not a {} (is it a state file of {op}?)", std::any::type_name::<T>()))
    })
}

/// What [`hyper_params!`] generates for a config beyond its struct and setters.
pub(crate) trait HyperParams: Sized + Copy + Default {
    /// The optimizer's name (`"Adam"`), as its errors and state-file errors say it.
    const KIND: &'static str;
    /// Checks every numeric field against its range.
    fn check_ranges(&self) -> Result<()>;
    /// The fields as `hyper.NAME` tensors (a state file's part).
    fn to_tensors(&self) -> Result<Vec<(String, Tensor)>>;
    /// The fields read back (and removed) from a state file's tensors.
    fn from_tensors(file: &mut BTreeMap<String, Tensor>, from: &str) -> Result<Self>;
}

/// Declares a config struct of hyper-parameters: for each field its doc, type, default
/// and (for numbers) its [`Range`]. Generates the struct with public fields, `Default`,
/// a setter per field, and its [`HyperParams`] impl.
macro_rules! hyper_params {
    (
        $(#[$meta:meta])*
        pub struct $name:ident for $op:literal {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty = $default:expr $(, $range:ident)? ; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl Default for $name {
            /// PyTorch's defaults.
            fn default() -> Self {
                $name { $( $field: $default, )* }
            }
        }

        impl $name {
            $(
                #[doc = concat!("With `", stringify!($field), "` set to `v` (checked when the config is used).")]
                pub fn $field(mut self, v: $ty) -> Self {
                    self.$field = v;
                    self
                }
            )*
        }

        impl $crate::optim::config::HyperParams for $name {
            const KIND: &'static str = $op;

            fn check_ranges(&self) -> om_core::Result<()> {
                $( $( $crate::optim::config::Hyper::check(self.$field, $op, stringify!($field), $crate::optim::config::Range::$range)?; )? )*
                Ok(())
            }

            fn to_tensors(&self) -> om_core::Result<Vec<(String, om_core::Tensor)>> {
                Ok(vec![ $( ($crate::optim::config::hyper_key(stringify!($field)), $crate::optim::config::Hyper::to_tensor(self.$field)?), )* ])
            }

            fn from_tensors(file: &mut std::collections::BTreeMap<String, om_core::Tensor>, from: &str) -> om_core::Result<Self> {
                Ok($name { $( $field: $crate::optim::config::take_hyper($op, file, stringify!($field), from)?, )* })
            }
        }
    };
}

pub(crate) use hyper_params;
