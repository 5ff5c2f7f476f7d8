//! Expansion: builds the tokens of the wrapper, the record, the dispatch and the registry
//! entry. Decides nothing; `validate` has checked everything it relies on. On errors the
//! user's module is still emitted, beside the `compile_error!`s, so call sites do not
//! cascade into further errors.

use crate::ast::{slice_attr_elem, InputKind, Op};
use crate::{parse, validate};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, ToTokens};
use syn::{Attribute, ItemMod, Type};

/// Inputs of a variadic operator kept inline in its call and record (as many as a graph
/// node keeps inline edges); more spill to the heap.
const VARIADIC_INLINE: usize = 8;

/// Entry point of `#[op]`.
pub fn op(args: TokenStream, item: TokenStream) -> TokenStream {
    let module: ItemMod = match syn::parse2(item.clone()) {
        Ok(m) => m,
        Err(_) => {
            let e = syn::Error::new_spanned(
                &item,
                "#[op] goes on an inline module: `mod name { fn forward(..) .. fn backward(..) .. fn cases() .. }`",
            )
            .to_compile_error();
            return quote! { #item #e };
        }
    };
    let mut errors = Vec::new();
    let args = match parse::args(args, &mut errors) {
        Ok(a) => a,
        Err(e) => return fallback(&module, None, vec![e]),
    };
    let op = parse::op(args, module.clone(), &mut errors);
    validate::all(&op, &mut errors);
    if !errors.is_empty() {
        return fallback(&module, op.forward.as_ref(), errors);
    }
    generate(&op)
}

/// What is emitted when the declaration has errors: the user's module without `backward`
/// (which names the generated `Record`/`Grads`), placeholder types, and a wrapper with the
/// forward's signature, so that only the `compile_error!`s are reported.
fn fallback(module: &ItemMod, forward: Option<&syn::ItemFn>, errors: Vec<syn::Error>) -> TokenStream {
    let errs = errors.iter().map(syn::Error::to_compile_error);
    let mut module = module.clone();
    if let Some((_, items)) = &mut module.content {
        items.retain(|i| !matches!(i, syn::Item::Fn(f) if f.sig.ident == "backward"));
        items.push(syn::parse_quote! {
            /// Placeholder while the declaration has errors.
            pub struct Record;
        });
        items.push(syn::parse_quote! {
            /// Placeholder while the declaration has errors.
            pub struct Grads;
        });
    }
    let ident = &module.ident;
    let vis = &module.vis;
    let wrapper = forward.map(|f| {
        let args = &f.sig.inputs;
        quote! {
            #[allow(unused_variables)]
            #vis fn #ident(#args) -> ::om_core::Result<::om_core::Tensor> {
                ::core::unreachable!("#[op] declaration has errors")
            }
        }
    });
    quote! { #module #wrapper #(#errs)* }
}

fn docs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs.iter().filter(|a| a.path().is_ident("doc")).collect()
}

/// The names the wrapper passes on to `forward`: its parameters, in order.
fn call_args(forward: &syn::ItemFn) -> Vec<TokenStream> {
    forward
        .sig
        .inputs
        .iter()
        .filter_map(|a| match a {
            syn::FnArg::Typed(pt) => Some(pt.pat.to_token_stream()),
            _ => None,
        })
        .collect()
}

/// The tensor inputs' names, as registered.
fn input_names(op: &Op) -> Vec<String> {
    op.inputs.iter().map(|i| i.name.to_string()).collect()
}

/// The module's attributes other than its documentation.
fn non_doc_attrs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs.iter().filter(|a| !a.path().is_ident("doc")).collect()
}

fn summary(attrs: &[Attribute]) -> String {
    for a in attrs {
        if let syn::Meta::NameValue(nv) = &a.meta {
            if nv.path.is_ident("doc") {
                if let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) = &nv.value {
                    let t = s.value().trim().to_string();
                    if !t.is_empty() {
                        return t;
                    }
                }
            }
        }
    }
    String::new()
}

