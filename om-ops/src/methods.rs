//! Method syntax for the operators (`x.matmul(&w)?.relu()?`) and the registration that
//! makes `&a + &b`, `&a - &b`, `&a * &b`, `&a / &b`, `-&a` and their scalar forms
//! (`&a * 2.0`, `1.0 - &a`, ..) call the operators of this crate (see `om_core::arith`). Every method is the operator of the same name.
//!
//! ```
//! use om_ops::{Tensor, TensorOps};
//! let x = Tensor::from_vec(vec![1.0, -2.0, 3.0, -4.0], &[2, 2])?;
//! let w = Tensor::ones(&[2, 3])?;
//! let y = x.matmul(&w)?.relu()?.sum(None, false)?; // each row of x sums to -1, so relu gives 0
//! assert_eq!(y.item()?, 0.0);
//! let z = ((&x + &x)? * &x)?;
//! assert_eq!(z.to_vec(), vec![2.0, 8.0, 18.0, 32.0]);
//! # Ok::<(), om_ops::Error>(())
//! ```

use crate::GeluForm;
use om_core::{Axes, DType, Result, Shape, Tensor};

om_core::register_arith!(Arith { add: crate::add, sub: crate::sub, mul: crate::mul, div: crate::div, neg: crate::neg });

om_core::register_arith!(ScalarArith {
    add: crate::add_scalar,
    sub: crate::sub_scalar,
    rsub: crate::rsub_scalar,
    mul: crate::mul_scalar,
    div: crate::div_scalar,
    rdiv: crate::rdiv_scalar,
});

/// The operators as methods on [`Tensor`]; bring it into scope with
/// `use onemodel::prelude::*` or `use om_ops::TensorOps`.
pub trait TensorOps {
    /// [`crate::add()`]
    fn add(&self, other: &Tensor) -> Result<Tensor>;
    /// [`crate::sub()`]
    fn sub(&self, other: &Tensor) -> Result<Tensor>;
    /// [`crate::mul()`]
    fn mul(&self, other: &Tensor) -> Result<Tensor>;
    /// [`crate::div()`]
    fn div(&self, other: &Tensor) -> Result<Tensor>;
    /// [`crate::neg()`]
    fn neg(&self) -> Result<Tensor>;
    /// [`crate::add_scalar()`]
    fn add_scalar(&self, s: f32) -> Result<Tensor>;
    /// [`crate::sub_scalar()`]
    fn sub_scalar(&self, s: f32) -> Result<Tensor>;
    /// [`crate::mul_scalar()`]
    fn mul_scalar(&self, s: f32) -> Result<Tensor>;
    /// [`crate::div_scalar()`]
    fn div_scalar(&self, s: f32) -> Result<Tensor>;
    /// [`crate::relu()`]
    fn relu(&self) -> Result<Tensor>;
    /// [`crate::sigmoid()`]
    fn sigmoid(&self) -> Result<Tensor>;
    /// [`crate::tanh()`]
    fn tanh(&self) -> Result<Tensor>;
    /// [`crate::gelu()`] (erf form)
    fn gelu(&self) -> Result<Tensor>;
    /// [`crate::exp()`]
    fn exp(&self) -> Result<Tensor>;
    /// [`crate::log()`]
    fn log(&self) -> Result<Tensor>;
    /// [`crate::sqrt()`]
    fn sqrt(&self) -> Result<Tensor>;
    /// [`crate::abs()`]
    fn abs(&self) -> Result<Tensor>;
    /// [`crate::clamp()`] (either bound optional)
    fn clamp(&self, min: Option<f32>, max: Option<f32>) -> Result<Tensor>;
    /// [`crate::argmax()`] along `axis` (`None`: over every element), Int32
    fn argmax(&self, axis: impl Into<Option<isize>>, keep_dim: bool) -> Result<Tensor>;
    /// [`crate::max_dim()`]: the maxima along `axis` and their Int32 indices
    fn max_dim(&self, axis: isize, keep_dim: bool) -> Result<(Tensor, Tensor)>;
    /// [`crate::gather()`]: the elements at Int32 positions `index` along `dim`
    fn gather(&self, dim: isize, index: &Tensor) -> Result<Tensor>;
    /// [`crate::index_select()`]: the slices at Int32 positions `index` along `dim`
    fn index_select(&self, dim: isize, index: &Tensor) -> Result<Tensor>;
    /// [`crate::masked_fill()`]: `value` where `mask` is nonzero
    fn masked_fill(&self, mask: &Tensor, value: f32) -> Result<Tensor>;
    /// [`crate::matmul()`]
    fn matmul(&self, other: &Tensor) -> Result<Tensor>;
    /// [`crate::sum()`] over one axis, several, or all (`None`)
    fn sum(&self, axes: impl Into<Axes>, keep_dim: bool) -> Result<Tensor>;
    /// [`crate::mean()`] over one axis, several, or all (`None`)
    fn mean(&self, axes: impl Into<Axes>, keep_dim: bool) -> Result<Tensor>;
    /// [`crate::softmax()`] along `axis` (`-1`: the last axis, as PyTorch's `x.softmax(-1)`)
    fn softmax(&self, axis: isize) -> Result<Tensor>;
    /// [`crate::log_softmax()`] along `axis`
    fn log_softmax(&self, axis: isize) -> Result<Tensor>;
    /// [`crate::reshape()`] (one `-1` is inferred)
    fn reshape(&self, shape: impl Into<Shape>) -> Result<Tensor>;
    /// [`crate::transpose()`]
    fn transpose(&self, dim0: isize, dim1: isize) -> Result<Tensor>;
    /// [`crate::permute()`]
    fn permute(&self, dims: impl Into<Axes>) -> Result<Tensor>;
    /// [`crate::unsqueeze()`]
    fn unsqueeze(&self, axis: isize) -> Result<Tensor>;
    /// [`crate::squeeze()`]
    fn squeeze(&self, axes: impl Into<Axes>) -> Result<Tensor>;
    /// [`crate::slice()`] with step 1 and PyTorch's `narrow` check (the range must fit the axis)
    fn narrow(&self, axis: isize, start: usize, len: usize) -> Result<Tensor>;
    /// [`crate::select()`]
    fn select(&self, axis: isize, index: isize) -> Result<Tensor>;
    /// [`crate::expand()`]
    fn expand(&self, shape: impl Into<Shape>) -> Result<Tensor>;
    /// [`crate::contiguous()`]
    fn contiguous(&self) -> Result<Tensor>;
    /// [`crate::cast()`]
    fn cast(&self, dtype: DType) -> Result<Tensor>;
}

