//! `Tensor`: a cheap, clonable handle to a strided view of a [`Storage`], plus its autograd
//! metadata. Views (slice, transpose, reshape, ...) share storage; cloning a `Tensor` clones
//! the handle (like PyTorch), not the data.

use crate::autograd::Meta;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{self, contiguous_strides, for_each_row, Dims, ShapeStrides};
use crate::pool::Buffer;
use crate::recycle::{take_last, Recycler};
use crate::storage::{self, Storage};
use std::cell::Cell;
use std::sync::{Arc, Mutex, PoisonError};

pub(crate) struct Inner {
    pub(crate) storage: Arc<Storage>,
    layout: ShapeStrides,
    pub(crate) offset: usize,
    /// This handle's autograd state (a leaf's gradient edge holds the handle itself).
    pub(crate) meta: Mutex<Meta>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        storage::release(&mut self.storage);
    }
}

thread_local! {
    /// Emptied handle allocations, each with no other handle and no weak reference.
    static RECYCLED: Recycler<Inner> = const { Recycler::new() };
    /// What a recycled handle's slot holds until the handle is gone.
    static PLACEHOLDER: Option<Arc<Inner>> =
        storage::placeholder().map(|storage| Arc::new(Inner::new(storage, &[], &[], 0)));
    /// The observer of this thread's handles, if one is installed.
    static OBSERVER: Cell<Option<HandleObserver>> = const { Cell::new(None) };
}

impl Inner {
    fn new(storage: Arc<Storage>, shape: &[usize], strides: &[usize], offset: usize) -> Inner {
        let layout = ShapeStrides::new(shape, strides);
        Inner { storage, layout, offset, meta: Mutex::new(Meta::default()) }
    }
}

/// What the tensor layer tells an observer of the calling thread's tensor handles: the
/// activation scope's log (`scope.rs`) installs one while a scope is open on the thread,
/// and keeps its entries (weak handles, keyed by handle) itself; the tensor layer knows
/// nothing more of it.
#[derive(Clone, Copy)]
pub(crate) struct HandleObserver {
    /// A handle was created on this thread.
    pub(crate) created: fn(&Tensor),
    /// Drop any weak reference to this handle: its last strong handle is going and the
    /// observer holds its only weak one (so that its allocation can be reused), or it
    /// became a leaf's gradient ([`Tensor::forget_observed`]).
    pub(crate) forget: fn(&Tensor),
}

/// Installs (or, with `None`, removes) the observer of this thread's tensor handles.
pub(crate) fn set_observer(observer: Option<HandleObserver>) {
    let _ = OBSERVER.try_with(|o| o.set(observer));
}

fn observer() -> Option<HandleObserver> {
    OBSERVER.try_with(Cell::get).ok().flatten()
}

/// The last handle of a tensor created on this thread gives its allocation back for reuse
/// (a warm step then allocates no handle): its storage handle and autograd state are
/// dropped now, exactly when they would have been.
impl Drop for Tensor {
    fn drop(&mut self) {
        if Arc::strong_count(&self.0) != 1 {
            return;
        }
        if Arc::weak_count(&self.0) == 1 {
            if let Some(o) = observer() {
                (o.forget)(self);
            }
        }
        let Some(storage_placeholder) = storage::placeholder() else { return };
        let placeholder = || PLACEHOLDER.try_with(Clone::clone).ok().flatten();
        let empty = |inner: &mut Inner| {
            let mut old = std::mem::replace(&mut inner.storage, storage_placeholder);
            storage::release(&mut old);
            drop(old);
            drop(std::mem::take(inner.meta.get_mut().unwrap_or_else(PoisonError::into_inner)));
        };
        if let Some(emptied) = take_last(&mut self.0, placeholder, empty) {
            Recycler::keep(&RECYCLED, emptied);
        }
    }
}

/// An n-dimensional array of `f32` (or `i32`) values with optional gradient tracking.
///
/// ```
/// use om_core::Tensor;
/// let t = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// assert_eq!(t.shape(), &[2, 2]);
/// assert_eq!(t.to_vec(), vec![1.0, 2.0, 3.0, 4.0]);
/// # Ok::<(), om_core::Error>(())
/// ```
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<Inner>);

fn check_len(op: &'static str, len: usize, shape: &[usize]) -> Result<()> {
    match layout::checked_numel(shape) {
        Some(n) if n == len => Ok(()),
        Some(n) => Err(Error::shape(op, &[shape], format!("{len} values do not fill a shape of {n} elements"))),
        None => Err(Error::shape(op, &[shape], "the element count overflows")),
    }
}

/// The bytes of a 4-byte-element tensor of `shape`, or an error if the count overflows.
fn checked_bytes(shape: &[usize]) -> Result<usize> {
    layout::checked_numel(shape).and_then(|n| n.checked_mul(4)).ok_or_else(|| Error::shape("", &[shape], "the element count overflows"))
}

/// Checks that a strided view of `shape`, `strides` and `offset` reads only elements of a
/// storage of `len` elements (see [`Tensor::as_strided`]), without overflowing.
fn check_strided_bounds(shape: &[usize], strides: &[usize], offset: usize, len: usize) -> Result<()> {
    let fail = |msg: String| Err(Error::shape("as_strided", &[shape, strides], msg));
    if shape.len() != strides.len() {
        return fail(format!("shape has {} dimensions but strides has {}", shape.len(), strides.len()));
    }
    if layout::checked_numel(shape).is_none() {
        return fail("the element count overflows".into());
    }
    if shape.contains(&0) {
        return Ok(());
    }
    // The last element read: offset + Σ (size - 1) · stride.
    let last = shape.iter().zip(strides).try_fold(offset, |at, (&d, &s)| (d - 1).checked_mul(s).and_then(|span| at.checked_add(span)));
    match last {
        Some(last) if last < len => Ok(()),
        Some(last) => fail(format!("offset {offset} reads up to storage element {last}, past the end of a storage of {len} elements")),
        None => fail(format!("offset {offset} plus the strided extent overflows")),
    }
}

