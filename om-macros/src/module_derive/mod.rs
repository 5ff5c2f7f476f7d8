//! `#[derive(Module)]`: the `om_core::module::Module` impl of a struct, from its fields.
//! Built like `#[op]`: [`parse`] reads the struct and its `#[module(..)]` options into
//! [`ast`], [`validate`] checks each rule of the contract (errors gathered and spanned),
//! [`expand`] builds the impl. The contract is in the derive's documentation (`lib.rs`).

mod ast;
mod expand;
mod parse;
mod validate;

pub use expand::derive;
