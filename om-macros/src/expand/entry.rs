//! The registry entry: what `om ops`, `docs/ops.md` and `om gradcheck` read — the name,
//! kind, saved slots, call signature, backward summary and cases.

use crate::ast::{Checked, Kind, Slot, SlotSource};
use crate::signature;
use proc_macro2::TokenStream;
use quote::quote;
use syn::Attribute;

/// The `inventory` submission of the operator's `OpEntry` (placed in its module).
pub fn tokens(op: &Checked) -> TokenStream {
    let name = &op.name;
    let core = &op.core;
    let summary = backward_summary(&op.module.attrs);
    let (kind, saved, output) = match &op.kind {
        Kind::Primitive { saved, .. } => (quote!(Primitive), saved_list(saved), None),
        Kind::Composition => (quote!(Composition), Vec::new(), Some(&op.forward.sig.output)),
    };
    let call = signature::call(name, &op.forward.sig, output);
    let method = super::method::applies(&op.forward.sig);
    quote! {
        const _: () = {
            #core::inventory::submit! {
                #core::OpEntry {
                    name: #name,
                    kind: #core::OpKind::#kind,
                    saved: &[#(#saved),*],
                    signature: #call,
                    summary: #summary,
                    method: #method,
                    cases,
                }
            }
        };
    }
}

/// The saved slots as declared: `x`, `a if b`, `out`, `mean (owned)`.
pub fn saved_list(saved: &[Slot]) -> Vec<String> {
    saved
        .iter()
        .map(|s| match (&s.cond, s.source) {
            (Some((_, c)), _) => format!("{} if {c}", s.name),
            (None, SlotSource::Owned) => format!("{} (owned)", s.name),
            (None, _) => s.name.to_string(),
        })
        .collect()
}

/// The backward rule as the operator's documentation states it: the rest of the first doc
/// paragraph with the word `Backward`, after it (`Backward: g·b`, `Backward, as PyTorch:
/// ..`, `Backward through time ..`); empty when the documentation has none.
pub fn backward_summary(attrs: &[Attribute]) -> String {
    let mut paragraphs: Vec<Vec<String>> = vec![Vec::new()];
    for line in doc_lines(attrs) {
        let line = line.trim();
        match paragraphs.last_mut() {
            Some(p) if !line.is_empty() => p.push(line.to_string()),
            _ => paragraphs.push(Vec::new()),
        }
    }
    paragraphs
        .iter()
        .map(|p| p.join(" "))
        .find_map(|p| {
            let at = p.match_indices("Backward").map(|(i, _)| i).find(|&i| i == 0 || p[..i].ends_with(' '))?;
            Some(p[at + "Backward".len()..].trim_start_matches([':', ',', ' ']).trim_end().to_string())
        })
        .unwrap_or_default()
}

/// The lines of the `///` documentation (each `#[doc = ".."]` may hold several).
fn doc_lines(attrs: &[Attribute]) -> Vec<String> {
    let mut lines = Vec::new();
    for a in attrs {
        if let syn::Meta::NameValue(nv) = &a.meta {
            if nv.path.is_ident("doc") {
                if let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) = &nv.value {
                    // `split`, not `lines`: a blank `///` line is `""`, which must stay a line.
                    lines.extend(s.value().split('\n').map(str::to_string));
                }
            }
        }
    }
    lines
}