/// The element types a tensor's values can be read as: `f32` and `i32`, each convertible
/// from the other as `as` converts (`f32` to `i32` truncates toward zero, saturating).
trait Element: Copy {
    /// The dtype whose storage holds `Self` as it is.
    const DTYPE: DType;
    fn from_f32(v: f32) -> Self;
    fn from_i32(v: i32) -> Self;
    /// The buffer's elements as `Self`.
    fn slice(buf: &Buffer) -> &[Self];
    fn slice_mut(buf: &mut Buffer) -> &mut [Self];
    /// `out` itself if it is an `f32` slice (the gather's fast paths), else `Err(out)`.
    fn as_f32_mut(out: &mut [Self]) -> std::result::Result<&mut [f32], &mut [Self]>;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn from_f32(v: f32) -> f32 {
        v
    }
    fn from_i32(v: i32) -> f32 {
        v as f32
    }
    fn slice(buf: &Buffer) -> &[f32] {
        buf.f32()
    }
    fn slice_mut(buf: &mut Buffer) -> &mut [f32] {
        buf.f32_mut()
    }
    fn as_f32_mut(out: &mut [f32]) -> std::result::Result<&mut [f32], &mut [f32]> {
        Ok(out)
    }
}

impl Element for i32 {
    const DTYPE: DType = DType::I32;
    fn from_f32(v: f32) -> i32 {
        v as i32
    }
    fn from_i32(v: i32) -> i32 {
        v
    }
    fn slice(buf: &Buffer) -> &[i32] {
        buf.i32()
    }
    fn slice_mut(buf: &mut Buffer) -> &mut [i32] {
        buf.i32_mut()
    }
    fn as_f32_mut(out: &mut [i32]) -> std::result::Result<&mut [f32], &mut [i32]> {
        Err(out)
    }
}

/// Copies a row converting each element with `convert`.
fn converted<S: Copy, T>(convert: impl Fn(S) -> T) -> impl Fn(&mut [T], &[S]) {
    move |dst, src| dst.iter_mut().zip(src).for_each(|(d, &s)| *d = convert(s))
}

impl Tensor {
    // ----- construction -----

    pub(crate) fn from_storage(storage: Arc<Storage>, shape: &[usize], strides: &[usize], offset: usize) -> Tensor {
        let t = Tensor(Recycler::arc(&RECYCLED, Inner::new(storage, shape, strides, offset)));
        if let Some(o) = observer() {
            (o.created)(&t);
        }
        t
    }

    /// Tells this thread's handle observer to forget this handle: a leaf's gradient, which
    /// is never tied to an activation scope.
    pub(crate) fn forget_observed(&self) {
        if let Some(o) = observer() {
            (o.forget)(self);
        }
    }

    /// A contiguous tensor of `shape` whose values `fill` writes (it receives exactly
    /// `numel` elements, initially holding unspecified values). In exact mode every NaN
    /// written is then replaced by the canonical `0x7FC00000`
    /// ([`crate::kernels::CANONICAL_NAN`]), so no kernel's output shows the platform's NaN
    /// (x86 makes `0xFFC00000` for `∞ − ∞`, ARM `0x7FC00000`). Fails with
    /// [`Error::OutOfMemory`] when the buffer cannot be allocated (see
    /// [`crate::pool::max_buffer_bytes`]).
    #[doc(hidden)]
    pub fn build_f32(shape: &[usize], fill: impl FnOnce(&mut [f32]) -> Result<()>) -> Result<Tensor> {
        let exact = crate::compute::Compute::mode() == crate::compute::Mode::Exact;
        Tensor::build_f32_raw(shape, |out| {
            fill(out)?;
            if exact {
                crate::kernels::elementwise::canonicalise_nans(out);
            }
            Ok(())
        })
    }

    /// [`Tensor::build_f32`] without the NaN pass, for kernels that write canonical NaNs
    /// themselves (the lane loops).
    pub(crate) fn build_f32_raw(shape: &[usize], fill: impl FnOnce(&mut [f32]) -> Result<()>) -> Result<Tensor> {
        let n = checked_bytes(shape)? / 4;
        let mut buf = Buffer::try_new(n * 4)?;
        fill(&mut buf.f32_mut()[..n])?;
        Ok(Tensor::from_storage(crate::storage::shared(buf, n, DType::F32), shape, &contiguous_strides(shape), 0))
    }

    /// `N` new contiguous tensors of `shapes` whose values `fill` writes together (an
    /// operator with several outputs, or an output and the statistics its backward keeps);
    /// in exact mode NaNs become canonical as in [`Tensor::build_f32`].
    ///
    /// ```
    /// use om_core::Tensor;
    /// let [sum, diff] = Tensor::build_many_f32([&[2], &[2]], |[s, d]| {
    ///     s.copy_from_slice(&[3.0, 5.0]);
    ///     d.copy_from_slice(&[1.0, -1.0]);
    ///     Ok(())
    /// })?;
    /// assert_eq!((sum.to_vec(), diff.to_vec()), (vec![3.0, 5.0], vec![1.0, -1.0]));
    /// # Ok::<(), om_core::Error>(())
    /// ```
    #[doc(hidden)]
    pub fn build_many_f32<const N: usize>(shapes: [&[usize]; N], fill: impl FnOnce([&mut [f32]; N]) -> Result<()>) -> Result<[Tensor; N]> {
        let mut counts = [0usize; N];
        for (n, shape) in counts.iter_mut().zip(shapes) {
            *n = checked_bytes(shape)? / 4;
        }
        let mut bufs: [Option<Buffer>; N] = std::array::from_fn(|_| None);
        for (buf, &n) in bufs.iter_mut().zip(&counts) {
            *buf = Some(Buffer::try_new(n * 4)?);
        }
        let mut bufs = bufs.map(|b| b.expect("every buffer was allocated above"));
        let mut parts = bufs.iter_mut().zip(counts);
        fill(std::array::from_fn(|_| {
            let (buf, n) = parts.next().expect("one buffer per shape");
            &mut buf.f32_mut()[..n]
        }))?;
        if crate::compute::Compute::mode() == crate::compute::Mode::Exact {
            // As `build_f32`: the canonical NaN in exact mode.
            for (buf, &n) in bufs.iter_mut().zip(&counts) {
                crate::kernels::elementwise::canonicalise_nans(&mut buf.f32_mut()[..n]);
            }
        }
        let mut i = 0;
        Ok(bufs.map(|buf| {
            let t = Tensor::from_storage(crate::storage::shared(buf, counts[i], DType::F32), shapes[i], &contiguous_strides(shapes[i]), 0);
            i += 1;
            t
        }))
    }

