//! Test support (compiled for tests only): [`oracle`], the PyTorch oracle data and the
//! scaled-error comparison the operator tests use.

pub mod oracle;
