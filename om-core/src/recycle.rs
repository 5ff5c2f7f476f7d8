//! [`Recycler`]: the one per-thread free list of emptied `Arc` allocations, used for the
//! three kinds of small shared allocations a step makes per operator — tensor handles
//! (`tensor.rs`), storages (`storage.rs`) and graph nodes (`autograd/node.rs`) — so that a
//! warm step allocates none of them.
//!
//! The pattern, the same for all three: when the last handle of an allocation goes, what the
//! value holds (a buffer, a storage handle, saved tensors) is dropped now, exactly when it
//! would have been, the handle's slot is left holding a placeholder of the same type, and
//! the emptied allocation is kept ([`take_last`], then [`Recycler::keep`]); the next value
//! of that type built on the thread moves into it ([`Recycler::arc`]). Graph nodes, one
//! list per record type, use a recycler's [`spare`](Recycler::spare) and
//! [`push`](Recycler::push) directly.

use std::cell::RefCell;
use std::sync::Arc;
use std::thread::LocalKey;

/// Emptied allocations kept per thread and type (at most this many): more than the handles
/// a step of the benchmark models lets go at once, and a bound on what a thread holds.
const KEPT_MAX: usize = 4096;

/// A thread's emptied allocations of `Arc<T>`, each with no other handle (strong or weak).
/// Lives in a `thread_local!`; nothing is taken or kept while the list is borrowed.
pub(crate) struct Recycler<T> {
    free: RefCell<Vec<Arc<T>>>,
}

impl<T> Recycler<T> {
    /// An empty free list.
    pub(crate) const fn new() -> Recycler<T> {
        Recycler { free: RefCell::new(Vec::new()) }
    }

    /// `value` in a shared allocation: one kept in the calling thread's `list` when there
    /// is one, else a new one.
    pub(crate) fn arc(list: &'static LocalKey<Recycler<T>>, value: T) -> Arc<T> {
        reuse(list.try_with(Recycler::spare).ok().flatten(), value)
    }

    /// Keeps an emptied allocation (from [`take_last`]) in the calling thread's `list`, if
    /// there is room; otherwise it is freed.
    pub(crate) fn keep(list: &'static LocalKey<Recycler<T>>, emptied: Arc<T>) {
        let _ = list.try_with(|r| r.push(emptied));
    }

    /// A kept allocation, if any.
    pub(crate) fn spare(&self) -> Option<Arc<T>> {
        self.free.try_borrow_mut().ok().and_then(|mut f| f.pop())
    }

    /// Keeps `emptied` if there is room.
    pub(crate) fn push(&self, emptied: Arc<T>) {
        if let Ok(mut f) = self.free.try_borrow_mut() {
            if f.len() < KEPT_MAX {
                f.push(emptied);
            }
        }
    }
}

/// `value` in `spare`'s allocation (from [`Recycler::spare`]) when it has no other handle,
/// else in a new one.
pub(crate) fn reuse<T>(spare: Option<Arc<T>>, value: T) -> Arc<T> {
    match spare {
        Some(mut a) => match Arc::get_mut(&mut a) {
            Some(slot) => {
                *slot = value;
                a
            }
            None => Arc::new(value),
        },
        None => Arc::new(value),
    }
}

/// Takes the allocation of `slot` when `slot` is its only handle (no other strong or weak
/// reference): `empty` drops what the value holds first, then `slot` is left holding
/// `placeholder()` and the emptied allocation is returned, for [`Recycler::keep`]. `None`,
/// with `slot` untouched, when other handles exist or no placeholder can be had (the
/// thread is being torn down).
pub(crate) fn take_last<T: ?Sized>(
    slot: &mut Arc<T>,
    placeholder: impl FnOnce() -> Option<Arc<T>>,
    empty: impl FnOnce(&mut T),
) -> Option<Arc<T>> {
    if Arc::strong_count(slot) != 1 || Arc::weak_count(slot) != 0 {
        return None;
    }
    let placeholder = placeholder()?;
    empty(Arc::get_mut(slot)?);
    Some(std::mem::replace(slot, placeholder))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emptied_allocation_is_reused_and_a_shared_one_is_not_taken() {
        thread_local! {
            static LIST: Recycler<Vec<i32>> = const { Recycler::new() };
        }
        let mut a = Recycler::arc(&LIST, vec![1, 2, 3]);
        let first = Arc::as_ptr(&a);
        let other = a.clone();
        assert!(take_last(&mut a, || Some(Arc::new(Vec::new())), Vec::clear).is_none(), "two handles");
        drop(other);
        let weak = Arc::downgrade(&a);
        assert!(take_last(&mut a, || Some(Arc::new(Vec::new())), Vec::clear).is_none(), "a weak handle");
        drop(weak);
        let emptied = take_last(&mut a, || Some(Arc::new(Vec::new())), Vec::clear).expect("the only handle");
        assert!(emptied.is_empty() && a.is_empty(), "the value was emptied and the slot holds the placeholder");
        Recycler::keep(&LIST, emptied);
        let b = Recycler::arc(&LIST, vec![4]);
        assert_eq!((Arc::as_ptr(&b), b.as_slice()), (first, &[4][..]), "the kept allocation holds the new value");
    }
}