    /// Like [`Tensor::build_f32`] for an `i32` tensor.
    #[doc(hidden)]
    pub fn build_i32(shape: &[usize], fill: impl FnOnce(&mut [i32]) -> Result<()>) -> Result<Tensor> {
        let n = checked_bytes(shape)? / 4;
        let mut buf = Buffer::try_new(n * 4)?;
        fill(&mut buf.i32_mut()[..n])?;
        Ok(Tensor::from_storage(crate::storage::shared(buf, n, DType::I32), shape, &contiguous_strides(shape), 0))
    }

    /// A tensor holding `data` in row-major order.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// let t = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// assert_eq!((t.shape(), t.to_vec()[5]), (&[2, 3][..], 6.0));
    /// assert!(Tensor::from_vec(vec![1.0, 2.0], &[3]).is_err());
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn from_vec(data: Vec<f32>, shape: impl AsRef<[usize]>) -> Result<Tensor> {
        let shape = shape.as_ref();
        Tensor::from_slice(&data, shape)
    }

    /// A tensor holding a copy of `data` in row-major order.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// assert_eq!(Tensor::from_slice(&[1.0, 2.0], &[2, 1])?.shape(), &[2, 1]);
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn from_slice(data: &[f32], shape: impl AsRef<[usize]>) -> Result<Tensor> {
        let shape = shape.as_ref();
        check_len("from_slice", data.len(), shape)?;
        Tensor::build_f32(shape, |out| {
            out.copy_from_slice(data);
            Ok(())
        })
        .map_err(|e| e.with_op("from_slice"))
    }

    /// An `i32` tensor holding `data` in row-major order.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// let ids = Tensor::from_vec_i32(vec![3, 0, 7], &[3])?;
    /// assert_eq!(ids.to_vec_i32(), vec![3, 0, 7]);
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn from_vec_i32(data: Vec<i32>, shape: impl AsRef<[usize]>) -> Result<Tensor> {
        let shape = shape.as_ref();
        check_len("from_vec_i32", data.len(), shape)?;
        Tensor::build_i32(shape, |out| {
            out.copy_from_slice(&data);
            Ok(())
        })
        .map_err(|e| e.with_op("from_vec_i32"))
    }

    /// An `i32` tensor of `i64` ids or targets (PyTorch's `torch.long`): the one cast by
    /// which Int64 ids enter, accepted wherever `i32` ids are (embedding, nll_loss /
    /// cross_entropy targets, gather / index_select, masks). Every value must fit `i32`;
    /// otherwise an error names the first that does not. `io::load` narrows `I64` tensors
    /// the same way.
    ///
    /// ```
    /// use om_core::{DType, Tensor};
    /// let ids = Tensor::from_vec_i64(vec![3, -100, 7], &[3])?;
    /// assert_eq!((ids.dtype(), ids.to_vec_i32()), (DType::I32, vec![3, -100, 7]));
    /// assert!(Tensor::from_vec_i64(vec![1 << 40], &[1]).is_err());
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn from_vec_i64(data: Vec<i64>, shape: &[usize]) -> Result<Tensor> {
        check_len("from_vec_i64", data.len(), shape)?;
        Tensor::build_i32(shape, |out| {
            for (i, (o, &v)) in out.iter_mut().zip(&data).enumerate() {
                *o = i32::try_from(v).map_err(|_| {
                    Error::argument("from_vec_i64", format!("value {v} at position {i} does not fit i32 (ids and targets are i32)"))
                })?;
            }
            Ok(())
        })
        .map_err(|e| e.with_op("from_vec_i64"))
    }

    /// A 0-d tensor holding `v`.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// let s = Tensor::scalar(2.5);
    /// assert_eq!((s.shape(), s.item()?), (&[][..], 2.5));
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn scalar(v: f32) -> Tensor {
        Tensor::full(&[], v).unwrap_or_else(|_| unreachable!("a scalar shape never overflows"))
    }

    /// A tensor of `shape` filled with `v`.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// assert_eq!(Tensor::full(&[2, 2], 3.0)?.to_vec(), vec![3.0; 4]);
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn full(shape: impl AsRef<[usize]>, v: f32) -> Result<Tensor> {
        let shape = shape.as_ref();
        Tensor::filled(shape, v).map_err(|e| e.with_op("full"))
    }

    /// [`Tensor::full`] with errors naming no operator yet.
    fn filled(shape: &[usize], v: f32) -> Result<Tensor> {
        Tensor::build_f32(shape, |out| {
            out.fill(v);
            Ok(())
        })
    }

    /// Zeros of `shape`. Like every constructor, it takes the shape as an array, a slice,
    /// a `Vec` or another tensor's `shape()`.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// assert_eq!(Tensor::zeros([2, 3])?.to_vec(), vec![0.0; 6]);
    /// let x = Tensor::zeros(&[2, 3])?;
    /// assert_eq!(Tensor::zeros(x.shape())?.shape(), Tensor::zeros(vec![2, 3])?.shape());
    /// assert_eq!(Tensor::zeros([])?.shape(), &[] as &[usize]); // a scalar
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn zeros(shape: impl AsRef<[usize]>) -> Result<Tensor> {
        let shape = shape.as_ref();
        Tensor::filled(shape, 0.0).map_err(|e| e.with_op("zeros"))
    }

    /// Ones of `shape`.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// assert_eq!(Tensor::ones([3])?.to_vec(), vec![1.0; 3]);
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn ones(shape: impl AsRef<[usize]>) -> Result<Tensor> {
        let shape = shape.as_ref();
        Tensor::filled(shape, 1.0).map_err(|e| e.with_op("ones"))
    }

