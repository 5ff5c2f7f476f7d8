//! How declarations are shown in the registry: a function's call signature
//! (`resize2d(x: &Tensor, out_h: usize, ..)`) and types, printed from their tokens with
//! Rust's usual spacing.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::ToTokens;

/// `name(param: Type, ..)`, plus ` -> Output` unless the function returns
/// `Result<Tensor>` (the common case, left implicit in the table).
pub fn call(name: &str, sig: &syn::Signature, output: Option<&syn::ReturnType>) -> String {
    let params: Vec<String> = sig.inputs.iter().map(|a| tokens(a.to_token_stream())).collect();
    let ret = match output {
        Some(syn::ReturnType::Type(_, ty)) => tokens(ty.to_token_stream()),
        _ => String::new(),
    };
    let shown = if ret.is_empty() || ret == "Result<Tensor>" { String::new() } else { format!(" -> {ret}") };
    format!("{name}({}){shown}", params.join(", "))
}

/// A type as written, e.g. `[usize; 2]`, `Option<&Tensor>`, `impl Into<Lengths<'a>>`.
pub fn ty(t: &syn::Type) -> String {
    tokens(t.to_token_stream())
}

/// Tokens with a space only where Rust style puts one: between words, after `,` and `;`,
/// around `->`, `+` and `=`, and after a `:` that is not part of `::`.
fn tokens(ts: TokenStream) -> String {
    let mut out = String::new();
    let mut prev_word = false;
    let mut tts = ts.into_iter().peekable();
    while let Some(tt) = tts.next() {
        match tt {
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{ ", " }"),
                    Delimiter::None => ("", ""),
                };
                let inner = tokens(g.stream());
                out.push_str(open);
                out.push_str(inner.trim_end_matches([',', ' ']));
                out.push_str(close);
                prev_word = false;
            }
            TokenTree::Ident(_) | TokenTree::Literal(_) => {
                if prev_word {
                    out.push(' ');
                }
                out.push_str(&tt.to_string());
                prev_word = true;
            }
            TokenTree::Punct(p) => {
                let c = p.as_char();
                let next = match tts.peek() {
                    Some(TokenTree::Punct(q)) => Some(q.as_char()),
                    _ => None,
                };
                let next_is = |ch: char| next == Some(ch);
                match c {
                    ',' | ';' => out.push_str(&format!("{c} ")),
                    '-' if next_is('>') => {
                        tts.next();
                        out.push_str(" -> ");
                    }
                    '+' | '=' => out.push_str(&format!(" {c} ")),
                    ':' if next_is(':') => {
                        tts.next();
                        out.push_str("::");
                    }
                    ':' => out.push_str(": "),
                    _ => out.push(c),
                }
                prev_word = false;
            }
        }
    }
    out.replace("  ", " ")
}
