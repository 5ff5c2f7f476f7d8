//! [`InlineVec`]: a short list kept inside its owner up to a fixed capacity and on the heap
//! beyond it. Shapes and strides ([`Dims`](crate::layout::Dims)) and a graph node's input
//! edges use it, so that creating a tensor or recording an operator does not allocate a
//! vector for them (tensors up to rank [`INLINE_RANK`](crate::layout::INLINE_RANK), nodes
//! with a few inputs). Larger lists behave the same, stored in a `Vec`.

use std::fmt;
use std::ops::{Deref, DerefMut};

/// Up to `N` items inline, more on the heap. Dereferences to a slice.
#[derive(Clone)]
pub struct InlineVec<T, const N: usize>(Repr<T, N>);

#[derive(Clone)]
enum Repr<T, const N: usize> {
    /// The first `len` items are the list; the rest are `T::default()` placeholders.
    Inline {
        len: usize,
        items: [T; N],
    },
    Heap(Vec<T>),
}

impl<T: Default, const N: usize> InlineVec<T, N> {
    /// An empty list.
    pub fn new() -> Self {
        InlineVec(Repr::Inline { len: 0, items: std::array::from_fn(|_| T::default()) })
    }

    /// Appends `v`, moving the list to the heap when the inline capacity is full.
    pub fn push(&mut self, v: T) {
        match &mut self.0 {
            Repr::Inline { len, items } if *len < N => {
                items[*len] = v;
                *len += 1;
            }
            Repr::Inline { len, items } => {
                let mut heap: Vec<T> = items[..*len].iter_mut().map(std::mem::take).collect();
                heap.push(v);
                self.0 = Repr::Heap(heap);
            }
            Repr::Heap(h) => h.push(v),
        }
    }

    /// Inserts `v` at `index`, shifting the later items right.
    ///
    /// # Panics
    /// If `index > len`, as [`Vec::insert`].
    pub fn insert(&mut self, index: usize, v: T) {
        assert!(index <= self.len(), "insertion index {index} is past the length {}", self.len());
        self.push(v);
        self[index..].rotate_right(1);
    }

    /// Removes and returns the item at `index`, shifting the later items left.
    ///
    /// # Panics
    /// If `index >= len`, as [`Vec::remove`].
    pub fn remove(&mut self, index: usize) -> T {
        match &mut self.0 {
            Repr::Inline { len, items } => {
                assert!(index < *len, "removal index {index} is past the length {len}");
                items[index..*len].rotate_left(1);
                *len -= 1;
                std::mem::take(&mut items[*len])
            }
            Repr::Heap(h) => h.remove(index),
        }
    }
}

impl<T: Default, const N: usize> Extend<T> for InlineVec<T, N> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for x in iter {
            self.push(x);
        }
    }
}

impl<T: Default + Clone, const N: usize> InlineVec<T, N> {
    /// `len` copies of `v`.
    pub fn from_elem(v: T, len: usize) -> Self {
        if len <= N {
            InlineVec(Repr::Inline { len, items: std::array::from_fn(|i| if i < len { v.clone() } else { T::default() }) })
        } else {
            InlineVec(Repr::Heap(vec![v; len]))
        }
    }

    /// A copy of `items`.
    pub fn from_slice(items: &[T]) -> Self {
        if items.len() <= N {
            let len = items.len();
            InlineVec(Repr::Inline { len, items: std::array::from_fn(|i| if i < len { items[i].clone() } else { T::default() }) })
        } else {
            InlineVec(Repr::Heap(items.to_vec()))
        }
    }
}

impl<T: Default, const N: usize> Default for InlineVec<T, N> {
    fn default() -> Self {
        InlineVec::new()
    }
}

impl<T, const N: usize> InlineVec<T, N> {
    /// The items as a slice (as [`Vec::as_slice`]).
    pub fn as_slice(&self) -> &[T] {
        self
    }
}

impl<T, const N: usize> Deref for InlineVec<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.0 {
            Repr::Inline { len, items } => &items[..*len],
            Repr::Heap(h) => h,
        }
    }
}

impl<T, const N: usize> DerefMut for InlineVec<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.0 {
            Repr::Inline { len, items } => &mut items[..*len],
            Repr::Heap(h) => h,
        }
    }
}

impl<T, const N: usize> AsRef<[T]> for InlineVec<T, N> {
    fn as_ref(&self) -> &[T] {
        self
    }
}

impl<T, const N: usize> std::borrow::Borrow<[T]> for InlineVec<T, N> {
    fn borrow(&self) -> &[T] {
        self
    }
}

impl<T: Default, const N: usize> FromIterator<T> for InlineVec<T, N> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let iter = iter.into_iter();
        if iter.size_hint().0 > N {
            return InlineVec(Repr::Heap(iter.collect())); // one allocation of the known size
        }
        let mut v = InlineVec::new();
        v.extend(iter);
        v
    }
}