    /// `start, start + step, ...` up to `end` (excluded) as a 1-d `f32` tensor
    /// (`torch.arange(start, end, step)`). As in PyTorch, the arguments are taken as `f64`
    /// (any of `f32`, `f64`, `i32`, `u32`, ... converts), the length is
    /// `ceil((end − start) / step)` computed in `f64`, and element `i` is
    /// `start + step · i` computed in `f64` and rounded to `f32` (PyTorch's scalar loop; its
    /// vectorised loop, which steps from the start of each vector, can differ in the last
    /// bit).
    ///
    /// Fails with [`Error::Argument`] when `step` is zero, when `start` or `end` is not
    /// finite, when `end` lies on the wrong side of `start` for the sign of `step`, or when
    /// the length overflows. `start == end` gives an empty tensor.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// assert_eq!(Tensor::arange(0.0, 1.0, 0.25)?.to_vec(), vec![0.0, 0.25, 0.5, 0.75]);
    /// assert_eq!(Tensor::arange(0, 5, 1)?.to_vec(), vec![0.0, 1.0, 2.0, 3.0, 4.0]);
    /// assert_eq!(Tensor::arange(3.0, 0.0, -1.5)?.to_vec(), vec![3.0, 1.5]);
    /// assert!(Tensor::arange(0.0, 1.0, 0.0).is_err());
    /// assert!(Tensor::arange(0.0, 1.0, -0.5).is_err());
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn arange(start: impl Into<f64>, end: impl Into<f64>, step: impl Into<f64>) -> Result<Tensor> {
        const OP: &str = "arange";
        let (start, end, step) = (start.into(), end.into(), step.into());
        if step == 0.0 || step.is_nan() {
            return Err(Error::argument(OP, format!("step must be nonzero, got {step}")));
        }
        if !(start.is_finite() && end.is_finite()) {
            return Err(Error::argument(OP, format!("unsupported range: {start} -> {end}")));
        }
        if (step > 0.0 && end < start) || (step < 0.0 && end > start) {
            return Err(Error::argument(
                OP,
                format!("upper bound and larger bound inconsistent with step sign: {start} -> {end} by {step}"),
            ));
        }
        let len = ((end - start) / step).ceil();
        if len.is_nan() || len >= usize::MAX as f64 {
            return Err(Error::argument(OP, format!("invalid size, possible overflow: {start} -> {end} by {step} gives {len} elements")));
        }
        Tensor::build_f32(&[len as usize], |out| {
            out.iter_mut().enumerate().for_each(|(i, v)| *v = (start + step * i as f64) as f32);
            Ok(())
        })
        .map_err(|e| e.with_op(OP))
    }

    /// `steps` values evenly spaced from `start` to `end`, both included, as a 1-d `f32`
    /// tensor (`torch.linspace(start, end, steps)`). As PyTorch computes it for `float32`:
    /// `start` and `end` are rounded to `f32`, `step = (end − start) / (steps − 1)` in `f32`,
    /// and the values are filled from both ends — element `i` is `start + step · i` in the
    /// first half (`i < steps / 2`) and `end − step · (steps − 1 − i)` in the second, so
    /// the last element is exactly `end`. `steps = 1` gives `[start]`; `steps = 0` an empty
    /// tensor (as in PyTorch).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// assert_eq!(Tensor::linspace(0.0, 1.0, 5)?.to_vec(), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    /// assert_eq!(Tensor::linspace(2, -2, 3)?.to_vec(), vec![2.0, 0.0, -2.0]);
    /// assert_eq!(Tensor::linspace(0.0, 1.0, 0)?.shape(), &[0]);
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn linspace(start: impl Into<f64>, end: impl Into<f64>, steps: usize) -> Result<Tensor> {
        let (start, end) = (start.into() as f32, end.into() as f32);
        let step = if steps > 1 { (end - start) / (steps - 1) as f32 } else { 0.0 };
        let halfway = steps / 2;
        Tensor::build_f32(&[steps], |out| {
            for (i, v) in out.iter_mut().enumerate() {
                *v = if i < halfway { start + step * i as f32 } else { end - step * (steps - 1 - i) as f32 };
            }
            if steps == 1 {
                out[0] = start;
            }
            Ok(())
        })
        .map_err(|e| e.with_op("linspace"))
    }

    /// The `n × n` identity matrix (`torch.eye(n)`).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// assert_eq!(Tensor::eye(2)?.to_vec(), vec![1.0, 0.0, 0.0, 1.0]);
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn eye(n: usize) -> Result<Tensor> {
        Tensor::eye_rect(n, n).map_err(|e| e.with_op("eye"))
    }

