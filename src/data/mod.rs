//! Data loading, shaped like PyTorch's `torch.utils.data`: the [`Dataset`] trait (a length
//! and an example per index), [`TensorDataset`] (rows of tensors sharing their first
//! dimension), [`Subset`] and [`random_split`] / [`random_split_fractions`], and the
//! [`DataLoader`], which deals a dataset's indices into mini-batches (in order, or in a
//! seeded shuffle drawn from the loader's own generator, reshuffled every epoch) and
//! collates each batch's examples into tensors ([`Collate`]: stacked along a new first
//! axis; integer targets become an `i32` tensor).
//!
//! The order of the batches depends only on the seed and the number of epochs begun — never
//! on the thread count or on timing — and a loader's [`LoaderState`] restores it exactly,
//! so a training run stopped and resumed sees the same batches (`om train --resume`).
//!
//! # Examples
//!
//! ```
//! use onemodel::data::{DataLoader, TensorDataset};
//! use onemodel::Tensor;
//!
//! let x = Tensor::from_vec((0..10).map(|v| v as f32).collect(), &[5, 2])?;
//! let y = Tensor::from_vec_i32(vec![0, 1, 0, 1, 1], &[5])?;
//! let mut loader = DataLoader::new(TensorDataset::new(vec![x, y])?, 2)?.shuffle(7);
//! let mut seen = Vec::new();
//! for batch in loader.epoch() {
//!     let batch = batch?; // [x rows, y rows]
//!     assert_eq!(batch[0].shape()[1], 2);
//!     seen.extend(batch[1].to_vec_i32());
//! }
//! assert_eq!(seen.len(), 5); // batches of 2, 2 and the last 1 (drop_last is off)
//! # Ok::<(), onemodel::Error>(())
//! ```

mod loader;

pub use loader::{Collate, DataLoader, Epoch, LoaderState};

use om_core::rng::Rng;
use om_core::{DType, Error, Result, Tensor};
use std::sync::Arc;

/// A collection of examples read by index (PyTorch's map-style `Dataset`).
///
/// # Examples
///
/// ```
/// use onemodel::data::{DataLoader, Dataset};
/// use onemodel::{Result, Tensor};
///
/// /// The squares 0, 1, 4, ... as (input, target) pairs.
/// struct Squares(usize);
///
/// impl Dataset for Squares {
///     type Item = (Tensor, i32);
///     fn len(&self) -> usize {
///         self.0
///     }
///     fn get(&self, i: usize) -> Result<(Tensor, i32)> {
///         Ok((Tensor::from_vec(vec![i as f32], &[1])?, (i * i) as i32))
///     }
/// }
///
/// let mut loader = DataLoader::new(Squares(4), 4)?;
/// let (x, y) = loader.epoch().next().unwrap()?;
/// assert_eq!((x.shape(), y.to_vec_i32()), (&[4, 1][..], vec![0, 1, 4, 9]));
/// # Ok::<(), onemodel::Error>(())
/// ```
pub trait Dataset {
    /// One example (for a [`DataLoader`], a type that implements [`Collate`]).
    type Item;
    /// The number of examples.
    fn len(&self) -> usize;
    /// Example `index` (`0..len()`); an `Error` for an index out of range.
    fn get(&self, index: usize) -> Result<Self::Item>;
    /// Whether the dataset has no example.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<D: Dataset + ?Sized> Dataset for Arc<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, index: usize) -> Result<D::Item> {
        (**self).get(index)
    }
}

/// Tensors sharing their first dimension; example `i` is row `i` of each (PyTorch's
/// `TensorDataset`), as a `Vec<Tensor>` in the tensors' order.
///
/// # Examples
///
/// ```
/// use onemodel::data::{Dataset, TensorDataset};
/// use onemodel::Tensor;
/// let images = Tensor::zeros(&[3, 1, 8, 8])?;
/// let labels = Tensor::from_vec_i32(vec![4, 2, 7], &[3])?;
/// let ds = TensorDataset::new(vec![images, labels.clone()])?;
/// let row = ds.get(1)?;
/// assert_eq!((row[0].shape(), row[1].to_vec_i32()), (&[1, 8, 8][..], vec![2]));
/// // Tensors of different lengths do not make a dataset.
/// assert!(TensorDataset::new(vec![Tensor::zeros(&[2, 4])?, labels]).is_err());
/// # Ok::<(), onemodel::Error>(())
/// ```
pub struct TensorDataset {
    tensors: Vec<Tensor>,
    len: usize,
}

