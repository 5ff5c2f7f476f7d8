//! The [`DataLoader`] (batching, the seeded per-epoch shuffle, its saved state) and
//! [`Collate`], which turns a batch's examples into tensors.

use super::{shuffle, Dataset};
use om_core::rng::{Rng, RngState};
use om_core::{DType, Error, Result, Tensor};

/// Examples that combine into one batch: tensors stack along a new first axis (every
/// example's tensor must have the same shape and dtype), `i32` targets become an `i32`
/// tensor of shape `[batch]` (PyTorch's `default_collate`).
///
/// # Examples
///
/// ```
/// use onemodel::data::Collate;
/// use onemodel::Tensor;
/// let items = vec![(Tensor::zeros(&[2])?, 3), (Tensor::ones(&[2])?, 5)];
/// let (x, y) = Collate::collate(items)?;
/// assert_eq!((x.shape(), x.to_vec()), (&[2, 2][..], vec![0.0, 0.0, 1.0, 1.0]));
/// assert_eq!(y.to_vec_i32(), vec![3, 5]);
/// // Examples of different shapes do not stack.
/// assert!(Tensor::collate(vec![Tensor::zeros(&[2])?, Tensor::zeros(&[3])?]).is_err());
/// # Ok::<(), onemodel::Error>(())
/// ```
pub trait Collate: Sized {
    /// What a batch of these examples is.
    type Batch;
    /// The batch of `items` (at least one); an `Error` naming `collate` for no item or
    /// examples whose shapes or dtypes differ.
    fn collate(items: Vec<Self>) -> Result<Self::Batch>;
}

const OP: &str = "collate";

/// `tensors` stacked along a new first axis (data copied, no gradient history).
fn stack(tensors: &[&Tensor]) -> Result<Tensor> {
    let first = tensors.first().ok_or_else(|| Error::argument(OP, "a batch needs at least one example"))?;
    if let Some(k) = tensors.iter().position(|t| t.shape() != first.shape()) {
        return Err(Error::shape(OP, &[first.shape(), tensors[k].shape()], format!("example {k}'s shape differs from example 0's")));
    }
    if let Some(k) = tensors.iter().position(|t| t.dtype() != first.dtype()) {
        return Err(Error::argument(OP, format!("example {k} is {}, example 0 is {}", tensors[k].dtype(), first.dtype())));
    }
    let shape: Vec<usize> = std::iter::once(tensors.len()).chain(first.shape().iter().copied()).collect();
    let n = first.numel();
    match first.dtype() {
        DType::F32 => {
            let mut data = Vec::with_capacity(n * tensors.len());
            for t in tensors {
                t.try_with_f32(|v| data.extend_from_slice(v))?;
            }
            Tensor::from_vec(data, &shape)
        }
        DType::I32 => {
            let mut data = Vec::with_capacity(n * tensors.len());
            for t in tensors {
                t.try_with_i32(|v| data.extend_from_slice(v))?;
            }
            Tensor::from_vec_i32(data, &shape)
        }
    }
}

impl Collate for Tensor {
    type Batch = Tensor;
    fn collate(items: Vec<Tensor>) -> Result<Tensor> {
        stack(&items.iter().collect::<Vec<_>>())
    }
}

/// Each position stacked separately (the examples of a [`TensorDataset`](super::TensorDataset)).
impl Collate for Vec<Tensor> {
    type Batch = Vec<Tensor>;
    fn collate(items: Vec<Vec<Tensor>>) -> Result<Vec<Tensor>> {
        let fields = items.first().ok_or_else(|| Error::argument(OP, "a batch needs at least one example"))?.len();
        if let Some(k) = items.iter().position(|i| i.len() != fields) {
            return Err(Error::argument(OP, format!("example {k} has {} tensors, example 0 has {fields}", items[k].len())));
        }
        (0..fields).map(|f| stack(&items.iter().map(|i| &i[f]).collect::<Vec<_>>())).collect()
    }
}

impl Collate for (Tensor, Tensor) {
    type Batch = (Tensor, Tensor);
    fn collate(items: Vec<(Tensor, Tensor)>) -> Result<(Tensor, Tensor)> {
        let a = stack(&items.iter().map(|i| &i.0).collect::<Vec<_>>())?;
        Ok((a, stack(&items.iter().map(|i| &i.1).collect::<Vec<_>>())?))
    }
}

/// An input and an integer target (a class): the targets become an `i32` tensor `[batch]`.
impl Collate for (Tensor, i32) {
    type Batch = (Tensor, Tensor);
    fn collate(items: Vec<(Tensor, i32)>) -> Result<(Tensor, Tensor)> {
        let x = stack(&items.iter().map(|i| &i.0).collect::<Vec<_>>())?;
        let y: Vec<i32> = items.iter().map(|i| i.1).collect();
        let n = y.len();
        Ok((x, Tensor::from_vec_i32(y, &[n])?))
    }
}

