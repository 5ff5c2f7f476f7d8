//! The one error type of the library. Every public operator returns [`Result`]; each
//! variant names the operator (filled in by the `#[op]` wrapper when the code that
//! raised it did not know it) and carries the offending shapes or values.

use crate::dtype::DType;

/// Result alias used throughout the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in an operator, the engine or the pool.
///
/// `Debug` prints the same text as `Display`, so `fn main() -> Result<()>` returning an
/// error through `?` prints `Error: matmul: ... (shapes [[2, 3], [4, 5]])`, not the
/// variant's fields.
#[derive(Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// Shapes that do not fit together.
    #[error("{op}: {msg} (shapes {shapes:?})")]
    Shape {
        /// Operator name.
        op: &'static str,
        /// The shapes involved, in argument order.
        shapes: Vec<Vec<usize>>,
        /// What is wrong.
        msg: String,
    },
    /// A tensor of the wrong element type.
    #[error("{op}: `{arg}` must be {expected}, got {got}")]
    DType {
        /// Operator name.
        op: &'static str,
        /// Which argument.
        arg: &'static str,
        /// What the operator accepts.
        expected: DType,
        /// What it was given.
        got: DType,
    },
    /// An axis outside `-rank..rank`.
    #[error("{op}: axis {axis} is out of range for a tensor of rank {rank}")]
    Axis {
        /// Operator name.
        op: &'static str,
        /// The axis as given.
        axis: isize,
        /// The rank of the tensor.
        rank: usize,
    },
    /// Any other invalid argument value.
    #[error("{op}: {msg}")]
    Argument {
        /// Operator name.
        op: &'static str,
        /// What is wrong, with the values.
        msg: String,
    },
    /// `backward` on a tensor that does not require gradients.
    #[error("{op}: the tensor does not require gradients (make a leaf with `.requires_grad()` and compute from it with grad mode on)")]
    NoGrad {
        /// `backward` or the operation attempted.
        op: &'static str,
    },
    /// A second backward pass through a record released by the first.
    #[error("backward: the graph was released by an earlier backward pass (the record of `{op}` is gone); pass `retain_graph = true` to the first pass to run backward twice")]
    GraphReleased {
        /// The first released record found.
        op: &'static str,
    },
    /// A buffer the pool could not or would not allocate (see [`crate::pool::max_buffer_bytes`]).
    #[error("{op}: can't allocate memory: you tried to allocate {bytes} bytes (the limit is {limit} bytes; see om_core::pool::set_max_buffer_bytes)")]
    OutOfMemory {
        /// Operator name.
        op: &'static str,
        /// The bytes requested.
        bytes: u64,
        /// The pool's limit at the time.
        limit: u64,
    },
    /// A saved tensor was modified in place between forward and backward.
    #[error(
        "backward: saved tensor `{slot}` of `{op}` was modified in place after the forward pass (version {saved} when saved, {now} now)"
    )]
    TensorVersion {
        /// The operator whose record holds the tensor.
        op: &'static str,
        /// The saved slot.
        slot: &'static str,
        /// Storage version when saved.
        saved: u64,
        /// Storage version now.
        now: u64,
    },
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl Error {
    /// A [`Error::Shape`] error.
    pub fn shape(op: &'static str, shapes: &[&[usize]], msg: impl Into<String>) -> Error {
        Error::Shape { op, shapes: shapes.iter().map(|s| s.to_vec()).collect(), msg: msg.into() }
    }

    /// An [`Error::Argument`] error.
    pub fn argument(op: &'static str, msg: impl Into<String>) -> Error {
        Error::Argument { op, msg: msg.into() }
    }

    /// The operator the error names (empty if none was known yet).
    pub fn op(&self) -> &'static str {
        match self {
            Error::Shape { op, .. }
            | Error::DType { op, .. }
            | Error::Axis { op, .. }
            | Error::Argument { op, .. }
            | Error::OutOfMemory { op, .. }
            | Error::NoGrad { op }
            | Error::GraphReleased { op }
            | Error::TensorVersion { op, .. } => op,
        }
    }

    /// Fills in the operator name if the code that raised the error left it empty.
    pub fn with_op(mut self, name: &'static str) -> Error {
        match &mut self {
            Error::Shape { op, .. }
            | Error::DType { op, .. }
            | Error::Axis { op, .. }
            | Error::Argument { op, .. }
            | Error::OutOfMemory { op, .. }
            | Error::NoGrad { op } => {
                if op.is_empty() {
                    *op = name;
                }
            }
            Error::GraphReleased { .. } | Error::TensorVersion { .. } => {}
        }
        self
    }
}

impl Error {
    /// Names `name` (the operator the user called) as the operator of the error. An
    /// error that names no operator yet gets `name`; one raised by an inner operator
    /// (a composition's step, a helper another operator calls) is renamed to `name` and
    /// keeps the inner operator as context: `cross_entropy: (in nll_loss) ...`. Backward
    /// errors (which name the record involved) are left as they are. What the `#[op]`
    /// wrappers apply to every error of their operator.
    ///
    /// # Examples
    /// ```
    /// use om_core::Error;
    /// let e = Error::argument("nll_loss", "target 7 is out of range").called_as("cross_entropy");
    /// assert_eq!(e.to_string(), "cross_entropy: (in nll_loss) target 7 is out of range");
    /// assert_eq!(e.op(), "cross_entropy");
    /// ```
    pub fn called_as(mut self, name: &'static str) -> Error {
        match &mut self {
            Error::Shape { op, msg, .. } | Error::Argument { op, msg } => {
                if !op.is_empty() && *op != name {
                    *msg = format!("(in {op}) {msg}");
                }
                *op = name;
            }
            Error::DType { op, .. } | Error::Axis { op, .. } | Error::OutOfMemory { op, .. } | Error::NoGrad { op } => *op = name,
            Error::GraphReleased { .. } | Error::TensorVersion { .. } => {}
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_prints_the_display_text() {
        let e = Error::shape("matmul", &[&[2, 3], &[4, 5]], "inner dimensions differ");
        assert_eq!(format!("{e:?}"), "matmul: inner dimensions differ (shapes [[2, 3], [4, 5]])");
        assert_eq!(format!("{e:?}"), e.to_string());
        let r: Result<()> = Err(Error::argument("nn::load", "w.safetensors has no tensor `fc.weight`"));
        assert_eq!(format!("{r:?}"), "Err(nn::load: w.safetensors has no tensor `fc.weight`)");
    }

    #[test]
    fn called_as_names_the_outer_operator_and_keeps_the_inner_one() {
        let e = Error::shape("nll_loss", &[&[2]], "bad").called_as("cross_entropy");
        assert_eq!(e.to_string(), "cross_entropy: (in nll_loss) bad (shapes [[2]])");
        let same = Error::argument("relu", "x").called_as("relu");
        assert_eq!(same.to_string(), "relu: x");
        let oom = Error::OutOfMemory { op: "", bytes: 8, limit: 4 }.called_as("max_dim");
        assert_eq!(oom.op(), "max_dim");
        let oom = Error::OutOfMemory { op: "argmax", bytes: 8, limit: 4 }.called_as("max_dim");
        assert!(oom.to_string().starts_with("max_dim: can't allocate memory"), "{oom}");
    }
}
