//! Decoding of the internally tagged protocol enums (`{"m":"submit_turn",...}`) without
//! serde's derived decoder for that representation.
//!
//! serde derives an internally tagged enum's decoder as "buffer the whole object into its
//! private `Content` tree, find the tag, decode the variant from the buffer"; the buffering,
//! the variant match and every field type's decoder over `Content` are instantiated once per
//! deserializer type that reaches the enum. For the big `proto` enums that was about a sixth
//! of the static host binary (issue 17's size goal). Here the object is read once into a
//! `serde_json::Map` (the only part generic over the deserializer, shared by every enum), the
//! tag is taken out of it, and the variant is decoded from the rest by a plain externally
//! tagged twin of the enum ([`tagged_enum!`] writes it from the one definition) through
//! [`TaggedParts`], an enum access over `serde_json::Value`. So each enum's decoder exists
//! once, over `Value`.
//!
//! Encoding is untouched (the enums keep serde's derived `Serialize` with their `tag`), and
//! decoding accepts what the derived decoders accepted: unknown fields are ignored, a unit
//! variant ignores the rest of the object, a missing tag is "missing field `m`", an unknown
//! one "unknown variant `x`, expected one of ...". The one difference: a key given twice in
//! one object is refused ("duplicate field"), where serde refused it only for the tag and
//! known fields.

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

/// Reads one JSON object into a map, refusing a key given twice.
pub(crate) struct ObjectVisitor {
    /// What is expected, for the "invalid type" message (`internally tagged enum Request`).
    pub(crate) what: &'static str,
}

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.what)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            let value = access.next_value::<Value>()?;
            if map.contains_key(&key) {
                return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
            }
            map.insert(key, value);
        }
        Ok(map)
    }
}

/// Reads the object `d` holds (see [`ObjectVisitor`]).
pub(crate) fn read_object<'de, D: Deserializer<'de>>(
    d: D,
    what: &'static str,
) -> Result<Map<String, Value>, D::Error> {
    d.deserialize_map(ObjectVisitor { what })
}

/// Decodes the internally tagged enum whose externally tagged twin is `T` from `d`: the
/// entry `tag` names the variant, the other entries are its fields (or its newtype's).
pub(crate) fn decode_tagged<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    d: D,
    what: &'static str,
    tag: &'static str,
) -> Result<T, D::Error> {
    let map = read_object(d, what)?;
    from_tagged_map(map, tag).map_err(de::Error::custom)
}

/// [`decode_tagged`] of an object already read.
pub(crate) fn from_tagged_map<T: DeserializeOwned>(
    mut map: Map<String, Value>,
    tag: &'static str,
) -> Result<T, serde_json::Error> {
    let Some(variant) = map.remove(tag) else {
        return Err(de::Error::missing_field(tag));
    };
    T::deserialize(TaggedParts { variant, rest: map })
}

/// Takes the field `name` out of `map` and decodes it ("missing field" when absent).
pub(crate) fn take_field<T: DeserializeOwned>(
    map: &mut Map<String, Value>,
    name: &'static str,
) -> Result<T, serde_json::Error> {
    match map.remove(name) {
        Some(v) => T::deserialize(v),
        None => Err(de::Error::missing_field(name)),
    }
}

/// An internally tagged object split into its tag and the rest, handed to the derived
/// decoder of an externally tagged enum as that enum's variant and content.
pub(crate) struct TaggedParts {
    variant: Value,
    rest: Map<String, Value>,
}

