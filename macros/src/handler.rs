//! One method of a `#[packet_controller]` block: what it takes, and the
//! `HandlerSpec` expression that calls it.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{
    Attribute, FnArg, Ident, ImplItemFn, LitStr, PatType, Receiver, ReturnType, Signature, Type,
    TypePath, TypeReference,
};

use crate::crate_path::CratePath;
use crate::errors::Errors;
use crate::handler_attr::{self, HandlerOption};

/// A handler method, as far as the generated code needs to know it.
#[derive(Debug)]
pub(crate) struct Handler {
    ident: Ident,
    is_async: bool,
    takes_self: bool,
    request: Type,
    /// The handler's return type, or `None` when it cannot be named
    /// (`impl Trait`) and is left to inference.
    output: Option<Type>,
    /// Where the return type is written (the method's name when there is
    /// none), for the errors about what the handler answers with.
    output_span: Span,
    extractors: Vec<Extractor>,
    options: Vec<HandlerOption>,
    /// The method's `#[cfg(...)]` attributes, repeated on its spec.
    cfgs: Vec<Attribute>,
}

/// A parameter after the request.
#[derive(Debug)]
enum Extractor {
    /// `&Context`: the handler's context itself.
    ContextRef,
    /// `&T`: a reference to `T::from_context(ctx)`.
    Ref(Type),
    /// `T`: `T::from_context(ctx)`.
    Owned(Type),
}

impl Handler {
    /// Reads a handler out of `method`, removing its `#[handler(...)]`
    /// attributes (also when the method is refused, so that the impl block
    /// can be emitted again).
    pub(crate) fn from_method(method: &mut ImplItemFn) -> syn::Result<Self> {
        let mut errors = Errors::default();
        let options = errors
            .check(handler_attr::take_options(&mut method.attrs))
            .unwrap_or_default();
        let sig = &method.sig;
        check_signature(sig, &mut errors);
        let takes_self = sig
            .receiver()
            .is_some_and(|receiver| errors.check(check_receiver(receiver)).is_some());
        let mut params = sig.inputs.iter().filter_map(|input| match input {
            FnArg::Typed(param) => Some(param),
            FnArg::Receiver(_) => None,
        });
        let request = match params.next() {
            Some(param) => errors.check(check_request(param)),
            None => {
                errors.push(syn::Error::new(
                    sig.paren_token.span.join(),
                    "a handler takes its request packet as its first parameter, \
                     such as `fn join(&self, request: Join)`",
                ));
                None
            }
        };
        let extractors: Vec<_> = params
            .filter_map(|param| errors.check(Extractor::from_param(param)))
            .collect();
        errors.finish()?;
        let cfgs = method
            .attrs
            .iter()
            .filter(|attr| attr.path().is_ident("cfg"))
            .cloned()
            .collect();
        Ok(Self {
            ident: sig.ident.clone(),
            is_async: sig.asyncness.is_some(),
            takes_self,
            request: request.expect("checked above"),
            output: output_type(&sig.output),
            output_span: match &sig.output {
                ReturnType::Type(_, ty) => ty.span(),
                ReturnType::Default => sig.ident.span(),
            },
            extractors,
            options,
            cfgs,
        })
    }

    /// The method's name.
    pub(crate) fn ident(&self) -> &Ident {
        &self.ident
    }

    /// The request type, as written.
    pub(crate) fn request(&self) -> &Type {
        &self.request
    }