impl TensorOps for Tensor {
    fn add(&self, other: &Tensor) -> Result<Tensor> {
        crate::add(self, other)
    }
    fn sub(&self, other: &Tensor) -> Result<Tensor> {
        crate::sub(self, other)
    }
    fn mul(&self, other: &Tensor) -> Result<Tensor> {
        crate::mul(self, other)
    }
    fn div(&self, other: &Tensor) -> Result<Tensor> {
        crate::div(self, other)
    }
    fn neg(&self) -> Result<Tensor> {
        crate::neg(self)
    }
    fn add_scalar(&self, s: f32) -> Result<Tensor> {
        crate::add_scalar(self, s)
    }
    fn sub_scalar(&self, s: f32) -> Result<Tensor> {
        crate::sub_scalar(self, s)
    }
    fn mul_scalar(&self, s: f32) -> Result<Tensor> {
        crate::mul_scalar(self, s)
    }
    fn div_scalar(&self, s: f32) -> Result<Tensor> {
        crate::div_scalar(self, s)
    }
    fn relu(&self) -> Result<Tensor> {
        crate::relu(self)
    }
    fn sigmoid(&self) -> Result<Tensor> {
        crate::sigmoid(self)
    }
    fn tanh(&self) -> Result<Tensor> {
        crate::tanh(self)
    }
    fn gelu(&self) -> Result<Tensor> {
        crate::gelu(self, GeluForm::Erf)
    }
    fn exp(&self) -> Result<Tensor> {
        crate::exp(self)
    }
    fn log(&self) -> Result<Tensor> {
        crate::log(self)
    }
    fn sqrt(&self) -> Result<Tensor> {
        crate::sqrt(self)
    }
    fn abs(&self) -> Result<Tensor> {
        crate::abs(self)
    }
    fn clamp(&self, min: Option<f32>, max: Option<f32>) -> Result<Tensor> {
        crate::clamp(self, min, max)
    }
    fn argmax(&self, axis: impl Into<Option<isize>>, keep_dim: bool) -> Result<Tensor> {
        crate::argmax(self, axis, keep_dim)
    }
    fn max_dim(&self, axis: isize, keep_dim: bool) -> Result<(Tensor, Tensor)> {
        crate::max_dim(self, axis, keep_dim)
    }
    fn gather(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        crate::gather(self, dim, index)
    }
    fn index_select(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        crate::index_select(self, dim, index)
    }
    fn masked_fill(&self, mask: &Tensor, value: f32) -> Result<Tensor> {
        crate::masked_fill(self, mask, value)
    }
    fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        crate::matmul(self, other)
    }
    fn sum(&self, axes: impl Into<Axes>, keep_dim: bool) -> Result<Tensor> {
        crate::sum(self, axes, keep_dim)
    }
    fn mean(&self, axes: impl Into<Axes>, keep_dim: bool) -> Result<Tensor> {
        crate::mean(self, axes, keep_dim)
    }
    fn softmax(&self, axis: isize) -> Result<Tensor> {
        crate::softmax(self, axis)
    }
    fn log_softmax(&self, axis: isize) -> Result<Tensor> {
        crate::log_softmax(self, axis)
    }
    fn reshape(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        crate::reshape(self, shape)
    }
    fn transpose(&self, dim0: isize, dim1: isize) -> Result<Tensor> {
        crate::transpose(self, dim0, dim1)
    }
    fn permute(&self, dims: impl Into<Axes>) -> Result<Tensor> {
        crate::permute(self, dims)
    }
    fn unsqueeze(&self, axis: isize) -> Result<Tensor> {
        crate::unsqueeze(self, axis)
    }
    fn squeeze(&self, axes: impl Into<Axes>) -> Result<Tensor> {
        crate::squeeze(self, axes)
    }
    fn narrow(&self, axis: isize, start: usize, len: usize) -> Result<Tensor> {
        // PyTorch's narrow does not clamp: the range must lie inside the axis.
        let dim = self.shape()[om_core::layout::normalize_axis("narrow", axis, self.rank(), false)?];
        if start.checked_add(len).is_none_or(|end| end > dim) {
            return Err(om_core::Error::argument(
                "narrow",
                format!("start {start} + length {len} does not fit axis {axis} of size {dim} (shape {:?})", self.shape()),
            ));
        }
        crate::slice(self, axis, start as isize, Some((start + len) as isize), 1)
    }
    fn select(&self, axis: isize, index: isize) -> Result<Tensor> {
        crate::select(self, axis, index)
    }
    fn expand(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        crate::expand(self, shape)
    }
    fn contiguous(&self) -> Result<Tensor> {
        crate::contiguous(self)
    }
    fn cast(&self, dtype: DType) -> Result<Tensor> {
        crate::cast(self, dtype)
    }
}

