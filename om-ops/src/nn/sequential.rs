//! Containers and shape modules: [`Sequential`] (`torch.nn.Sequential`), [`Flatten`] and
//! [`Identity`].

use super::{Forward, Module};
use om_core::{Error, Result, Tensor};

/// Modules applied in turn, each to the previous one's output (`torch.nn.Sequential`).
/// Children are named by their position, as in PyTorch: `0.weight`, `2.bias`, ...
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Flatten, Forward, Linear, Module, ReLU, Sequential};
/// use om_ops::Tensor;
/// let net = Sequential::new().push(Flatten::default()).push(Linear::new(12, 5)?).push(ReLU);
/// assert_eq!(net.forward(&Tensor::ones(&[2, 3, 4])?)?.shape(), &[2, 5]);
/// assert_eq!(net.len(), 3);
/// assert_eq!(net.parameters()[0].0, "1.weight");
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Module, Default)]
pub struct Sequential {
    #[module(flatten)]
    layers: Vec<Box<dyn Forward + Send + Sync>>,
}

impl Sequential {
    /// An empty container (its `forward` returns the input).
    pub fn new() -> Sequential {
        Sequential::default()
    }

    /// The container with `layer` appended.
    pub fn push(mut self, layer: impl Forward + Send + Sync + 'static) -> Sequential {
        self.layers.push(Box::new(layer));
        self
    }

    /// Appends an already boxed layer.
    pub fn push_boxed(&mut self, layer: Box<dyn Forward + Send + Sync>) {
        self.layers.push(layer);
    }

    /// The number of layers.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether there are no layers.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// The layers, in order.
    pub fn layers(&self) -> &[Box<dyn Forward + Send + Sync>] {
        &self.layers
    }
}

impl Forward for Sequential {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut y = x.clone();
        for layer in &self.layers {
            y = layer.forward(&y)?;
        }
        Ok(y)
    }
}

/// Joins the axes `start_dim..=end_dim` into one (`torch.nn.Flatten`). The default,
/// PyTorch's `start_dim=1, end_dim=-1`, joins every axis but the first: `[N, C, H, W]` →
/// `[N, C·H·W]`. Negative axes count from the end.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Flatten, Forward};
/// use om_ops::Tensor;
/// let x = Tensor::zeros(&[2, 3, 4, 5])?;
/// assert_eq!(Flatten::default().forward(&x)?.shape(), &[2, 60]);
/// assert_eq!(Flatten::new(0, 1).forward(&x)?.shape(), &[6, 4, 5]);
/// assert_eq!(Flatten::new(-2, -1).forward(&x)?.shape(), &[2, 3, 20]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Module, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flatten {
    /// The first axis joined.
    pub start_dim: isize,
    /// The last axis joined.
    pub end_dim: isize,
}

impl Flatten {
    /// Joins the axes `start_dim..=end_dim` (both included; negative counts from the end).
    pub fn new(start_dim: isize, end_dim: isize) -> Flatten {
        Flatten { start_dim, end_dim }
    }
}

impl Default for Flatten {
    fn default() -> Self {
        Flatten { start_dim: 1, end_dim: -1 }
    }
}

impl Forward for Flatten {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let shape = x.shape();
        let rank = shape.len() as isize;
        let axis = |d: isize| if d < 0 { d + rank } else { d };
        let (start, end) = (axis(self.start_dim), axis(self.end_dim));
        if rank == 0 || start < 0 || end >= rank || start > end {
            return Err(Error::shape(
                "Flatten",
                &[shape],
                format!("start_dim {} and end_dim {} must be axes of a rank-{rank} tensor, start first", self.start_dim, self.end_dim),
            ));
        }
        let (start, end) = (start as usize, end as usize);
        let mut dims: om_core::layout::SignedDims = shape[..start].iter().map(|&d| d as isize).collect();
        dims.push(shape[start..=end].iter().product::<usize>() as isize);
        dims.extend(shape[end + 1..].iter().map(|&d| d as isize));
        crate::reshape(x, &dims)
    }
}

/// Returns its input (`torch.nn.Identity`): a placeholder layer.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Forward, Identity, Module};
/// use om_ops::Tensor;
/// let x = Tensor::randn(&[128, 20])?;
/// let y = Identity.forward(&x)?;
/// assert_eq!((y.shape(), y.to_vec()), (x.shape(), x.to_vec()));
/// assert!(Identity.parameters().is_empty());
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Module, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Identity;

impl Forward for Identity {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::{BatchNorm2d, Conv2d, Linear, ReLU};

    fn names(list: Vec<(String, Tensor)>) -> Vec<String> {
        list.into_iter().map(|(n, _)| n).collect()
    }

    #[test]
    fn sequential_chains_boxed_layers_with_pytorch_names() -> Result<()> {
        let mut net = Sequential::new()
            .push(Conv2d::with_seed(1, 2, [3, 3], Default::default(), 1)?)
            .push(BatchNorm2d::new(2)?)
            .push(ReLU)
            .push(Flatten::default())
            .push(Linear::with_seed(2 * 2 * 2, 3, true, 2)?);
        assert_eq!(names(net.parameters()), ["0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "4.bias"]);
        assert_eq!(names(net.buffers()), ["1.running_mean", "1.running_var"]);
        let x = Tensor::randn_with_seed(&[4, 1, 4, 4], 3)?;
        let y = net.forward(&x)?;
        assert_eq!(y.shape(), &[4, 3]);
        // The same layers by hand.
        let conv = Conv2d::with_seed(1, 2, [3, 3], Default::default(), 1)?;
        let bn = BatchNorm2d::new(2)?;
        let fc = Linear::with_seed(8, 3, true, 2)?;
        let h = crate::relu(&bn.forward(&conv.forward(&x)?)?)?;
        let want = fc.forward(&crate::reshape(&h, [4, -1])?)?;
        assert_eq!(y.to_vec(), want.to_vec());
        // eval reaches the boxed batch norm: its running stats stop changing.
        net.eval();
        let stats = net.buffers()[0].1.to_vec();
        net.forward(&x)?;
        assert_eq!(net.buffers()[0].1.to_vec(), stats);
        assert!(Sequential::new().forward(&x)?.to_vec() == x.to_vec());
        Ok(())
    }

    #[test]
    fn flatten_joins_the_chosen_axes() -> Result<()> {
        let x = Tensor::zeros(&[2, 3, 4, 5])?;
        assert_eq!(Flatten::default().forward(&x)?.shape(), &[2, 60]);
        assert_eq!(Flatten::new(0, 1).forward(&x)?.shape(), &[6, 4, 5]);
        assert_eq!(Flatten::new(-2, -1).forward(&x)?.shape(), &[2, 3, 20]);
        let err = Flatten::new(2, 1).forward(&x).unwrap_err().to_string();
        assert!(err.contains("Flatten") && err.contains("start_dim 2"), "{err}");
        assert!(Flatten::default().forward(&Tensor::zeros(&[])?).is_err());
        assert_eq!(Identity.forward(&x)?.shape(), x.shape());
        Ok(())
    }
}