/// Deals a [`Dataset`]'s indices into batches of `batch_size` and collates them (PyTorch's
/// `DataLoader` with `num_workers=0`).
///
/// Each epoch ([`DataLoader::epoch`], or [`DataLoader::next_batches`] for the indices
/// alone) cuts the current order into consecutive batches, the last one shorter unless
/// [`DataLoader::drop_last`] drops it. Without [`DataLoader::shuffle`] the order is
/// `0..len`. With it, every epoch first reshuffles the order with the loader's own
/// generator (seeded once; a Fisher-Yates pass over the previous epoch's order, which gives
/// a uniformly random permutation each epoch, as PyTorch's `RandomSampler` with a seeded
/// `generator` does — the permutations themselves differ from PyTorch's). Nothing else
/// draws from that generator, so the batches depend only on the seed and the epoch.
///
/// [`DataLoader::state`] captures the generator, the order and the epochs begun;
/// [`DataLoader::set_state`] restores them, so the next epoch is the one the saved loader
/// would have produced.
///
/// # Examples
///
/// ```
/// use onemodel::data::{DataLoader, TensorDataset};
/// use onemodel::Tensor;
/// let ds = TensorDataset::new(vec![Tensor::zeros(&[10, 3])?])?;
/// let mut loader = DataLoader::new(ds, 4)?.shuffle(1).drop_last(true);
/// assert_eq!(loader.len(), 2); // 10 / 4, the last 2 examples dropped
/// let saved = loader.state();
/// let first = loader.next_batches();
/// let second = loader.next_batches();
/// assert_ne!(first, second); // reshuffled every epoch
/// loader.set_state(saved)?;
/// assert_eq!(loader.next_batches(), first); // the same order again
/// // Bad settings are errors, not panics.
/// assert!(DataLoader::new(TensorDataset::new(vec![Tensor::zeros(&[3])?])?, 0).is_err());
/// assert!(DataLoader::new(TensorDataset::new(vec![Tensor::zeros(&[0, 2])?])?, 4).is_err());
/// # Ok::<(), onemodel::Error>(())
/// ```
pub struct DataLoader<D> {
    dataset: D,
    batch_size: usize,
    drop_last: bool,
    rng: Option<Rng>,
    order: Vec<usize>,
    epochs: u64,
}

/// What [`DataLoader::set_state`] restores: the epochs begun, the shuffle generator's state
/// (`None` for a loader that does not shuffle) and the current order of the indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoaderState {
    /// Epochs begun ([`DataLoader::next_batches`] calls).
    pub epochs: u64,
    /// The shuffle generator, if the loader shuffles.
    pub rng: Option<RngState>,
    /// The order of the last epoch begun (the start of the next shuffle).
    pub order: Vec<usize>,
}

impl<D: Dataset> DataLoader<D> {
    /// A loader of `dataset` in batches of `batch_size`, in order, keeping a short last
    /// batch. An `Error` naming `DataLoader::new` for a batch size of 0 or an empty dataset.
    pub fn new(dataset: D, batch_size: usize) -> Result<DataLoader<D>> {
        const OP: &str = "DataLoader::new";
        if batch_size == 0 {
            return Err(Error::argument(OP, "the batch size must be at least 1"));
        }
        if dataset.is_empty() {
            return Err(Error::argument(OP, "the dataset is empty"));
        }
        let order = (0..dataset.len()).collect();
        Ok(DataLoader { dataset, batch_size, drop_last: false, rng: None, order, epochs: 0 })
    }

    /// Reshuffles the order at the start of every epoch with a generator seeded with `seed`
    /// (PyTorch's `shuffle=True, generator=torch.Generator().manual_seed(seed)`).
    pub fn shuffle(mut self, seed: u64) -> DataLoader<D> {
        self.rng = Some(Rng::new(seed));
        self
    }

    /// Whether an epoch drops its last batch when it is shorter than the batch size
    /// (PyTorch's `drop_last`; off by default). A dataset smaller than the batch size then
    /// yields no batch at all.
    pub fn drop_last(mut self, drop_last: bool) -> DataLoader<D> {
        self.drop_last = drop_last;
        self
    }

    /// The dataset.
    pub fn dataset(&self) -> &D {
        &self.dataset
    }

    /// Replaces the dataset by one of the same length (fresh examples for the next epoch,
    /// as generated data needs), keeping the order and the shuffle. An `Error` naming
    /// `DataLoader::set_dataset` for another length.
    ///
    /// # Examples
    ///
    /// ```
    /// use onemodel::data::{DataLoader, TensorDataset};
    /// use onemodel::Tensor;
    /// let epoch = |v: f32| TensorDataset::new(vec![Tensor::full(&[4], v)?]);
    /// let mut loader = DataLoader::new(epoch(0.0)?, 4)?;
    /// loader.set_dataset(epoch(1.0)?)?; // this epoch's fresh examples
    /// assert_eq!(loader.epoch().next().unwrap()?[0].to_vec(), vec![1.0; 4]);
    /// assert!(loader.set_dataset(TensorDataset::new(vec![Tensor::zeros(&[5])?])?).is_err());
    /// # Ok::<(), onemodel::Error>(())
    /// ```
    pub fn set_dataset(&mut self, dataset: D) -> Result<()> {
        if dataset.len() != self.dataset.len() {
            return Err(Error::argument(
                "DataLoader::set_dataset",
                format!("the new dataset has {} example(s), the loader's {}", dataset.len(), self.dataset.len()),
            ));
        }
        self.dataset = dataset;
        Ok(())
    }