impl TensorDataset {
    /// The dataset of `tensors`' rows (copied to contiguous, gradient-free tensors). An
    /// `Error` naming `TensorDataset::new` when there is no tensor, a tensor has no
    /// dimension, or the first dimensions differ.
    pub fn new(tensors: Vec<Tensor>) -> Result<TensorDataset> {
        const OP: &str = "TensorDataset::new";
        let first = tensors.first().ok_or_else(|| Error::argument(OP, "needs at least one tensor"))?;
        let len = *first.shape().first().ok_or_else(|| Error::argument(OP, "tensor 0 is a scalar; each needs a first dimension"))?;
        let shapes: Vec<&[usize]> = tensors.iter().map(Tensor::shape).collect();
        if let Some(k) = shapes.iter().position(|s| s.first() != Some(&len)) {
            return Err(Error::shape(OP, &shapes, format!("tensor {k}'s first dimension differs from tensor 0's ({len} rows)")));
        }
        let tensors = tensors.iter().map(|t| contiguous(t).map_err(|e| e.with_op(OP))).collect::<Result<_>>()?;
        Ok(TensorDataset { tensors, len })
    }

    /// The tensors (contiguous), each with [`Dataset::len`] rows.
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }
}

/// A contiguous copy of `t` without gradient history, in its dtype.
fn contiguous(t: &Tensor) -> Result<Tensor> {
    match t.dtype() {
        DType::F32 => Ok(t.try_to_contiguous()?.detach()),
        DType::I32 => Tensor::from_vec_i32(t.try_with_i32(<[i32]>::to_vec)?, t.shape()),
    }
}

impl Dataset for TensorDataset {
    type Item = Vec<Tensor>;

    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, index: usize) -> Result<Vec<Tensor>> {
        check_index("TensorDataset::get", index, self.len)?;
        self.tensors
            .iter()
            .map(|t| {
                let row = &t.shape()[1..];
                let n: usize = row.iter().product();
                match t.dtype() {
                    DType::F32 => t.with_f32(|v| Tensor::from_slice(&v[index * n..(index + 1) * n], row)),
                    DType::I32 => t.with_i32(|v| Tensor::from_vec_i32(v[index * n..(index + 1) * n].to_vec(), row)),
                }
            })
            .collect()
    }
}

fn check_index(op: &'static str, index: usize, len: usize) -> Result<()> {
    if index < len {
        Ok(())
    } else {
        Err(Error::argument(op, format!("index {index} is out of range for {len} example(s)")))
    }
}

/// The examples of a dataset at the given indices, in their order (PyTorch's `Subset`);
/// made by [`random_split`].
///
/// # Examples
///
/// ```
/// use onemodel::data::{Dataset, Subset, TensorDataset};
/// use onemodel::Tensor;
/// use std::sync::Arc;
/// let ds = Arc::new(TensorDataset::new(vec![Tensor::arange(0.0, 5.0, 1.0)?])?);
/// let odd = Subset::new(ds, vec![1, 3])?;
/// assert_eq!((odd.len(), odd.get(1)?[0].to_vec()), (2, vec![3.0]));
/// # Ok::<(), onemodel::Error>(())
/// ```
pub struct Subset<D> {
    dataset: Arc<D>,
    indices: Vec<usize>,
}

impl<D: Dataset> Subset<D> {
    /// The examples of `dataset` at `indices`; an `Error` naming `Subset::new` for an index
    /// out of the dataset's range.
    pub fn new(dataset: Arc<D>, indices: Vec<usize>) -> Result<Subset<D>> {
        if let Some(&i) = indices.iter().find(|&&i| i >= dataset.len()) {
            return Err(Error::argument("Subset::new", format!("index {i} is out of range for {} example(s)", dataset.len())));
        }
        Ok(Subset { dataset, indices })
    }

    /// The indices into the whole dataset.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }
}

impl<D: Dataset> Dataset for Subset<D> {
    type Item = D::Item;

    fn len(&self) -> usize {
        self.indices.len()
    }

    fn get(&self, index: usize) -> Result<D::Item> {
        check_index("Subset::get", index, self.indices.len())?;
        self.dataset.get(self.indices[index])
    }
}

