//! `setters!`: chainable setters for the config structs, which are
//! `#[non_exhaustive]` (a new field is not a breaking change) and so cannot be built
//! with a struct literal outside this crate.

/// For each `field: Type`, a `fn field(self, value: Type) -> Self` that sets it; for
/// each `field: Type` after `optional`, a field of type `Option<Type>` whose setter
/// takes `impl Into<Option<Type>>` (a value, `Some(value)` or `None`).
macro_rules! setters {
    ($ty:ty { $($field:ident : $t:ty),* $(,)? } $(optional { $($ofield:ident : $ot:ty),* $(,)? })?) => {
        impl $ty {
            $(
                #[doc = concat!("With `", stringify!($field), "` set.")]
                #[must_use]
                pub fn $field(mut self, value: $t) -> Self {
                    self.$field = value;
                    self
                }
            )*
            $($(
                #[doc = concat!("With `", stringify!($ofield), "` set (a value or `None`).")]
                #[must_use]
                pub fn $ofield(mut self, value: impl Into<Option<$ot>>) -> Self {
                    self.$ofield = value.into();
                    self
                }
            )*)?
        }
    };
}