fn generate(op: &Op) -> TokenStream {
    let module = &op.module;
    let mod_ident = &module.ident;
    let name = mod_ident.to_string();
    let vis = &module.vis;
    let mod_attrs = &module.attrs;
    let doc_attrs = docs(mod_attrs);
    let summary = summary(mod_attrs);
    let (_, items) = module.content.as_ref().expect("validated: inline module");
    let forward = op.forward.as_ref().expect("validated: forward exists");
    let generics = &forward.sig.generics;

    let input_strs = input_names(op);
    let fwd_args = &forward.sig.inputs;
    let call_args = call_args(forward);
    let attr_strs: Vec<String> =
        op.args.attrs.iter().map(|a| format!("{}: {}", a.name, a.ty.to_token_stream().to_string().replace(' ', ""))).collect();
    let saved_strs: Vec<String> = op
        .args
        .saved
        .iter()
        .map(|s| match (&s.cond, s.owned) {
            (Some(c), _) => format!("{} if {}", s.name, c),
            (None, true) => format!("{} (owned)", s.name),
            (None, false) => s.name.to_string(),
        })
        .collect();
    // Pushes every tensor input (a variadic one element by element) into `__inputs`, and
    // its name into `__names` (variadic operators only; fixed-arity ones build arrays).
    let push_inputs: Vec<TokenStream> = op
        .inputs
        .iter()
        .map(|i| {
            let n = &i.name;
            let s = n.to_string();
            match i.kind {
                InputKind::Required => quote! { __inputs.push(::core::option::Option::Some(#n)); __names.push(#s); },
                InputKind::Optional => quote! { __inputs.push(#n); __names.push(#s); },
                InputKind::Many => quote! { for t in #n.iter() { __inputs.push(::core::option::Option::Some(t)); __names.push(#s); } },
            }
        })
        .collect();

    if op.args.composition.is_some() {
        return composition(op);
    }

    let input_index = |n: &syn::Ident| op.inputs.iter().position(|i| &i.name == n);
    let needs_expr = |n: &syn::Ident| {
        let idx = input_index(n).expect("validated: condition names an input");
        quote!(__needs[#idx])
    };

    // Record fields and their initialisers.
    let mut fields = Vec::new();
    let mut inits = Vec::new();
    let mut accessors = Vec::new();
    let mut checks = Vec::new();
    let mut owned_fields = Vec::new();
    for s in &op.args.saved {
        let f = &s.name;
        let fs = f.to_string();
        let optional_input = op.inputs.iter().find(|i| &i.name == f).is_some_and(|i| i.kind == InputKind::Optional);
        let source = if fs == "out" {
            quote!(::core::option::Option::Some(&__out))
        } else if s.owned {
            quote!(::core::option::Option::Some(&__owned.#f))
        } else if optional_input {
            quote!(#f)
        } else {
            quote!(::core::option::Option::Some(#f))
        };
        let is_option = s.cond.is_some() || optional_input;
        if s.owned {
            owned_fields.push(quote! { pub #f: ::om_core::Tensor });
        }
        if is_option {
            checks.push(quote! { if let ::core::option::Option::Some(s) = &self.#f { s.check(NAME)?; } });
            let cond = match &s.cond {
                Some(c) => needs_expr(c),
                None => quote!(true),
            };
            fields.push(quote! { pub #f: ::core::option::Option<::om_core::__private::Saved> });
            inits.push(
                quote! { #f: if #cond { #source.map(|t| ::om_core::__private::Saved::new(#fs, t)) } else { ::core::option::Option::None } },
            );
            let why = match &s.cond {
                Some(c) => format!("saved slot `{fs}` of `{name}` was not recorded (it is saved only when `{c}` needs a gradient)"),
                None => format!("saved slot `{fs}` of `{name}` is absent (the optional input was not given)"),
            };
            accessors.push(quote! {
                /// The saved tensor, or an error if this record did not keep it.
                pub fn #f(&self) -> ::om_core::Result<&::om_core::Tensor> {
                    self.#f.as_ref().map(|s| s.tensor()).ok_or_else(|| ::om_core::Error::argument(NAME, #why))
                }
            });
        } else {
            checks.push(quote! { self.#f.check(NAME)?; });
            fields.push(quote! { pub #f: ::om_core::__private::Saved });
            inits.push(quote! { #f: ::om_core::__private::Saved::new(#fs, #source.expect("required input")) });
            accessors.push(quote! {
                /// The saved tensor.
                pub fn #f(&self) -> &::om_core::Tensor { self.#f.tensor() }
            });
        }
    }
    // A slice attribute `&[T]` is copied into an inline list (no heap allocation for short
    // ones); any other attribute is cloned.
    let inline_list = |t: &Type| quote!(::om_core::inline_vec::InlineVec<#t, { ::om_core::layout::INLINE_RANK }>);
    for a in &op.args.attrs {
        let (n, t) = (&a.name, &a.ty);
        match slice_attr_elem(t) {
            Some(elem) => {
                let list = inline_list(elem);
                fields.push(quote! { pub #n: #list });
            }
            None => fields.push(quote! { pub #n: #t }),
        }
        let tmp = format_ident!("__attr_{}", n);
        inits.push(quote! { #n: #tmp });
    }
    let attr_clones: Vec<TokenStream> = op
        .args
        .attrs
        .iter()
        .map(|a| {
            let n = &a.name;
            let tmp = format_ident!("__attr_{}", n);
            match slice_attr_elem(&a.ty) {
                Some(elem) => {
                    let list = inline_list(elem);
                    quote! { let #tmp = <#list>::from_slice(#n); }
                }
                None => quote! { let #tmp = ::core::clone::Clone::clone(&#n); },
            }
        })
        .collect();

    let grads_methods: Vec<TokenStream> = op
        .inputs
        .iter()
        .enumerate()
        .map(|(i, inp)| {
            let n = &inp.name;
            let needs = format_ident!("needs_{}", n);
            if inp.kind == InputKind::Many {
                let doc1 = format!("Emits the gradient of `{n}[j]` (summed to its shape by the engine if broadcast).");
                let doc2 = format!("Whether `{n}[j]` needs a gradient.");
                return quote! {
                    #[doc = #doc1]
                    pub fn #n(&mut self, j: usize, g: ::om_core::Tensor) { self.sink.emit(#i + j, g) }
                    #[doc = #doc2]
                    pub fn #needs(&self, j: usize) -> bool { self.sink.needs(#i + j) }
                };
            }
            let doc1 = format!("Emits the gradient of `{}` (summed to its shape by the engine if broadcast).", n);
            let doc2 = format!("Whether `{}` needs a gradient.", n);
            quote! {
                #[doc = #doc1]
                pub fn #n(&mut self, g: ::om_core::Tensor) { self.sink.emit(#i, g) }
                #[doc = #doc2]
                pub fn #needs(&self) -> bool { self.sink.needs(#i) }
            }
        })
        .collect();

    let has_owned = op.args.saved.iter().any(|s| s.owned);
    let (owned_struct, destructure) = if has_owned {
        (
            quote! {
                /// Tensors computed by `forward` that the record keeps (the owned saved slots).
                pub struct Owned { #(#owned_fields,)* }
            },
            quote! { let (__out, __owned): (::om_core::Tensor, Owned) = __result; },
        )
    } else {
        (quote!(), quote! { let __out: ::om_core::Tensor = __result; })
    };
    // The tensor inputs, their names, which need a gradient and their shapes: arrays of
    // the operator's arity, or inline lists for a variadic one (no heap allocation per
    // call up to VARIADIC_INLINE inputs).
    let variadic = op.inputs.iter().any(|i| i.kind == InputKind::Many);
    let arity = op.inputs.len();
    let (gather_inputs, input_shapes_ty, input_shapes_init) = if variadic {
        (
            quote! {
                let mut __inputs: ::om_core::inline_vec::InlineVec<::core::option::Option<&::om_core::Tensor>, #VARIADIC_INLINE> =
                    ::om_core::inline_vec::InlineVec::new();
                let mut __names: ::om_core::inline_vec::InlineVec<&'static str, #VARIADIC_INLINE> = ::om_core::inline_vec::InlineVec::new();
                #(#push_inputs)*
                let __record = ::om_core::__private::should_record(&__inputs);
                let __needs: ::om_core::inline_vec::InlineVec<bool, #VARIADIC_INLINE> =
                    __inputs.iter().map(|t| __record && t.is_some_and(|t| t.needs_grad())).collect();
            },
            quote!(::om_core::inline_vec::InlineVec<::om_core::layout::Dims, #VARIADIC_INLINE>),
            quote!(__inputs.iter().map(|t| t.map(|t| ::om_core::layout::Dims::from_slice(t.shape())).unwrap_or_default()).collect()),
        )
    } else {
        let elems = op.inputs.iter().map(|i| {
            let n = &i.name;
            match i.kind {
                InputKind::Optional => quote!(#n),
                _ => quote!(::core::option::Option::Some(#n)),
            }
        });
        (
            quote! {
                let __inputs: [::core::option::Option<&::om_core::Tensor>; #arity] = [#(#elems),*];
                let __names: [&'static str; #arity] = [#(#input_strs),*];
                let __record = ::om_core::__private::should_record(&__inputs);
                let __needs: [bool; #arity] = ::core::array::from_fn(|i| __record && __inputs[i].is_some_and(|t| t.needs_grad()));
            },
            quote!([::om_core::layout::Dims; #arity]),
            quote!(::core::array::from_fn(|i| __inputs[i].map(|t| ::om_core::layout::Dims::from_slice(t.shape())).unwrap_or_default())),
        )
    };
    let wrapper_doc = format!(
        "\n\n*Operator `{name}`* — saved: {}; attributes: {}.",
        if saved_strs.is_empty() { "none".to_string() } else { saved_strs.join(", ") },
        if attr_strs.is_empty() { "none".to_string() } else { attr_strs.join(", ") }
    );
    let mod_attrs_no_doc = non_doc_attrs(mod_attrs);
    let mod_vis = &module.vis;
    let mod_token = &module.mod_token;

    quote! {
        #(#mod_attrs_no_doc)*
        #(#doc_attrs)*
        #mod_vis #mod_token #mod_ident {
            #(#items)*

            /// The operator's name.
            pub const NAME: &str = #name;

            #owned_struct

            /// The typed backward record (generated by `#[op]`).
            pub struct Record {
                #(#fields,)*
                /// Shapes of the tensor inputs (empty for an absent optional input).
                pub input_shapes: #input_shapes_ty,
            }

            impl Record {
                #(#accessors)*
            }

            /// Where `backward` emits one gradient per input (generated by `#[op]`).
            pub struct Grads<'s> {
                sink: &'s mut ::om_core::__private::GradSink,
            }

            impl Grads<'_> {
                #(#grads_methods)*
            }

            impl ::om_core::__private::Backward for Record {
                fn check_versions(&self) -> ::om_core::Result<()> {
                    #(#checks)*
                    Ok(())
                }
                fn backward(&self, g: &::om_core::Tensor, sink: &mut ::om_core::__private::GradSink) -> ::om_core::Result<()> {
                    let mut d = Grads { sink };
                    backward(self, g, &mut d)
                }
                fn input_shape(&self, i: usize) -> &[usize] {
                    &self.input_shapes[i]
                }
            }

            #[doc(hidden)]
            #[allow(clippy::too_many_arguments)]
            pub fn __op #generics (#fwd_args) -> ::om_core::Result<::om_core::Tensor> {
                #gather_inputs
                if __record {
                    ::om_core::__private::check_grad_dtypes(NAME, &__names, &__inputs)?;
                }
                #(#attr_clones)*
                let __result = ::om_core::no_grad(|| forward(#(#call_args),*)).map_err(|e| e.with_op(NAME))?;
                #destructure
                if !__record || __out.dtype() != ::om_core::DType::F32 {
                    return ::core::result::Result::Ok(__out);
                }
                let __rec = Record {
                    #(#inits,)*
                    input_shapes: #input_shapes_init,
                };
                ::core::result::Result::Ok(::om_core::__private::attach(NAME, __out, __rec, &__inputs))
            }

            const _: () = {
                ::om_core::__private::inventory::submit! {
                    ::om_core::__private::OpEntry {
                        name: #name,
                        kind: ::om_core::__private::OpKind::Primitive,
                        inputs: &[#(#input_strs),*],
                        saved: &[#(#saved_strs),*],
                        attrs: &[#(#attr_strs),*],
                        summary: #summary,
                        cases,
                    }
                }
            };
        }

        #(#doc_attrs)*
        #[doc = #wrapper_doc]
        #[allow(clippy::too_many_arguments)]
        #vis fn #mod_ident #generics (#fwd_args) -> ::om_core::Result<::om_core::Tensor> {
            #mod_ident::__op(#(#call_args),*)
        }
    }
}

/// A composition: the wrapper calls `forward` with recording on; the entry has no record.
fn composition(op: &Op) -> TokenStream {
    let module = &op.module;
    let mod_ident = &module.ident;
    let (_, items) = module.content.as_ref().expect("validated: inline module");
    let mod_attrs = &module.attrs;
    let vis = &module.vis;
    let forward = op.forward.as_ref().expect("validated");
    let fwd_args = &forward.sig.inputs;
    let output = &forward.sig.output;
    let generics = &forward.sig.generics;
    let name = mod_ident.to_string();
    let summary = summary(mod_attrs);
    let doc_attrs = docs(mod_attrs);
    let mod_attrs_no_doc = non_doc_attrs(mod_attrs);
    let input_strs = input_names(op);
    let call_args = call_args(forward);
    quote! {
        #(#mod_attrs_no_doc)*
        #(#doc_attrs)*
        #vis mod #mod_ident {
            #(#items)*

            /// The operator's name.
            pub const NAME: &str = #name;

            #[doc(hidden)]
            #[allow(clippy::too_many_arguments)]
            pub fn __op #generics (#fwd_args) #output {
                forward(#(#call_args),*).map_err(|e| e.with_op(NAME))
            }

            const _: () = {
                ::om_core::__private::inventory::submit! {
                    ::om_core::__private::OpEntry {
                        name: #name,
                        kind: ::om_core::__private::OpKind::Composition,
                        inputs: &[#(#input_strs),*],
                        saved: &[],
                        attrs: &[],
                        summary: #summary,
                        cases,
                    }
                }
            };
        }

        #(#doc_attrs)*
        ///
        /// *Composition:* its gradient comes from the operators it calls.
        #[allow(clippy::too_many_arguments)]
        #vis fn #mod_ident #generics (#fwd_args) #output {
            #mod_ident::__op(#(#call_args),*)
        }
    }
}