impl<'de> Deserializer<'de> for TaggedParts {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_enum(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_enum(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

impl<'de> de::EnumAccess<'de> for TaggedParts {
    type Error = serde_json::Error;
    type Variant = TaggedRest;

    fn variant_seed<S: de::DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), Self::Error> {
        // Only a string names a variant (serde's derived decoder took an integer as the
        // variant's index when the enum was nested in another tagged one, `"m":7`; nothing
        // writes that).
        let v = seed.deserialize(self.variant)?;
        Ok((v, TaggedRest(self.rest)))
    }
}

/// The entries of a tagged object other than the tag: the variant's content.
pub(crate) struct TaggedRest(Map<String, Value>);

impl<'de> de::VariantAccess<'de> for TaggedRest {
    type Error = serde_json::Error;

    /// A unit variant ignores the object's other entries (as serde's internally tagged
    /// decoder does).
    fn unit_variant(self) -> Result<(), Self::Error> {
        Ok(())
    }

    fn newtype_variant_seed<S: de::DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<S::Value, Self::Error> {
        seed.deserialize(Value::Object(self.0))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _v: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom(
            "tuple variants are not used in the protocol",
        ))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        // `deserialize_map`, not `_any`/`_struct`: only the visitor's `visit_map` is needed
        // (a struct variant never arrives as an array).
        Value::Object(self.0).deserialize_map(visitor)
    }
}

/// Defines an internally tagged enum with serde's derived `Serialize` (the caller's
/// `#[derive(Serialize)]` and `#[serde(tag = ..., rename_all = "snake_case")]` stay on it) and
/// a `Deserialize` through [`decode_tagged`] and an externally tagged twin `shadow` with the
/// same variants, fields and field attributes.
///
/// ```ignore
/// tagged_enum! {
///     RequestDe, "m";
///     #[derive(Debug, Clone, PartialEq, Serialize)]
///     #[serde(tag = "m", rename_all = "snake_case")]
///     pub enum Request { Status, OpenSession(OpenSession), SubmitTurn { text: String } }
/// }
/// ```
macro_rules! tagged_enum {
    (
        $shadow:ident, $tag:literal;
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident
                $( ( $newtype:ty ) )?
                $( { $( $(#[$fmeta:meta])* $field:ident : $fty:ty ),* $(,)? } )?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $(
                $(#[$vmeta])*
                $variant $( ( $newtype ) )? $( { $( $(#[$fmeta])* $field : $fty ),* } )?
            ),*
        }

        /// The externally tagged twin that decodes the variants (see `proto_serde`).
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        #[allow(clippy::large_enum_variant, dead_code)]
        enum $shadow {
            $(
                $(#[$vmeta])*
                $variant $( ( $newtype ) )? $( { $( $(#[$fmeta])* $field : $fty ),* } )?
            ),*
        }

        impl From<$shadow> for $name {
            fn from(s: $shadow) -> Self {
                match s {
                    $(
                        $crate::proto_serde::tagged_enum!(@path $shadow $variant inner
                            $( ( $newtype ) )? $( { $( $field ),* } )?)
                        => $crate::proto_serde::tagged_enum!(@path $name $variant inner
                            $( ( $newtype ) )? $( { $( $field ),* } )?),
                    )*
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::proto_serde::decode_tagged::<D, $shadow>(
                    d,
                    concat!("internally tagged enum ", stringify!($name)),
                    $tag,
                )
                .map(Self::from)
            }
        }

        // serde's own decoder of the enum, for the tests that compare the two.
        #[cfg(test)]
        const _: () = {
            #[derive(serde::Deserialize)]
            #[serde(tag = $tag, rename_all = "snake_case")]
            #[allow(clippy::large_enum_variant, dead_code)]
            enum Derived {
                $(
                    $(#[$vmeta])*
                    $variant $( ( $newtype ) )? $( { $( $(#[$fmeta])* $field : $fty ),* } )?
                ),*
            }
            impl<'de> serde::Deserialize<'de> for $crate::proto_serde::Legacy<$name> {
                fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    Ok($crate::proto_serde::Legacy(match Derived::deserialize(d)? {
                        $(
                            $crate::proto_serde::tagged_enum!(@path Derived $variant inner
                                $( ( $newtype ) )? $( { $( $field ),* } )?)
                            => $crate::proto_serde::tagged_enum!(@path $name $variant inner
                                $( ( $newtype ) )? $( { $( $field ),* } )?),
                        )*
                    }))
                }
            }
            impl $crate::proto_serde::Sampled for $name {
                fn sample(pick: usize) -> Result<Self, serde_json::Error> {
                    <$shadow as serde::Deserialize>::deserialize(
                        $crate::proto_serde::tests::SampleDe::top(pick),
                    )
                    .map(Self::from)
                }
                fn variants() -> &'static [&'static str] {
                    &[$( stringify!($variant) ),*]
                }
                fn tag() -> &'static str {
                    $tag
                }
            }
        };
    };
    // A variant as a pattern or a constructor (the same tokens): unit, newtype, struct.
    (@path $ty:ident $variant:ident $inner:ident) => { $ty::$variant };
    (@path $ty:ident $variant:ident $inner:ident ( $newtype:ty )) => { $ty::$variant($inner) };
    (@path $ty:ident $variant:ident $inner:ident { $( $field:ident ),* }) => {
        $ty::$variant { $( $field ),* }
    };
}
pub(crate) use tagged_enum;

/// A value decoded by serde's derived decoder (tests compare it with [`decode_tagged`]'s).
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Legacy<T>(pub(crate) T);

/// An enum whose every variant the tests can make a sample of.
#[cfg(test)]
pub(crate) trait Sampled: Sized {
    /// A value of variant number `pick`, every field filled.
    fn sample(pick: usize) -> Result<Self, serde_json::Error>;
    /// The variants' names as written in Rust.
    fn variants() -> &'static [&'static str];
    /// The name of the tag entry.
    fn tag() -> &'static str;
}

#[cfg(test)]
pub(crate) mod tests;