impl<T: Default, const N: usize> From<Vec<T>> for InlineVec<T, N> {
    fn from(v: Vec<T>) -> Self {
        if v.len() <= N {
            v.into_iter().collect()
        } else {
            InlineVec(Repr::Heap(v))
        }
    }
}

impl<T: Default + Clone, const N: usize> From<&[T]> for InlineVec<T, N> {
    fn from(v: &[T]) -> Self {
        InlineVec::from_slice(v)
    }
}

impl<T: Default + Clone, const N: usize> From<&Vec<T>> for InlineVec<T, N> {
    fn from(v: &Vec<T>) -> Self {
        InlineVec::from_slice(v)
    }
}

impl<T: Default + Clone, const N: usize, const M: usize> From<[T; M]> for InlineVec<T, N> {
    fn from(v: [T; M]) -> Self {
        v.into_iter().collect()
    }
}

impl<T: Default + Clone, const N: usize, const M: usize> From<&[T; M]> for InlineVec<T, N> {
    fn from(v: &[T; M]) -> Self {
        InlineVec::from_slice(v)
    }
}

impl<T: Clone, const N: usize> From<InlineVec<T, N>> for Vec<T> {
    fn from(v: InlineVec<T, N>) -> Vec<T> {
        match v.0 {
            Repr::Inline { len, items } => items[..len].to_vec(),
            Repr::Heap(h) => h,
        }
    }
}

impl<'a, T, const N: usize> IntoIterator for &'a InlineVec<T, N> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: fmt::Debug, const N: usize> fmt::Debug for InlineVec<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: PartialEq, const N: usize> PartialEq for InlineVec<T, N> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Eq, const N: usize> Eq for InlineVec<T, N> {}

impl<T: PartialEq, const N: usize> PartialEq<[T]> for InlineVec<T, N> {
    fn eq(&self, other: &[T]) -> bool {
        **self == *other
    }
}

impl<T: PartialEq, const N: usize> PartialEq<&[T]> for InlineVec<T, N> {
    fn eq(&self, other: &&[T]) -> bool {
        **self == **other
    }
}

impl<T: PartialEq, const N: usize> PartialEq<Vec<T>> for InlineVec<T, N> {
    fn eq(&self, other: &Vec<T>) -> bool {
        **self == **other
    }
}

impl<T: PartialEq, const N: usize, const M: usize> PartialEq<[T; M]> for InlineVec<T, N> {
    fn eq(&self, other: &[T; M]) -> bool {
        **self == other[..]
    }
}

impl<T: PartialEq, const N: usize> PartialEq<InlineVec<T, N>> for Vec<T> {
    fn eq(&self, other: &InlineVec<T, N>) -> bool {
        **self == **other
    }
}

impl<T: PartialEq, const N: usize> PartialEq<InlineVec<T, N>> for [T] {
    fn eq(&self, other: &InlineVec<T, N>) -> bool {
        *self == **other
    }
}

impl<T: PartialEq, const N: usize> PartialEq<InlineVec<T, N>> for &[T] {
    fn eq(&self, other: &InlineVec<T, N>) -> bool {
        **self == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_past_the_inline_capacity_move_to_the_heap_unchanged() {
        let mut v: InlineVec<usize, 2> = InlineVec::new();
        for i in 0..5 {
            v.push(i);
            assert_eq!(&v[..], &(0..=i).collect::<Vec<_>>()[..]);
        }
        assert_eq!(v, vec![0, 1, 2, 3, 4]);
        v.insert(1, 9);
        assert_eq!(v.remove(0), 0);
        assert_eq!(v, [9, 1, 2, 3, 4]);
        let mut w: InlineVec<usize, 4> = [1, 2, 3].into();
        w.insert(3, 4);
        w.insert(0, 0);
        assert_eq!((w.remove(2), &w[..]), (2, &[0, 1, 3, 4][..]));
        w.extend([5, 6]);
        assert_eq!(w, [0, 1, 3, 4, 5, 6]);
        assert_eq!(InlineVec::<usize, 2>::from(vec![7, 8, 9]), InlineVec::<usize, 2>::from_slice(&[7, 8, 9]));
        assert_eq!(InlineVec::<usize, 4>::from_elem(3, 6), [3; 6]);
        assert_eq!(Vec::from(InlineVec::<usize, 4>::from([1, 2])), vec![1, 2]);
    }

    #[test]
    fn lists_that_fit_inline_allocate_nothing() {
        let v: InlineVec<Vec<u8>, 3> = [vec![1], vec![], vec![2, 3]].into_iter().collect();
        assert!(matches!(v.0, Repr::Inline { len: 3, .. }));
        assert_eq!(format!("{v:?}"), "[[1], [], [2, 3]]");
    }
}
