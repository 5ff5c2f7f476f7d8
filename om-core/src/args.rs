//! The argument types that let one call read as PyTorch's: [`Axes`] (which axes a reduction
//! reduces: one, several, or all) and [`Shape`] (a target shape with at most one `-1`, or a
//! shape read from another tensor). Operators take them as `impl Into<Axes>` /
//! `impl Into<Shape>`, so plain literals, arrays, slices and `None` convert on the call.
//!
//! ```
//! use om_core::{Axes, Shape};
//! assert_eq!(Axes::from(1).resolve("sum", 3)?, vec![1]);
//! assert_eq!(Axes::from([-1, 0]).resolve("sum", 3)?, vec![0, 2]);
//! assert_eq!(Axes::from(None).resolve("sum", 2)?, vec![0, 1]);
//! assert_eq!(Shape::from([2, -1]).resolve("reshape", 6)?.to_vec(), vec![2, 3]);
//! assert_eq!(Shape::from(&[2usize, 3][..]).as_slice(), &[2, 3]);
//! # Ok::<(), om_core::Error>(())
//! ```

use crate::error::{Error, Result};
use crate::layout::{normalize_axis, Dims, SignedDims};

/// Which axes a reduction reduces: one axis (`1`, `-1`), several (`[0, 2]`, `&[..]`,
/// `vec![..]`), or every axis (`None`). Negative axes count from the end, as in PyTorch.
/// An empty list reduces every axis (PyTorch's `dim=[]`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Axes(Option<SignedDims>);

impl Axes {
    /// Every axis.
    pub fn all() -> Axes {
        Axes(None)
    }

    /// Whether every axis is reduced (`None` or an empty list).
    pub fn is_all(&self) -> bool {
        self.0.as_ref().is_none_or(|a| a.is_empty())
    }

    /// The axes as given (`None` for every axis), before normalisation.
    pub fn as_given(&self) -> Option<&[isize]> {
        self.0.as_deref()
    }

    /// The reduced axes of a rank-`rank` tensor, normalised (negative axes counted from
    /// the end) and sorted; an error naming `op` for an axis out of range or one given twice.
    pub fn resolve(&self, op: &'static str, rank: usize) -> Result<Vec<usize>> {
        if self.is_all() {
            return Ok((0..rank).collect());
        }
        let mut out = Vec::with_capacity(self.0.as_ref().map_or(0, |a| a.len()));
        self.resolve_into(op, rank, |a| out.push(a))?;
        out.sort_unstable();
        Ok(out)
    }

    /// As [`resolve`](Self::resolve) into a mask of `rank` flags (no heap allocation up to
    /// the inline rank): `true` for a reduced axis.
    pub fn mask(&self, op: &'static str, rank: usize) -> Result<crate::inline_vec::InlineVec<bool, { crate::layout::INLINE_RANK }>> {
        let mut mask = crate::inline_vec::InlineVec::from_elem(!self.is_all() && rank > 0, rank);
        if self.is_all() {
            mask.iter_mut().for_each(|m| *m = true);
            return Ok(mask);
        }
        mask.iter_mut().for_each(|m| *m = false);
        self.resolve_into(op, rank, |a| mask[a] = true)?;
        Ok(mask)
    }

    fn resolve_into(&self, op: &'static str, rank: usize, mut each: impl FnMut(usize)) -> Result<()> {
        let given = self.0.as_deref().unwrap_or(&[]);
        let mut seen = crate::inline_vec::InlineVec::<bool, { crate::layout::INLINE_RANK }>::from_elem(false, rank);
        for &a in given {
            let n = normalize_axis(op, a, rank, false)?;
            if seen[n] {
                return Err(Error::argument(op, format!("axis {a} appears more than once in {given:?}")));
            }
            seen[n] = true;
            each(n);
        }
        Ok(())
    }
}

impl From<Option<isize>> for Axes {
    fn from(a: Option<isize>) -> Axes {
        Axes(a.map(|a| SignedDims::from_slice(&[a])))
    }
}

macro_rules! axes_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Axes {
            fn from(a: $t) -> Axes {
                Axes(Some(SignedDims::from_slice(&[a.signed()])))
            }
        }
        impl<const N: usize> From<[$t; N]> for Axes {
            fn from(a: [$t; N]) -> Axes {
                Axes(Some(a.iter().map(|&v| v.signed()).collect()))
            }
        }
        impl<const N: usize> From<&[$t; N]> for Axes {
            fn from(a: &[$t; N]) -> Axes {
                Axes(Some(a.iter().map(|&v| v.signed()).collect()))
            }
        }
        impl From<&[$t]> for Axes {
            fn from(a: &[$t]) -> Axes {
                Axes(Some(a.iter().map(|&v| v.signed()).collect()))
            }
        }
        impl From<Vec<$t>> for Axes {
            fn from(a: Vec<$t>) -> Axes {
                Axes(Some(a.iter().map(|&v| v.signed()).collect()))
            }
        }
        impl From<&Vec<$t>> for Axes {
            fn from(a: &Vec<$t>) -> Axes {
                Axes(Some(a.iter().map(|&v| v.signed()).collect()))
            }
        }
    )*};
}
// `i32` so that plain literals (`1`, `[2, 3]`) convert; `usize` for axes computed from
// shapes.
axes_from_int!(i32, isize, usize);

impl From<SignedDims> for Axes {
    fn from(a: SignedDims) -> Axes {
        Axes(Some(a))
    }
}

