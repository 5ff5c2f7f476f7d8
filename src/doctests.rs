//! The user documents under `docs/` whose examples `cargo test` compiles and runs (the
//! README and the guide are included from `lib.rs`).

/// `docs/optim.md`: optimizers, schedulers, clipping and state files.
#[doc = include_str!("../docs/optim.md")]
#[cfg(doctest)]
pub struct OptimDoctests;

/// `docs/memory.md`: the pool, activation scopes and heap counting.
#[doc = include_str!("../docs/memory.md")]
#[cfg(doctest)]
pub struct MemoryDoctests;

/// `docs/adding-an-op.md`: a custom operator through `#[onemodel::op]`, `op_support` and
/// `gradcheck::check_op`.
#[doc = include_str!("../docs/adding-an-op.md")]
#[cfg(doctest)]
pub struct AddingAnOpDoctests;
