//! The image operands of the spatial operators (convolutions, pooling, resizing): a batch
//! `[N, C, H, W]`, or one unbatched image `[C, H, W]` as PyTorch accepts it. The operators
//! run an unbatched image as a batch of one (the same values in the same order, no copy) and
//! give an unbatched result.

use om_core::layout::Dims;
use om_core::{Error, Result};

/// The dimensions of an image operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Images {
    /// Images (1 when unbatched).
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// Height.
    pub h: usize,
    /// Width.
    pub w: usize,
    /// Whether the operand has the batch dimension.
    pub batched: bool,
}

impl Images {
    /// Reads `x` of operator `op` as `[N, C, H, W]` or `[C, H, W]`; any other rank is a
    /// shape error (`shapes`: the operator's argument shapes, for the message).
    pub fn of(op: &'static str, x: &[usize], shapes: &[&[usize]]) -> Result<Images> {
        match *x {
            [n, c, h, w] => Ok(Images { n, c, h, w, batched: true }),
            [c, h, w] => Ok(Images { n: 1, c, h, w, batched: false }),
            _ => Err(Error::shape(
                op,
                shapes,
                format!("`x` must be [N, C, H, W] or unbatched [C, H, W] (rank 4 or 3), got rank {}", x.len()),
            )),
        }
    }

    /// The shape of a result with this batch (or its absence): `c` channels of `h × w`.
    pub fn shape(&self, c: usize, [h, w]: [usize; 2]) -> Dims {
        if self.batched {
            Dims::from([self.n, c, h, w])
        } else {
            Dims::from([c, h, w])
        }
    }
}