#[cfg(test)]
mod tests {
    use super::TensorOps;
    use om_core::Tensor;

    #[test]
    fn operators_record_like_the_named_functions() {
        let a = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap().requires_grad().unwrap();
        let b = Tensor::from_vec(vec![3.0, 5.0], &[2]).unwrap();
        let y = ((&a * &b).unwrap() - (-&a).unwrap()).unwrap();
        assert_eq!(y.grad_fn_name(), Some("sub"));
        y.sum(None, false).unwrap().backward().unwrap();
        // d/da (a·b + a) = b + 1
        assert_eq!(a.grad().unwrap().to_vec(), vec![4.0, 6.0]);
        assert!((&a / &Tensor::ones(&[3]).unwrap()).is_err());
    }

    #[test]
    fn math_and_reduction_methods_are_the_functions() {
        let x = Tensor::from_vec(vec![0.5, -2.0, 4.0, 1.0, 3.0, -1.0], &[2, 3]).unwrap().requires_grad().unwrap();
        let bits = |t: Tensor| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let ax = x.abs().unwrap();
        assert_eq!(ax.grad_fn_name(), Some("abs"));
        assert_eq!(bits(ax.exp().unwrap()), bits(crate::exp(&crate::abs(&x).unwrap()).unwrap()));
        assert_eq!(bits(ax.log().unwrap()), bits(crate::log(&ax).unwrap()));
        assert_eq!(bits(ax.sqrt().unwrap()), bits(crate::sqrt(&ax).unwrap()));
        assert_eq!(bits(x.clamp(Some(-1.0), None).unwrap()), bits(crate::clamp(&x, Some(-1.0), None).unwrap()));
        assert_eq!(x.argmax(Some(1), false).unwrap().to_vec_i32(), vec![2, 1]);
        let (values, indices) = x.max_dim(1, false).unwrap();
        assert_eq!((values.to_vec(), indices.to_vec_i32()), (vec![4.0, 3.0], vec![2, 1]));
        let i = Tensor::from_vec_i32(vec![2, 0], &[2, 1]).unwrap();
        assert_eq!(x.gather(1, &i).unwrap().to_vec(), vec![4.0, 1.0]);
        assert_eq!(x.gather(1, &i).unwrap().grad_fn_name(), Some("gather"));
        assert_eq!(x.index_select(1, &Tensor::from_vec_i32(vec![1], &[1]).unwrap()).unwrap().to_vec(), vec![-2.0, 3.0]);
        let mask = Tensor::from_vec_i32(vec![1, 0, 0], &[3]).unwrap();
        assert_eq!(x.masked_fill(&mask, 9.0).unwrap().to_vec(), vec![9.0, -2.0, 4.0, 9.0, 3.0, -1.0]);
    }
}