    /// The method's `#[cfg(...)]` attributes, as tokens: two handlers for
    /// one request type are a conflict only under the same ones.
    pub(crate) fn cfg_key(&self) -> String {
        self.cfgs
            .iter()
            .map(|attr| attr.to_token_stream().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The `HandlerSpec` of this handler, preceded by its `#[cfg]`s: an
    /// element of the vector that `Controller::handlers` returns.
    ///
    /// `controller` is the controller's name, for the handler's name
    /// `"Controller::method"`.
    pub(crate) fn spec(&self, controller: &str) -> TokenStream {
        let ternio = CratePath::framework();
        let t = ternio.at(Span::call_site());
        let this = Ident::new("this", Span::mixed_site());
        let request = Ident::new("request", Span::mixed_site());
        let ctx = Ident::new("ctx", Span::mixed_site());

        let name = LitStr::new(
            &format!("{controller}::{}", syn::ext::IdentExt::unraw(&self.ident)),
            self.ident.span(),
        );
        let req_ty = &self.request;
        let output = match &self.output {
            Some(ty) => ty.to_token_stream(),
            None => quote!(_),
        };

        // `&Context` inside the closure: the sync closure receives one, the
        // async one owns its context.
        let ctx_ref = if self.is_async {
            quote!(&#ctx)
        } else {
            quote!(#ctx)
        };
        let mut args = Vec::new();
        if self.takes_self {
            args.push(quote!(&*#this));
        }
        args.push(request.to_token_stream());
        args.extend(
            self.extractors
                .iter()
                .map(|extractor| extractor.argument(&ternio, &ctx_ref, self.is_async)),
        );
        let method = &self.ident;
        let call = quote!(Self::#method(#(#args),*));

        let ctx_param = if self.extractors.is_empty() {
            quote!(_)
        } else {
            ctx.to_token_stream()
        };
        let capture = self
            .takes_self
            .then(|| quote!(let #this = ::std::sync::Arc::clone(&self);));
        let constructor = {
            let span = req_ty.span();
            let t = ternio.at(span);
            if self.is_async {
                quote_spanned!(span=> #t::__private::HandlerSpec::async_extracted::<#req_ty, #output, _>)
            } else {
                quote_spanned!(span=> #t::__private::HandlerSpec::sync_extracted::<#req_ty, #output>)
            }
        };
        // The check that the handler answers with the response `Req`
        // declares: on the declared return type when there is one (a
        // mismatch is reported there, a missing declaration at `Req`), else
        // on the returned value.
        let req_span = req_ty.span();
        let check_path = {
            let t = ternio.at(req_span);
            quote_spanned!(req_span=> #t::__private)
        };
        let (check, answer) = match &self.output {
            Some(ty) => (
                Some(quote_spanned!(req_span=> #check_path::check_reply::<#req_ty, #ty>();)),
                if self.is_async {
                    quote!(#call.await)
                } else {
                    call
                },
            ),
            None => {
                let value = if self.is_async {
                    quote!(#call.await)
                } else {
                    call
                };
                // The value in a block spanned at the return type: an error
                // about it is reported there.
                let reply = Ident::new("reply", Span::mixed_site());
                let mut value = proc_macro2::Group::new(
                    proc_macro2::Delimiter::Brace,
                    quote!(let #reply = #value; #reply),
                );
                value.set_span(self.output_span);
                let t = ternio.at(self.output_span);
                let check = quote_spanned!(self.output_span=>
                    #t::__private::checked_opaque_reply::<#req_ty, _>(#value)
                );
                (None, check)
            }
        };
        let closure = if self.is_async {
            let recapture = self
                .takes_self
                .then(|| quote!(let #this = ::std::sync::Arc::clone(&#this);));
            quote! {
                move |#request: #req_ty, #ctx_param: #t::Context| {
                    #recapture
                    async move {
                        ::core::result::Result::<_, #t::Rejection>::Ok(#answer)
                    }
                }
            }
        } else {
            quote!(move |#request: #req_ty, #ctx_param: &#t::Context| ::core::result::Result::Ok(#answer))
        };
        let extractor_checks = self
            .extractors
            .iter()
            .filter_map(|extractor| extractor.check(self.is_async));
        let options = &self.options;
        let cfgs = &self.cfgs;
        quote! {
            #(#cfgs)*
            {
                #check
                #capture
                #constructor(#name, #closure)
                    #(#extractor_checks)*
                    #(#options)*
            }
        }
    }
}

/// Refuses signatures that the generated call cannot use.
fn check_signature(sig: &Signature, errors: &mut Errors) {
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.push(syn::Error::new_spanned(
            &sig.generics,
            "generic handlers are not supported: the request and extractor types must be concrete",
        ));
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.push(syn::Error::new(
            unsafety.span,
            "a handler cannot be an `unsafe fn`",
        ));
    }
    if let Some(abi) = &sig.abi {
        errors.push(syn::Error::new_spanned(
            abi,
            "a handler cannot have an `extern` ABI",
        ));
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(syn::Error::new_spanned(
            variadic,
            "a handler cannot be variadic",
        ));
    }
}

/// Accepts `&self` and `self: &Self`.
fn check_receiver(receiver: &Receiver) -> syn::Result<()> {
    if receiver.colon_token.is_none() {
        return match (&receiver.reference, &receiver.mutability) {
            (Some(_), None) => Ok(()),
            (Some(_), Some(_)) => Err(syn::Error::new_spanned(
                receiver,
                "a handler cannot take `&mut self`: handlers share the controller and run concurrently; \
                 take `&self` and keep mutable state behind a lock or an atomic",
            )),
            (None, _) => Err(syn::Error::new_spanned(
                receiver,
                "a handler cannot take `self` by value: the controller is shared by every request; \
                 take `&self`",
            )),
        };
    }
    match peel(&receiver.ty) {
        Type::Reference(TypeReference {
            mutability: None,
            elem,
            ..
        }) if matches!(peel(elem), Type::Path(path) if path.qself.is_none() && path.path.is_ident("Self")) => {
            Ok(())
        }
        _ => Err(syn::Error::new_spanned(
            receiver,
            "a handler takes `&self` or no receiver at all",
        )),
    }
}

fn check_request(param: &PatType) -> syn::Result<Type> {
    match peel(&param.ty) {
        Type::Reference(reference) => Err(syn::Error::new_spanned(
            reference,
            format!(
                "a handler takes its request packet by value: write `{}`, not `&{0}`",
                reference
                    .elem
                    .to_token_stream()
                    .to_string()
                    .replace(' ', "")
            ),
        )),
        Type::ImplTrait(ty) => Err(impl_trait_param(ty)),
        _ => Ok((*param.ty).clone()),
    }
}

impl Extractor {
    fn from_param(param: &PatType) -> syn::Result<Self> {
        match peel(&param.ty) {
            Type::Reference(TypeReference {
                mutability: Some(_),
                ..
            }) => Err(syn::Error::new_spanned(
                &param.ty,
                "an extractor is taken by value or by shared reference, not by `&mut`",
            )),
            Type::Reference(TypeReference { elem, .. }) => match peel(elem) {
                ty if is_context(ty) => Ok(Self::ContextRef),
                Type::ImplTrait(ty) => Err(impl_trait_param(ty)),
                _ => Ok(Self::Ref((**elem).clone())),
            },
            Type::ImplTrait(ty) => Err(impl_trait_param(ty)),
            _ => Ok(Self::Owned((*param.ty).clone())),
        }
    }

    /// The argument passed for this parameter; `ctx_ref` is a `&Context`.
    /// A refusal returns the rejection from the handler's closure.
    fn argument(&self, ternio: &CratePath, ctx_ref: &TokenStream, is_async: bool) -> TokenStream {
        match self {
            Self::ContextRef => ctx_ref.clone(),
            Self::Ref(ty) => {
                let extracted = extract(ternio, ty, ctx_ref, is_async);
                quote!(&#extracted)
            }
            Self::Owned(ty) => extract(ternio, ty, ctx_ref, is_async),
        }
    }

    /// `.extractor::<T>()` (`.async_extractor::<T, _>()` in an `async`
    /// handler), which records the extractor's start-up check.
    fn check(&self, is_async: bool) -> Option<TokenStream> {
        match self {
            Self::ContextRef => None,
            Self::Ref(ty) | Self::Owned(ty) => {
                let span = ty.span();
                Some(if is_async {
                    quote_spanned!(span=> .async_extractor::<#ty, _>())
                } else {
                    quote_spanned!(span=> .extractor::<#ty>())
                })
            }
        }
    }
}

/// `T`, built from the context or returned as the handler's rejection,
/// spanned at `T`: `extract::<T>(ctx)?`, or in an `async` handler
/// `extract_async::<T, _>(ctx).await?`.
fn extract(ternio: &CratePath, ty: &Type, ctx_ref: &TokenStream, is_async: bool) -> TokenStream {
    let span = ty.span();
    let t = ternio.at(span);
    if is_async {
        quote_spanned!(span=> #t::__private::extract_async::<#ty, _>(#ctx_ref).await?)
    } else {
        quote_spanned!(span=> #t::__private::extract::<#ty>(#ctx_ref)?)
    }
}

fn impl_trait_param(ty: &syn::TypeImplTrait) -> syn::Error {
    syn::Error::new_spanned(
        ty,
        "`impl Trait` parameters make a handler generic, which is not supported: name a concrete type",
    )
}

/// The declared return type, `()` when there is none, and `None` for
/// `impl Trait`, which only inference can name.
fn output_type(output: &ReturnType) -> Option<Type> {
    match output {
        ReturnType::Default => Some(syn::parse_quote!(())),
        ReturnType::Type(_, ty) if contains_impl_trait(ty) => None,
        ReturnType::Type(_, ty) => Some((**ty).clone()),
    }
}

fn contains_impl_trait(ty: &Type) -> bool {
    fn any_impl(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|token| match token {
            TokenTree::Ident(ident) => ident == "impl",
            TokenTree::Group(group) => any_impl(group.stream()),
            TokenTree::Punct(_) | TokenTree::Literal(_) => false,
        })
    }
    any_impl(ty.to_token_stream())
}

/// Whether `ty` is a path ending in `Context` with no generic arguments,
/// such as `Context` or `ternio::Context`.
fn is_context(ty: &Type) -> bool {
    matches!(ty, Type::Path(TypePath { qself: None, path })
        if path.segments.last().is_some_and(|last| last.ident == "Context" && last.arguments.is_none()))
}

/// `ty` without the invisible groups and parentheses that macros add.
fn peel(mut ty: &Type) -> &Type {
    loop {
        match ty {
            Type::Group(group) => ty = &group.elem,
            Type::Paren(paren) => ty = &paren.elem,
            _ => return ty,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn spec(mut method: ImplItemFn) -> String {
        Handler::from_method(&mut method)
            .unwrap()
            .spec("Rooms")
            .to_string()
    }

    fn error(mut method: ImplItemFn) -> String {
        Handler::from_method(&mut method).unwrap_err().to_string()
    }

    #[test]
    fn sync_handlers_borrow_the_context_and_build_extractors_from_it() {
        let out = spec(parse_quote! {
            #[handler(encrypted, timeout_ms = 500)]
            fn join(&self, request: Join, ctx: &ternio::Context, State(store): State<Store>, cfg: &Config) -> Result<Joined, Refused> {}
        });
        assert_eq!(
            out,
            "{ :: ternio :: __private :: check_reply :: < Join , Result < Joined , Refused > > () ; \
             let this = :: std :: sync :: Arc :: clone (& self) ; \
             :: ternio :: __private :: HandlerSpec :: sync_extracted :: < Join , Result < Joined , Refused > > (\"Rooms::join\" , \
             move | request : Join , ctx : & :: ternio :: Context | \
             :: core :: result :: Result :: Ok (Self :: join (& * this , request , ctx , \
             :: ternio :: __private :: extract :: < State < Store > > (ctx) ? , \
             & :: ternio :: __private :: extract :: < Config > (ctx) ?))) \
             . extractor :: < State < Store > > () . extractor :: < Config > () \
             . encrypted () . timeout_ms (500) }"
        );
    }

    #[test]
    fn async_handlers_own_the_context_and_clone_the_controller_per_call() {
        let out = spec(parse_quote! {
            async fn leave(&self, request: Leave, ctx: &Context, owned: Context) {}
        });
        assert_eq!(
            out,
            "{ :: ternio :: __private :: check_reply :: < Leave , () > () ; \
             let this = :: std :: sync :: Arc :: clone (& self) ; \
             :: ternio :: __private :: HandlerSpec :: async_extracted :: < Leave , () , _ > (\"Rooms::leave\" , \
             move | request : Leave , ctx : :: ternio :: Context | { \
             let this = :: std :: sync :: Arc :: clone (& this) ; \
             async move { :: core :: result :: Result :: < _ , :: ternio :: Rejection > :: Ok (\
             Self :: leave (& * this , request , & ctx , \
             :: ternio :: __private :: extract_async :: < Context , _ > (& ctx) . await ?) . await) } }) \
             . async_extractor :: < Context , _ > () }"
        );
    }

    #[test]
    fn associated_functions_capture_nothing() {
        let out = spec(parse_quote! {
            fn r#ping(request: Ping) -> impl IntoReply {}
        });
        assert_eq!(
            out,
            "{ :: ternio :: __private :: HandlerSpec :: sync_extracted :: < Ping , _ > (\"Rooms::ping\" , \
             move | request : Ping , _ : & :: ternio :: Context | \
             :: core :: result :: Result :: Ok (:: ternio :: __private :: checked_opaque_reply :: < Ping , _ > \
             ({ let reply = Self :: r#ping (request) ; reply }))) }"
        );
        let out = spec(parse_quote! {
            async fn tick(self: &Self, request: Tick) -> Option<(u8, impl Sized)> {}
        });
        assert!(out.contains("async_extracted :: < Tick , _ , _ >"), "{out}");
        assert!(
            out.contains(
                ":: ternio :: __private :: checked_opaque_reply :: < Tick , _ > \
                 ({ let reply = Self :: tick (& * this , request) . await ; reply })"
            ),
            "{out}"
        );
    }

    #[test]
    fn cfg_attributes_carry_over_to_the_spec() {
        let out = spec(parse_quote! {
            #[cfg(feature = "admin")]
            #[doc = "not carried"]
            fn kick(request: Kick) {}
        });
        assert!(out.starts_with("# [cfg (feature = \"admin\")] {"), "{out}");
        assert!(!out.contains("doc"), "{out}");
    }

    #[test]
    fn handler_attributes_are_removed_from_the_method() {
        let mut method: ImplItemFn = parse_quote! {
            #[inline]
            #[handler(encrypted)]
            fn kick(request: Kick) {}
        };
        Handler::from_method(&mut method).unwrap();
        assert_eq!(method.attrs.len(), 1);
        let mut bad: ImplItemFn = parse_quote! {
            #[handler(= 1)]
            fn kick(&mut self, request: Kick) {}
        };
        assert!(Handler::from_method(&mut bad).is_err());
        assert!(bad.attrs.is_empty());
    }

    #[test]
    fn refuses_what_cannot_be_called() {
        assert!(
            error(parse_quote!(
                fn a(self, r: Ping) {}
            ))
            .contains("`self` by value")
        );
        assert!(
            error(parse_quote!(
                fn a(&mut self, r: Ping) {}
            ))
            .contains("`&mut self`")
        );
        assert!(
            error(parse_quote!(
                fn a(self: Box<Self>, r: Ping) {}
            ))
            .contains("`&self` or no receiver")
        );
        assert!(
            error(parse_quote!(
                fn a(self: &mut Self, r: Ping) {}
            ))
            .contains("`&self` or no receiver")
        );
        assert_eq!(
            error(parse_quote!(
                fn a(&self) {}
            )),
            "a handler takes its request packet as its first parameter, such as `fn join(&self, request: Join)`"
        );
        assert!(
            error(parse_quote!(
                fn a() {}
            ))
            .contains("request packet as its first parameter")
        );
        assert!(
            error(parse_quote!(
                fn a<T>(r: Ping, t: T) {}
            ))
            .contains("generic handlers")
        );
        assert!(
            error(parse_quote!(
                fn a<'a>(r: Ping, t: &'a T) {}
            ))
            .contains("generic handlers")
        );
        assert!(
            error(parse_quote!(
                fn a(r: &Ping) {}
            ))
            .contains("write `Ping`, not `&Ping`")
        );
        assert!(
            error(parse_quote!(
                fn a(r: impl Packet) {}
            ))
            .contains("`impl Trait` parameters")
        );
        assert!(
            error(parse_quote!(
                fn a(r: Ping, x: &impl Sized) {}
            ))
            .contains("`impl Trait`")
        );
        assert!(
            error(parse_quote!(
                fn a(r: Ping, x: &mut Context) {}
            ))
            .contains("`&mut`")
        );
        assert!(
            error(parse_quote!(
                unsafe fn a(r: Ping) {}
            ))
            .contains("`unsafe fn`")
        );
        assert!(
            error(parse_quote!(
                extern "C" fn a(r: Ping) {}
            ))
            .contains("`extern`")
        );
    }

    #[test]
    fn reports_every_mistake_of_a_method() {
        let mut method: ImplItemFn = parse_quote! {
            #[handler(= 1)]
            fn a<T>(&mut self, r: &Ping, x: &mut u8) {}
        };
        let error = Handler::from_method(&mut method).unwrap_err();
        assert_eq!(error.into_iter().count(), 5);
    }

    #[test]
    fn context_is_recognised_by_its_last_segment() {
        assert!(is_context(&parse_quote!(Context)));
        assert!(is_context(&parse_quote!(::ternio::Context)));
        assert!(!is_context(&parse_quote!(Context<u8>)));
        assert!(!is_context(&parse_quote!(ContextId)));
    }
}
