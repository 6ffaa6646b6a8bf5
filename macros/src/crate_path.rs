//! Where generated code finds the protocol crate and the framework.
//!
//! Generated code names every item by an absolute path, so that it works
//! whatever the user imported. The path of the protocol crate depends on which
//! Ternio crate the user depends on; [`CratePath::protocol`] works it out from
//! the manifest of the crate being compiled.

use proc_macro_crate::{FoundCrate, crate_name};
use proc_macro2::{Ident, Span, TokenStream};
use quote::quote_spanned;

/// An absolute path such as `::ternio::protocol`, kept as segments so that
/// it can be emitted with whichever span the diagnostics need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CratePath {
    segments: Vec<String>,
}

/// The crates that expose the protocol, in the order they are looked for:
/// the package name and the module under its root that holds the protocol.
const PROTOCOL_PROVIDERS: [(&str, Option<&str>); 3] = [
    ("ternio", Some("protocol")),
    ("ternio-client", Some("protocol")),
    ("ternio-protocol", None),
];

impl CratePath {
    /// The protocol crate as seen from the crate being compiled:
    /// `::ternio::protocol`, `::ternio_client::protocol` or
    /// `::ternio_protocol`, the first whose package is a dependency.
    ///
    /// A crate that *is* one of these packages uses its own path (it declares
    /// `extern crate self as <name>;`) even when it also has an earlier one as
    /// a dev-dependency, which its library cannot see. Falls back to
    /// `::ternio_protocol` when none is found.
    pub(crate) fn protocol() -> Self {
        let found: Vec<_> = PROTOCOL_PROVIDERS
            .iter()
            .filter_map(|&(package, module)| {
                crate_name(package)
                    .ok()
                    .map(|found| (package, module, found))
            })
            .collect();
        let chosen = found
            .iter()
            .find(|(_, _, found)| *found == FoundCrate::Itself)
            .or_else(|| found.first());
        match chosen {
            Some((package, module, found)) => {
                let root = match found {
                    FoundCrate::Itself => package.replace('-', "_"),
                    FoundCrate::Name(name) => name.clone(),
                };
                Self::new(std::iter::once(root).chain(module.map(str::to_owned)))
            }
            None => Self::new(["ternio_protocol".to_owned()]),
        }
    }

    /// The framework: always `::ternio` (the framework itself declares
    /// `extern crate self as ternio;`).
    pub(crate) fn framework() -> Self {
        Self::new(["ternio".to_owned()])
    }

    fn new(segments: impl IntoIterator<Item = String>) -> Self {
        Self {
            segments: segments.into_iter().collect(),
        }
    }

    /// The path as tokens, each carrying `span`.
    pub(crate) fn at(&self, span: Span) -> TokenStream {
        let mut tokens = TokenStream::new();
        for segment in &self.segments {
            let ident = Ident::new(segment, span);
            tokens.extend(quote_spanned!(span=> :: #ident));
        }
        tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_absolute() {
        let path = CratePath::new(["ternio".to_owned(), "protocol".to_owned()]);
        assert_eq!(
            path.at(Span::call_site()).to_string(),
            ":: ternio :: protocol"
        );
        assert_eq!(
            CratePath::framework().at(Span::call_site()).to_string(),
            ":: ternio"
        );
    }

    #[test]
    fn this_crate_finds_the_protocol_through_its_dev_dependency() {
        // ternio-macros has ternio-protocol as a dev-dependency only.
        assert_eq!(
            CratePath::protocol().at(Span::call_site()).to_string(),
            ":: ternio_protocol"
        );
    }
}