    /// The batch size.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// The batches of an epoch.
    pub fn len(&self) -> usize {
        let n = self.dataset.len();
        if self.drop_last {
            n / self.batch_size
        } else {
            n.div_ceil(self.batch_size)
        }
    }

    /// Whether an epoch has no batch (`drop_last` with fewer examples than a batch).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The epochs begun.
    pub fn epochs(&self) -> u64 {
        self.epochs
    }

    /// Begins the next epoch (reshuffling if the loader shuffles) and returns its batches
    /// as dataset indices: every index once, in batches of the batch size. A data-parallel
    /// step cuts these into shards and [`DataLoader::collate`]s each.
    ///
    /// # Examples
    ///
    /// ```
    /// use onemodel::data::{DataLoader, TensorDataset};
    /// use onemodel::Tensor;
    /// let ds = TensorDataset::new(vec![Tensor::from_vec(vec![10.0, 11.0, 12.0, 13.0, 14.0], &[5])?])?;
    /// let mut loader = DataLoader::new(ds, 2)?;
    /// let batches = loader.next_batches();
    /// assert_eq!(batches, vec![vec![0, 1], vec![2, 3], vec![4]]);
    /// // A shard of the second batch, collated on its own.
    /// assert_eq!(loader.collate(&batches[1][..1])?[0].to_vec(), vec![12.0]);
    /// # Ok::<(), onemodel::Error>(())
    /// ```
    pub fn next_batches(&mut self) -> Vec<Vec<usize>> {
        if let Some(rng) = &mut self.rng {
            shuffle(&mut self.order, rng);
        }
        self.epochs += 1;
        let batches = self.order.chunks(self.batch_size).map(<[usize]>::to_vec);
        batches.take(self.len()).collect()
    }

    /// The examples at `indices`, collated into a batch.
    pub fn collate(&self, indices: &[usize]) -> Result<<D::Item as Collate>::Batch>
    where
        D::Item: Collate,
    {
        let items = indices.iter().map(|&i| self.dataset.get(i)).collect::<Result<Vec<_>>>()?;
        Collate::collate(items)
    }

    /// Begins the next epoch ([`DataLoader::next_batches`]) and iterates over its collated
    /// batches.
    pub fn epoch(&mut self) -> Epoch<'_, D>
    where
        D::Item: Collate,
    {
        let batches = self.next_batches().into_iter();
        Epoch { loader: self, batches }
    }

    /// The loader's state (see [`LoaderState`]).
    pub fn state(&self) -> LoaderState {
        LoaderState { epochs: self.epochs, rng: self.rng.as_ref().map(Rng::state), order: self.order.clone() }
    }

    /// Restores a state from [`DataLoader::state`] of a loader of the same settings over a
    /// dataset of the same length. An `Error` naming `DataLoader::set_state` (and the loader
    /// unchanged) when the order is not a permutation of the dataset's indices, or the state
    /// has a generator and the loader does not shuffle, or the other way round.
    pub fn set_state(&mut self, state: LoaderState) -> Result<()> {
        const OP: &str = "DataLoader::set_state";
        let n = self.dataset.len();
        let mut seen = vec![false; n];
        let permutation = state.order.len() == n && state.order.iter().all(|&i| i < n && !std::mem::replace(&mut seen[i], true));
        if !permutation {
            return Err(Error::argument(OP, format!("the saved order is not a permutation of the {n} indices of the dataset")));
        }
        self.rng = match (state.rng, &self.rng) {
            (Some(s), Some(_)) => Some(Rng::from_state(s)),
            (None, None) => None,
            (Some(_), None) => return Err(Error::argument(OP, "the saved loader shuffles, this one does not")),
            (None, Some(_)) => return Err(Error::argument(OP, "this loader shuffles, the saved one did not")),
        };
        self.order = state.order;
        self.epochs = state.epochs;
        Ok(())
    }
}

/// The collated batches of one epoch, in order ([`DataLoader::epoch`]).
pub struct Epoch<'a, D> {
    loader: &'a DataLoader<D>,
    batches: std::vec::IntoIter<Vec<usize>>,
}

impl<D: Dataset> Iterator for Epoch<'_, D>
where
    D::Item: Collate,
{
    type Item = Result<<D::Item as Collate>::Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        self.batches.next().map(|b| self.loader.collate(&b))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.batches.size_hint()
    }
}

impl<D: Dataset> ExactSizeIterator for Epoch<'_, D> where D::Item: Collate {}