impl From<&SignedDims> for Axes {
    fn from(a: &SignedDims) -> Axes {
        Axes(Some(a.clone()))
    }
}

/// An integer read as a signed size or axis; a `usize` beyond `isize::MAX` saturates
/// (and is then refused as out of range), never wrapping to a negative axis or to `-1`.
trait Signed: Copy {
    fn signed(self) -> isize;
}

impl Signed for i32 {
    fn signed(self) -> isize {
        self as isize
    }
}

impl Signed for isize {
    fn signed(self) -> isize {
        self
    }
}

impl Signed for usize {
    fn signed(self) -> isize {
        isize::try_from(self).unwrap_or(isize::MAX)
    }
}

/// A target shape: sizes with at most one `-1` (inferred from the element count), written
/// as an array (`[8, -1]`), a slice or vector of `isize`/`i32`, or a shape read from
/// another tensor (`x.shape()`, a `&[usize]`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shape(SignedDims);

impl Shape {
    /// The sizes as given (`-1` where one is to be inferred).
    pub fn as_slice(&self) -> &[isize] {
        &self.0
    }

    /// The sizes for `numel` elements: the one `-1` inferred; an error naming `op` for two
    /// `-1`s, another negative size, or sizes whose product is not `numel`.
    pub fn resolve(&self, op: &'static str, numel: usize) -> Result<Dims> {
        let given = &self.0[..];
        let mut infer = None;
        let mut known: usize = 1;
        for (i, &s) in given.iter().enumerate() {
            if s == -1 {
                if infer.replace(i).is_some() {
                    return Err(Error::argument(op, format!("only one size may be -1, got {given:?}")));
                }
            } else if s < 0 {
                return Err(Error::argument(op, format!("invalid size {s} in {given:?}: sizes are non-negative or one -1")));
            } else {
                known = known.checked_mul(s as usize).ok_or_else(|| Error::argument(op, format!("the sizes {given:?} overflow usize")))?;
            }
        }
        let mut out: Dims = given.iter().map(|&s| s.max(0) as usize).collect();
        match infer {
            Some(i) if known != 0 && numel.is_multiple_of(known) => out[i] = numel / known,
            None if known == numel => {}
            _ => return Err(Error::shape(op, &[], format!("shape {given:?} is invalid for input of size {numel}"))),
        }
        Ok(out)
    }
}

impl std::ops::Deref for Shape {
    type Target = [isize];
    fn deref(&self) -> &[isize] {
        &self.0
    }
}

macro_rules! shape_from_int {
    ($($t:ty),*) => {$(
        impl<const N: usize> From<[$t; N]> for Shape {
            fn from(a: [$t; N]) -> Shape {
                Shape(a.iter().map(|&v| v.signed()).collect())
            }
        }
        impl<const N: usize> From<&[$t; N]> for Shape {
            fn from(a: &[$t; N]) -> Shape {
                Shape(a.iter().map(|&v| v.signed()).collect())
            }
        }
        impl From<&[$t]> for Shape {
            fn from(a: &[$t]) -> Shape {
                Shape(a.iter().map(|&v| v.signed()).collect())
            }
        }
        impl From<Vec<$t>> for Shape {
            fn from(a: Vec<$t>) -> Shape {
                Shape(a.iter().map(|&v| v.signed()).collect())
            }
        }
        impl From<&Vec<$t>> for Shape {
            fn from(a: &Vec<$t>) -> Shape {
                Shape(a.iter().map(|&v| v.signed()).collect())
            }
        }
    )*};
}
shape_from_int!(i32, isize, usize);

impl From<&Dims> for Shape {
    fn from(a: &Dims) -> Shape {
        Shape(a.iter().map(|&v| v.signed()).collect())
    }
}

impl From<SignedDims> for Shape {
    fn from(a: SignedDims) -> Shape {
        Shape(a)
    }
}

impl From<&SignedDims> for Shape {
    fn from(a: &SignedDims) -> Shape {
        Shape(a.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_normalise_sort_and_refuse_repeats() {
        assert_eq!(Axes::from([2, 0]).resolve("t", 3).unwrap(), vec![0, 2]);
        assert_eq!(Axes::from(-1).resolve("t", 3).unwrap(), vec![2]);
        assert_eq!(Axes::from(Vec::<isize>::new()).resolve("t", 2).unwrap(), vec![0, 1]);
        assert!(Axes::from([1, -2]).resolve("t", 3).is_err());
        assert!(Axes::from(3).resolve("t", 3).is_err());
        assert!(Axes::from(usize::MAX).resolve("t", 3).is_err());
        assert_eq!(&Axes::from([0, 2]).mask("t", 3).unwrap()[..], &[true, false, true]);
        assert_eq!(&Axes::all().mask("t", 2).unwrap()[..], &[true, true]);
    }

    #[test]
    fn shapes_infer_one_size() {
        assert_eq!(&Shape::from([2, -1, 3]).resolve("t", 12).unwrap()[..], &[2, 2, 3]);
        assert_eq!(&Shape::from([0, -1]).resolve("t", 0).is_err(), &true);
        assert!(Shape::from([-1, -1]).resolve("t", 4).is_err());
        assert!(Shape::from([5]).resolve("t", 4).is_err());
        assert!(Shape::from([-2, 2]).resolve("t", 4).is_err());
        assert_eq!(&Shape::from(&[usize::MAX][..]).resolve("t", 4).is_err(), &true);
    }
}
