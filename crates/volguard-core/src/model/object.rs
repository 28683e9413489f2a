//! Model structs decode only from JSON objects (`object_only!`).

use serde::Deserialize;

/// Objects decode only from JSON objects. serde's derive also accepts a sequence for a struct
/// (fields by position), so `{"metadata": []}` decoded as empty metadata and the finalizer rule
/// patched an object whose `metadata` is an array (`make fuzz`'s `finalizer_patch`). Each model
/// struct derives with `#[serde(remote = "Self")]`, which turns the derived code into inherent
/// functions, and `object_only!` adds the trait impls: `Serialize` as derived, `Deserialize`
/// through `deserialize_map`, so a sequence (or any non-object) is an "expected an object" error.
pub(crate) trait Derived<'de>: Sized {
    fn derived<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
}

struct ObjectVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Derived<'de>> serde::de::Visitor<'de> for ObjectVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::derived(serde::de::value::MapAccessDeserializer::new(map))
    }
}

pub(crate) fn object<'de, D: serde::Deserializer<'de>, T: Derived<'de>>(
    d: D,
) -> Result<T, D::Error> {
    d.deserialize_map(ObjectVisitor(std::marker::PhantomData))
}

/// Any JSON object, kept as a value (a field whose content is compared whole, never read).
pub(crate) fn object_value<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<serde_json::Value, D::Error> {
    serde_json::Map::deserialize(d).map(serde_json::Value::Object)
}

/// `object_only!(A, B)`: the trait impls of structs derived with `#[serde(remote = "Self")]`;
/// `object_only!(borrowed: A)` for decode-only structs that borrow from the input (`A<'a>`).
macro_rules! object_only {
    (borrowed: $($t:ident),* $(,)?) => {$(
        impl<'de: 'a, 'a> $crate::model::wire::Derived<'de> for $t<'a> {
            fn derived<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $t::deserialize(d)
            }
        }
        impl<'de: 'a, 'a> serde::Deserialize<'de> for $t<'a> {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::model::wire::object(d)
            }
        }
    )*};
    ($($t:ident),* $(,)?) => {$(
        impl<'de> $crate::model::wire::Derived<'de> for $t {
            fn derived<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $t::deserialize(d)
            }
        }
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::model::wire::object(d)
            }
        }
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                $t::serialize(self, s)
            }
        }
    )*};
}
pub(crate) use object_only;
