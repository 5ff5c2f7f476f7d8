//! The parsed form of an `#[op]` declaration. Nodes keep their syn tokens so every error
//! can point at the offending span.

use proc_macro2::Span;
use syn::{Ident, ItemFn, ItemMod, Type};

/// The arguments of `#[op(...)]`.
pub struct OpArgs {
    /// `saved = [..]`, with the span of the key.
    pub saved: Vec<SavedItem>,
    /// `attrs = [..]`.
    pub attrs: Vec<AttrItem>,
    /// `composition`, with its span.
    pub composition: Option<Span>,
}

/// One saved slot: `x`, `x if y`, `out`, or `name: owned`.
pub struct SavedItem {
    pub name: Ident,
    pub cond: Option<Ident>,
    pub owned: bool,
}

/// One attribute: `name: Type`.
pub struct AttrItem {
    pub name: Ident,
    pub ty: Type,
}

/// The element type `T` of a slice attribute `&[T]` (taken by reference, stored in the
/// record as an `om_core::inline_vec::InlineVec<T, INLINE_RANK>`, inline for short lists
/// such as shapes and axes), or `None` for an attribute stored as it is given.
pub fn slice_attr_elem(ty: &Type) -> Option<&Type> {
    match ty {
        Type::Reference(r) if r.mutability.is_none() => match &*r.elem {
            Type::Slice(s) => Some(&s.elem),
            _ => None,
        },
        _ => None,
    }
}

/// How a forward parameter takes a tensor.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// `&Tensor`
    Required,
    /// `Option<&Tensor>`
    Optional,
    /// `&[Tensor]`: any number of inputs (the last tensor parameter).
    Many,
}

/// A tensor input of `forward`.
pub struct Input {
    pub name: Ident,
    pub kind: InputKind,
}

/// A non-tensor parameter of `forward` (an attribute).
pub struct Param {
    pub name: Ident,
    pub ty: Type,
}

/// The whole declaration.
pub struct Op {
    pub args: OpArgs,
    pub module: ItemMod,
    pub forward: Option<ItemFn>,
    pub backward: Option<ItemFn>,
    pub cases: Option<ItemFn>,
    pub inputs: Vec<Input>,
    pub params: Vec<Param>,
}
