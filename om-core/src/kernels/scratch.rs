//! Scratch requested inside the chunks of a parallel kernel. A chunk cannot return an
//! error through [`for_each_chunk`](crate::kernels::parallel::for_each_chunk), so each one asks
//! [`Refusals::buffer`] for its scratch: a refused request (see
//! [`Buffer::try_new`]) is recorded, the chunk skips its work, and the kernel returns the
//! first refusal once every chunk has run ([`Refusals::finish`]). The output of a kernel
//! that fails is incomplete; its caller discards it with the error. One check per chunk,
//! never per element.

use crate::error::{Error, Result};
use crate::pool::Buffer;
use std::sync::OnceLock;

/// The first scratch request refused by any chunk of one kernel call.
#[derive(Default)]
pub struct Refusals(OnceLock<Error>);

impl Refusals {
    /// No refusal yet.
    pub fn new() -> Refusals {
        Refusals::default()
    }

    /// A pooled buffer of at least `bytes` bytes, or `None` (the refusal recorded) when
    /// the pool refuses it.
    pub fn buffer(&self, bytes: usize) -> Option<Buffer> {
        match Buffer::try_new(bytes) {
            Ok(b) => Some(b),
            Err(e) => {
                let _ = self.0.set(e); // a later refusal keeps the first
                None
            }
        }
    }

    /// `Ok` if no request was refused, else the first refusal.
    pub fn finish(self) -> Result<()> {
        self.0.into_inner().map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_refusal_is_returned_after_the_chunks() {
        let refusals = Refusals::new();
        assert!(refusals.buffer(64).is_some());
        assert!(refusals.buffer(usize::MAX).is_none());
        assert!(refusals.buffer(usize::MAX - 1).is_none());
        let e = refusals.finish().unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { bytes, .. } if bytes == usize::MAX as u64), "{e}");
        assert!(Refusals::new().finish().is_ok());
    }
}