    /// The `rows × cols` matrix with ones on the main diagonal and zeros elsewhere
    /// (`torch.eye(n, m)`).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// assert_eq!(Tensor::eye_rect(2, 3)?.to_vec(), vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn eye_rect(rows: usize, cols: usize) -> Result<Tensor> {
        Tensor::build_f32(&[rows, cols], |out| {
            out.fill(0.0);
            out.iter_mut().step_by(cols + 1).take(rows.min(cols)).for_each(|v| *v = 1.0);
            Ok(())
        })
        .map_err(|e| e.with_op("eye"))
    }

    /// A tensor of `like`'s shape and dtype filled with `v` (`torch.full_like`; an `i32`
    /// tensor gets `v as i32`, truncated toward zero).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// let x = Tensor::zeros(&[2, 3])?;
    /// assert_eq!(Tensor::full_like(&x, 7.0)?.to_vec(), vec![7.0; 6]);
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn full_like(like: &Tensor, v: f32) -> Result<Tensor> {
        Tensor::filled_like(like, v).map_err(|e| e.with_op("full_like"))
    }

    /// [`Tensor::full_like`] with errors naming no operator yet.
    fn filled_like(like: &Tensor, v: f32) -> Result<Tensor> {
        match like.dtype() {
            DType::F32 => Tensor::filled(like.shape(), v),
            DType::I32 => Tensor::build_i32(like.shape(), |out| {
                out.fill(v as i32);
                Ok(())
            }),
        }
    }

    /// Zeros of `like`'s shape and dtype (`torch.zeros_like`).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// let x = Tensor::randn(&[2, 3])?;
    /// assert_eq!(Tensor::zeros_like(&x)?.to_vec(), vec![0.0; 6]);
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn zeros_like(like: &Tensor) -> Result<Tensor> {
        Tensor::filled_like(like, 0.0).map_err(|e| e.with_op("zeros_like"))
    }

    /// Ones of `like`'s shape and dtype (`torch.ones_like`).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// let x = Tensor::zeros(&[3])?;
    /// assert_eq!(Tensor::ones_like(&x)?.to_vec(), vec![1.0; 3]);
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn ones_like(like: &Tensor) -> Result<Tensor> {
        Tensor::filled_like(like, 1.0).map_err(|e| e.with_op("ones_like"))
    }

    /// Standard normal values of `like`'s shape (`torch.randn_like`), drawn as
    /// [`Tensor::randn`] draws. `like` must be `f32` (PyTorch has no normal integers either).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::{rng, Tensor};
    /// let x = Tensor::zeros(&[2, 3])?;
    /// rng::manual_seed(1);
    /// let a = Tensor::randn_like(&x)?;
    /// rng::manual_seed(1);
    /// assert_eq!(a.to_vec(), Tensor::randn(&[2, 3])?.to_vec());
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn randn_like(like: &Tensor) -> Result<Tensor> {
        like.expect_f32("randn_like", "like")?;
        Tensor::randn(like.shape()).map_err(|e| e.with_op("randn_like"))
    }

    /// Uniform values in `[0, 1)` of `like`'s shape (`torch.rand_like`), drawn as
    /// [`Tensor::rand`] draws. `like` must be `f32`.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// let u = Tensor::rand_like(&Tensor::zeros(&[100])?)?;
    /// assert!(u.to_vec().iter().all(|v| (0.0..1.0).contains(v)));
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn rand_like(like: &Tensor) -> Result<Tensor> {
        like.expect_f32("rand_like", "like")?;
        Tensor::rand(like.shape()).map_err(|e| e.with_op("rand_like"))
    }

    /// Uniform random integers in `[low, high)` as an `i32` tensor of `shape`
    /// (`torch.randint`; class targets for `nll_loss`/`cross_entropy` are `i32`), from a
    /// generator seeded with one draw of the calling thread's default stream. Fails with
    /// [`Error::Argument`] unless `low < high`.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::{rng, DType, Tensor};
    /// rng::manual_seed(0);
    /// let y = Tensor::randint(0, 10, &[8])?;
    /// assert_eq!(y.dtype(), DType::I32);
    /// assert!(y.to_vec_i32().iter().all(|v| (0..10).contains(v)));
    /// assert!(Tensor::randint(3, 3, &[1]).is_err());
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn randint(low: i32, high: i32, shape: impl AsRef<[usize]>) -> Result<Tensor> {
        let shape = shape.as_ref();
        if low >= high {
            return Err(Error::argument(
                "randint",
                format!("random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"),
            ));
        }
        Tensor::randint_with_seed(low, high, shape, crate::rng::next_seed())
    }

    /// [`Tensor::randint`] from a fixed generator seeded with `seed`.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// let a = Tensor::randint_with_seed(0, 5, &[6], 3)?;
    /// assert_eq!(a.to_vec_i32(), Tensor::randint_with_seed(0, 5, &[6], 3)?.to_vec_i32());
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn randint_with_seed(low: i32, high: i32, shape: impl AsRef<[usize]>, seed: u64) -> Result<Tensor> {
        let shape = shape.as_ref();
        if low >= high {
            return Err(Error::argument(
                "randint",
                format!("random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"),
            ));
        }
        let span = (high as i64 - low as i64) as usize;
        let mut rng = crate::rng::Rng::new(seed);
        Tensor::build_i32(shape, |out| {
            out.iter_mut().for_each(|v| *v = (low as i64 + rng.below(span) as i64) as i32);
            Ok(())
        })
        .map_err(|e| e.with_op("randint"))
    }

    /// A random permutation of `0, 1, ..., n − 1` as a 1-d `i32` tensor
    /// (`torch.randperm`), from a generator seeded with one draw of the calling thread's
    /// default stream. Fails with [`Error::Argument`] when `n − 1` does not fit `i32`.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// let mut p = Tensor::randperm(5)?.to_vec_i32();
    /// p.sort();
    /// assert_eq!(p, vec![0, 1, 2, 3, 4]);
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn randperm(n: usize) -> Result<Tensor> {
        Tensor::randperm_with_seed(n, crate::rng::next_seed())
    }

    /// [`Tensor::randperm`] from a fixed generator seeded with `seed` (a Fisher-Yates
    /// shuffle).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// let p = Tensor::randperm_with_seed(4, 3)?;
    /// assert_eq!(p.to_vec_i32(), Tensor::randperm_with_seed(4, 3)?.to_vec_i32());
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn randperm_with_seed(n: usize, seed: u64) -> Result<Tensor> {
        if n > i32::MAX as usize + 1 {
            return Err(Error::argument("randperm", format!("n = {n} has elements past i32::MAX (permutations are i32)")));
        }
        let mut rng = crate::rng::Rng::new(seed);
        Tensor::build_i32(&[n], |out| {
            out.iter_mut().enumerate().for_each(|(i, v)| *v = i as i32);
            for i in (1..n).rev() {
                out.swap(i, rng.below(i + 1));
            }
            Ok(())
        })
        .map_err(|e| e.with_op("randperm"))
    }

    /// Standard normal values from a generator seeded with one draw of the calling
    /// thread's default stream ([`crate::rng::manual_seed`] makes it reproducible; two calls
    /// in turn differ).
    ///
    /// ```
    /// use om_core::{rng, Tensor};
    /// rng::manual_seed(3);
    /// let (a, b) = (Tensor::randn(&[4])?, Tensor::randn(&[4])?);
    /// assert_ne!(a.to_vec(), b.to_vec());
    /// rng::manual_seed(3);
    /// assert_eq!(Tensor::randn(&[4])?.to_vec(), a.to_vec());
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn randn(shape: impl AsRef<[usize]>) -> Result<Tensor> {
        let shape = shape.as_ref();
        Tensor::randn_with_seed(shape, crate::rng::next_seed())
    }

    /// Uniform values in `[0, 1)` from a generator seeded with one draw of the calling
    /// thread's default stream (PyTorch's `torch.rand`).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// let u = Tensor::rand(&[100])?;
    /// assert!(u.to_vec().iter().all(|v| (0.0..1.0).contains(v)));
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn rand(shape: impl AsRef<[usize]>) -> Result<Tensor> {
        let shape = shape.as_ref();
        Tensor::rand_uniform(shape, 0.0, 1.0, crate::rng::next_seed()).map_err(|e| e.with_op("rand"))
    }

    /// Standard normal values from a fixed generator seeded with `seed` (SplitMix64 and
    /// Box-Muller in f64; reproducible wherever the platform's f64 `ln`/`sin`/`cos` agree).
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// let a = Tensor::randn_with_seed(&[3], 9)?;
    /// assert_eq!(a.to_vec(), Tensor::randn_with_seed(&[3], 9)?.to_vec());
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn randn_with_seed(shape: impl AsRef<[usize]>, seed: u64) -> Result<Tensor> {
        let shape = shape.as_ref();
        let mut rng = crate::rng::Rng::new(seed);
        Tensor::build_f32(shape, |out| {
            out.iter_mut().for_each(|v| *v = rng.normal());
            Ok(())
        })
        .map_err(|e| e.with_op("randn"))
    }

    /// Uniform values in `[lo, hi)` from a fixed generator seeded with `seed`.
    ///
    /// # Examples
    ///
    /// ```
    /// use om_core::Tensor;
    /// let u = Tensor::rand_uniform(&[50], -1.0, 1.0, 4)?;
    /// assert!(u.to_vec().iter().all(|v| (-1.0..1.0).contains(v)));
    /// assert!(Tensor::rand_uniform(&[1], 1.0, 1.0, 4).is_err());
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn rand_uniform(shape: impl AsRef<[usize]>, lo: f32, hi: f32, seed: u64) -> Result<Tensor> {
        let shape = shape.as_ref();
        if !(lo.is_finite() && hi.is_finite() && lo < hi) {
            return Err(Error::argument("rand_uniform", format!("need finite lo < hi, got [{lo}, {hi})")));
        }
        let mut rng = crate::rng::Rng::new(seed);
        Tensor::build_f32(shape, |out| {
            out.iter_mut().for_each(|v| *v = rng.uniform(lo, hi));
            Ok(())
        })
        .map_err(|e| e.with_op("rand_uniform"))
    }

    // ----- layout -----

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        self.0.layout.shape()
    }

    /// Element strides of each dimension.
    pub fn strides(&self) -> &[usize] {
        self.0.layout.strides()
    }

    /// Element offset of the first element in the storage.
    pub fn offset(&self) -> usize {
        self.0.offset
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        layout::numel(self.shape())
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.0.storage.dtype()
    }

    /// Whether the elements lie in row-major order without gaps.
    pub fn is_contiguous(&self) -> bool {
        // As in PyTorch, a tensor without elements is contiguous whatever its strides.
        if self.numel() == 0 {
            return true;
        }
        let mut expect = 1;
        for (&d, &s) in self.shape().iter().zip(self.strides()).rev() {
            if d != 1 && s != expect {
                return false;
            }
            expect *= d;
        }
        true
    }

    /// Fails with [`Error::DType`] naming `op` and `arg` unless the tensor is `f32`.
    #[doc(hidden)]
    pub fn expect_f32(&self, op: &'static str, arg: &'static str) -> Result<()> {
        if self.dtype() != DType::F32 {
            return Err(Error::DType { op, arg, expected: DType::F32, got: self.dtype() });
        }
        Ok(())
    }

    /// The storage's version counter (bumped by every in-place write).
    #[doc(hidden)]
    pub fn version(&self) -> u64 {
        self.0.storage.version()
    }

    /// Whether this handle is the only one on its storage: no other handle (clone or view)
    /// can read the storage, so a write to it is seen through this handle alone. (A scope's
    /// log holds handles weakly and reads none of their values.)
    pub(crate) fn is_sole_handle(&self) -> bool {
        Arc::strong_count(&self.0) == 1 && Arc::strong_count(&self.0.storage) == 1 && Arc::weak_count(&self.0.storage) == 0
    }

    /// Whether two tensors share one storage (one is a view of the other).
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0.storage, &other.0.storage)
    }

    /// A new handle on the same storage with another layout (PyTorch's `as_strided`, with
    /// no autograd history, like [`Tensor::detach`]): element `i` of the view reads the
    /// storage at `offset + Σ index_d · strides[d]`. `shape` and `strides` are arrays,
    /// `Vec<usize>`s or slices (no allocation up to 4 dimensions).
    ///
    /// Fails with [`Error::Shape`] when `shape` and `strides` differ in length, when the
    /// element count overflows, or when the last element the view reads lies past the end
    /// of the storage. A view with no elements reads nothing, so (as in PyTorch) any
    /// offset is accepted for it.
    ///
    /// ```
    /// use om_core::Tensor;
    /// let x = Tensor::arange(0, 6, 1)?;
    /// // The transpose of `x` seen as a 2x3 matrix.
    /// let t = x.as_strided([3, 2], [1, 3], 0)?;
    /// assert_eq!(t.to_vec(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    /// assert!(t.shares_storage(&x));
    /// // Element (1, 1) would read storage element 6 of 6.
    /// assert!(x.as_strided([2, 2], [1, 3], 2).is_err());
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn as_strided(&self, shape: impl Into<Dims>, strides: impl Into<Dims>, offset: usize) -> Result<Tensor> {
        let (shape, strides) = (shape.into(), strides.into());
        check_strided_bounds(&shape, &strides, offset, self.0.storage.len())?;
        Ok(Tensor::from_storage(self.0.storage.clone(), &shape, &strides, offset))
    }

    // ----- data access -----

    /// Runs `f` on the values in row-major order: the storage slice itself when the tensor
    /// is contiguous, a pooled gathered copy otherwise. `i32` values are converted.
    ///
    /// # Panics
    /// If the gathered copy cannot be allocated (an expanded view far larger than memory);
    /// operators use [`Tensor::try_with_f32`].
    #[doc(hidden)]
    pub fn with_f32<R>(&self, f: impl FnOnce(&[f32]) -> R) -> R {
        self.try_with_f32(f).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Tensor::with_f32`], failing with [`Error::OutOfMemory`] (naming no operator yet)
    /// instead of panicking when the gathered copy cannot be allocated.
    #[doc(hidden)]
    pub fn try_with_f32<R>(&self, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
        self.try_with(f)
    }

    /// Runs `f` on the values in row-major order as `T`: the storage slice itself when the
    /// tensor is contiguous and holds `T`, a pooled gathered (and converted) copy otherwise.
    fn try_with<T: Element, R>(&self, f: impl FnOnce(&[T]) -> R) -> Result<R> {
        let n = self.numel();
        if n == 0 {
            // An empty view's offset may lie past its storage: read nothing.
            return Ok(f(&[]));
        }
        let storage = self.0.storage.read();
        if self.dtype() == T::DTYPE && self.is_contiguous() {
            return Ok(f(&T::slice(&storage)[self.0.offset..self.0.offset + n]));
        }
        drop(storage);
        let mut tmp = Buffer::try_new(checked_bytes(self.shape())?)?;
        let out = &mut T::slice_mut(&mut tmp)[..n];
        self.gather(out);
        Ok(f(out))
    }

    /// Writes the elements in row-major order into `out` (`numel` long), converted to `T`.
    fn gather<T: Element>(&self, out: &mut [T]) {
        if out.is_empty() {
            return;
        }
        let storage = self.0.storage.read();
        match (self.dtype(), T::as_f32_mut(out)) {
            (DType::F32, Ok(out)) => self.gather_f32(storage.f32(), out),
            (DType::F32, Err(out)) => self.gather_rows(storage.f32(), out, T::from_f32, converted(T::from_f32)),
            (DType::I32, Ok(out)) => self.gather_rows(storage.i32(), out, f32::from_i32, converted(f32::from_i32)),
            (DType::I32, Err(out)) => self.gather_rows(storage.i32(), out, T::from_i32, converted(T::from_i32)),
        }
    }

    /// [`Tensor::gather`] from `f32` storage into `f32`: a plain copy when contiguous, a
    /// tiled transpose for a transposed matrix, row copies otherwise.
    fn gather_f32(&self, src: &[f32], out: &mut [f32]) {
        if self.is_contiguous() {
            out.copy_from_slice(&src[self.0.offset..self.0.offset + out.len()]);
            return;
        }
        if let (&[rows, cols], &[1, col_step]) = (self.shape(), self.strides()) {
            // A transposed matrix (a weight's gradient through `transpose`): copy it in
            // cache-sized tiles instead of one long strided column per row.
            if rows > 1 && cols > 1 {
                let span = (cols - 1) * col_step + rows;
                let src = &src[self.0.offset..self.0.offset + span];
                crate::kernels::transpose::transpose(src, cols, rows, col_step, 1, out);
                return;
            }
        }
        self.gather_rows(src, out, |v| v, <[f32]>::copy_from_slice);
    }

    /// [`Tensor::gather`] a whole row at a time: `copy_row` where the row is contiguous in
    /// storage, `convert` per element otherwise.
    fn gather_rows<S: Copy, T>(&self, src: &[S], out: &mut [T], convert: impl Fn(S) -> T, copy_row: impl Fn(&mut [T], &[S])) {
        let mut i = 0;
        for_each_row(self.shape(), [self.strides()], [self.0.offset], |[start], len, [step]| {
            let dst = &mut out[i..i + len];
            if step == 1 {
                copy_row(dst, &src[start..start + len]);
            } else {
                dst.iter_mut().enumerate().for_each(|(j, d)| *d = convert(src[start + j * step]));
            }
            i += len;
        });
    }

    /// Whether this is the only handle to a contiguous `f32` buffer that nothing else
    /// shares (no view, no saved copy), so the engine may keep it as a leaf's gradient.
    pub(crate) fn is_sole_contiguous_owner(&self) -> bool {
        Arc::strong_count(&self.0) == 1
            && Arc::strong_count(&self.0.storage) == 1
            && Arc::weak_count(&self.0.storage) == 0
            && self.dtype() == DType::F32
            && self.0.offset == 0
            && self.is_contiguous()
            && self.numel() == self.0.storage.len()
    }

    /// [`Tensor::try_with_f32`] for an optional operand (a bias, γ, β): `f` gets `None` when
    /// the tensor is absent; fails with [`Error::OutOfMemory`] (naming no operator yet) if a
    /// gathered copy cannot be allocated.
    ///
    /// ```
    /// use om_core::Tensor;
    /// let bias = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
    /// assert_eq!(Tensor::try_with_f32_opt(Some(&bias), |b| b.map(|b| b.iter().sum::<f32>()))?, Some(3.0));
    /// assert_eq!(Tensor::try_with_f32_opt(None, |b| b.is_none())?, true);
    /// # Ok::<(), om_core::Error>(())
    /// ```
    #[doc(hidden)]
    pub fn try_with_f32_opt<R>(t: Option<&Tensor>, f: impl FnOnce(Option<&[f32]>) -> R) -> Result<R> {
        match t {
            Some(t) => t.try_with_f32(|s| f(Some(s))),
            None => Ok(f(None)),
        }
    }

    /// Runs `f` on the values in row-major order as `i32` (`f32` values are truncated
    /// toward zero, saturating, as `as i32` does).
    ///
    /// # Panics
    /// If the gathered copy cannot be allocated; operators use [`Tensor::try_with_i32`].
    #[doc(hidden)]
    pub fn with_i32<R>(&self, f: impl FnOnce(&[i32]) -> R) -> R {
        self.try_with_i32(f).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Tensor::with_i32`], failing with [`Error::OutOfMemory`] (naming no operator yet)
    /// instead of panicking when the gathered copy cannot be allocated.
    #[doc(hidden)]
    pub fn try_with_i32<R>(&self, f: impl FnOnce(&[i32]) -> R) -> Result<R> {
        self.try_with(f)
    }

    /// Runs `f` on the whole storage as `f32` (for kernels that walk strides themselves).
    /// Must only be called on `f32` tensors.
    #[doc(hidden)]
    pub fn with_storage_f32<R>(&self, f: impl FnOnce(&[f32]) -> R) -> R {
        debug_assert_eq!(self.dtype(), DType::F32);
        let storage = self.0.storage.read();
        f(&storage.f32()[..self.0.storage.len()])
    }

    /// The values in row-major order (`i32` values converted to `f32`).
    pub fn to_vec(&self) -> Vec<f32> {
        self.with_f32(|s| s.to_vec())
    }

    /// The values in row-major order as `i32`.
    pub fn to_vec_i32(&self) -> Vec<i32> {
        self.with_i32(|s| s.to_vec())
    }

    /// The single value of a one-element tensor.
    pub fn item(&self) -> Result<f32> {
        if self.numel() != 1 {
            return Err(Error::shape("item", &[self.shape()], "item() needs exactly one element"));
        }
        Ok(self.with_f32(|s| s[0]))
    }

    /// A contiguous copy when the tensor is not contiguous (or not `f32`), else a handle
    /// to the same storage. Records nothing (use the `contiguous` operator for that).
    ///
    /// # Panics
    /// If the copy cannot be allocated; operators use [`Tensor::try_to_contiguous`].
    #[doc(hidden)]
    pub fn to_contiguous(&self) -> Tensor {
        self.try_to_contiguous().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Tensor::to_contiguous`], failing with [`Error::OutOfMemory`] (naming no operator
    /// yet) when the copy cannot be allocated (an expanded view far larger than memory).
    #[doc(hidden)]
    pub fn try_to_contiguous(&self) -> Result<Tensor> {
        if self.dtype() == DType::F32 && self.is_contiguous() {
            return Ok(self.detach());
        }
        Tensor::build_f32(self.shape(), |out| {
            self.gather(out);
            Ok(())
        })
    }

    // ----- in-place writes (each bumps the storage version) -----

    /// Runs `f` on the tensor's elements in row-major order for an in-place update.
    /// The tensor must be contiguous and `f32`.
    #[doc(hidden)]
    pub fn update_f32(&self, op: &'static str, f: impl FnOnce(&mut [f32])) -> Result<()> {
        if self.dtype() != DType::F32 {
            return Err(Error::DType { op, arg: "self", expected: DType::F32, got: self.dtype() });
        }
        if !self.is_contiguous() {
            return Err(Error::argument(op, "in-place updates need a contiguous tensor"));
        }
        let n = self.numel();
        let mut storage = self.0.storage.write();
        if n == 0 {
            // Still a write (the version moves), but an empty view's offset may lie past
            // its storage: touch nothing.
            f(&mut []);
            return Ok(());
        }
        f(&mut storage.f32_mut()[self.0.offset..self.0.offset + n]);
        Ok(())
    }

    /// Sets every element to `v` in place.
    pub fn fill_(&self, v: f32) -> Result<()> {
        self.update_f32("fill_", |s| s.fill(v))
    }

    /// Whether no two elements of the tensor share a storage slot: true for contiguous,
    /// transposed, permuted and sliced views; false for an expanded (broadcast) view,
    /// which an in-place write could not give distinct values.
    ///
    /// # Examples
    /// ```
    /// use om_core::Tensor;
    /// let t = Tensor::zeros(&[2, 3])?;
    /// assert!(t.is_non_overlapping());
    /// let e = t.as_strided([2, 3], [0, 1], 0)?;
    /// assert!(t.as_strided([3, 2], [1, 3], 0)?.is_non_overlapping());
    /// assert!(!e.is_non_overlapping());
    /// # Ok::<(), om_core::Error>(())
    /// ```
    pub fn is_non_overlapping(&self) -> bool {
        if self.numel() <= 1 {
            return true;
        }
        let mut dims: Vec<(usize, usize)> =
            self.shape().iter().copied().zip(self.strides().iter().copied()).filter(|&(d, _)| d > 1).collect();
        dims.sort_by_key(|&(_, s)| s);
        let mut extent = 0usize; // the largest offset reached by the dimensions so far
        for (d, s) in dims {
            if s <= extent {
                return false;
            }
            extent = match (d - 1).checked_mul(s).and_then(|x| x.checked_add(extent)) {
                Some(e) => e,
                None => return false,
            };
        }
        true
    }

    /// Copies `src` (same shape) into this tensor in place. A non-contiguous destination
    /// (a transposed or sliced view) is written through its strides; an expanded one
    /// (several elements sharing memory) is refused before anything is written.
    pub fn copy_(&self, src: &Tensor) -> Result<()> {
        if src.shape() != self.shape() {
            return Err(Error::shape("copy_", &[self.shape(), src.shape()], "copy_ needs equal shapes"));
        }
        if !self.is_contiguous() && self.dtype() == DType::F32 {
            if !self.is_non_overlapping() {
                return Err(Error::argument(
                    "copy_",
                    format!(
                        "the destination is an expanded view (shape {:?}, strides {:?}): its elements share memory",
                        self.shape(),
                        self.strides()
                    ),
                ));
            }
            // Values first (the source may share this storage), then the strided write.
            let values = src.try_with_f32(|s| s.to_vec())?;
            let mut storage = self.0.storage.write();
            let buf = storage.f32_mut();
            let mut k = 0;
            layout::for_each_row(self.shape(), [self.strides()], [self.offset()], |[start], len, [step]| {
                for j in 0..len {
                    buf[start + j * step] = values[k];
                    k += 1;
                }
            });
            return Ok(());
        }
        if self.shares_storage(src) {
            let c = src.to_contiguous();
            return c.with_f32(|s| self.update_f32("copy_", |d| d.copy_from_slice(s)));
        }
        src.with_f32(|s| self.update_f32("copy_", |d| d.copy_from_slice(s)))
    }

    // ----- autograd history -----

    /// A handle on the same storage with no autograd history.
    pub fn detach(&self) -> Tensor {
        Tensor::from_storage(self.0.storage.clone(), self.shape(), self.strides(), self.offset())
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor(shape={:?}, dtype={}", self.shape(), self.dtype())?;
        if let Some(n) = self.grad_fn_name() {
            write!(f, ", grad_fn={n}")?;
        } else if self.needs_grad() {
            write!(f, ", requires_grad")?;
        }
        if self.numel() <= 16 {
            write!(f, ", values={:?}", self.to_vec())?;
        }
        write!(f, ")")
    }
}