/// Splits `dataset` into non-overlapping subsets of the given lengths, which must sum to
/// its length, from a permutation drawn with `seed` (PyTorch's `random_split` with
/// integer lengths and `generator=torch.Generator().manual_seed(seed)`; the permutation is
/// a Fisher-Yates shuffle of this library's generator, so the subsets are not PyTorch's).
/// An `Error` naming `random_split` when the lengths do not sum to the dataset's length.
///
/// # Examples
///
/// ```
/// use onemodel::data::{random_split, Dataset, TensorDataset};
/// use onemodel::Tensor;
/// let ds = TensorDataset::new(vec![Tensor::arange(0.0, 10.0, 1.0)?])?;
/// let parts = random_split(ds, &[7, 3], 42)?;
/// assert_eq!((parts[0].len(), parts[1].len()), (7, 3));
/// let mut all: Vec<usize> = parts.iter().flat_map(|p| p.indices().to_vec()).collect();
/// all.sort();
/// assert_eq!(all, (0..10).collect::<Vec<_>>()); // every example exactly once
/// let ds = TensorDataset::new(vec![Tensor::zeros(&[10])?])?;
/// assert!(random_split(ds, &[7, 4], 42).is_err());
/// # Ok::<(), onemodel::Error>(())
/// ```
pub fn random_split<D: Dataset>(dataset: D, lengths: &[usize], seed: u64) -> Result<Vec<Subset<D>>> {
    let n = dataset.len();
    let total = lengths.iter().try_fold(0usize, |a, &l| a.checked_add(l));
    if total != Some(n) {
        return Err(Error::argument("random_split", format!("the lengths {lengths:?} do not sum to the dataset's length {n}")));
    }
    let mut order: Vec<usize> = (0..n).collect();
    shuffle(&mut order, &mut Rng::new(seed));
    let dataset = Arc::new(dataset);
    let mut at = 0;
    Ok(lengths
        .iter()
        .map(|&l| {
            at += l;
            Subset { dataset: dataset.clone(), indices: order[at - l..at].to_vec() }
        })
        .collect())
}

/// [`random_split`] by fractions of the dataset that sum to 1 (PyTorch's `random_split`
/// with fractional lengths): each subset gets `floor(fraction × len)` examples, and the
/// examples left over go one each to the subsets in order, round-robin. An `Error` naming
/// `random_split_fractions` for a fraction outside `[0, 1]` or fractions whose sum is not 1
/// (within 1e-9).
///
/// # Examples
///
/// ```
/// use onemodel::data::{random_split_fractions, Dataset, TensorDataset};
/// use onemodel::Tensor;
/// let ds = TensorDataset::new(vec![Tensor::zeros(&[10, 2])?])?;
/// let parts = random_split_fractions(ds, &[0.34, 0.33, 0.33], 0)?;
/// // floor gives 3, 3, 3; the one left over goes to the first subset
/// assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), vec![4, 3, 3]);
/// # Ok::<(), onemodel::Error>(())
/// ```
pub fn random_split_fractions<D: Dataset>(dataset: D, fractions: &[f64], seed: u64) -> Result<Vec<Subset<D>>> {
    const OP: &str = "random_split_fractions";
    if let Some(f) = fractions.iter().find(|f| !(0.0..=1.0).contains(*f)) {
        return Err(Error::argument(OP, format!("fraction {f} is not in [0, 1]")));
    }
    let sum: f64 = fractions.iter().sum();
    if (sum - 1.0).abs() > 1e-9 {
        return Err(Error::argument(OP, format!("the fractions {fractions:?} sum to {sum}, not 1")));
    }
    let n = dataset.len();
    let mut lengths: Vec<usize> = fractions.iter().map(|f| (f * n as f64).floor() as usize).collect();
    let left = n.saturating_sub(lengths.iter().sum());
    for i in 0..left {
        let k = i % lengths.len();
        lengths[k] += 1;
    }
    random_split(dataset, &lengths, seed).map_err(|e| e.with_op(OP))
}

/// Fisher-Yates in place, from the last position down: position `i` swaps with a uniform
/// one of `0..=i`. The shuffle of [`DataLoader`] and [`random_split`].
pub(crate) fn shuffle(order: &mut [usize], rng: &mut Rng) {
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
}
