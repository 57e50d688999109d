//! Typed reading of an agent's JSON line, borrowing from it, with the rules
//! of [`super::json`]: a missing field or one of the wrong type reads as
//! empty, a key given twice counts with its last value, and every value is
//! checked as strictly as `serde_json` checks a `Value` parse (escapes,
//! number ranges), fields nobody reads included, so a line is readable here
//! exactly when it is readable as a `Value`.
//!
//! An object type lists its fields in a [`Fields`] impl and derives its
//! `Deserialize` with [`object!`]; the scalar types here take any JSON
//! value. serde's derive would refuse a duplicate key or a value of the
//! wrong type, and skips unread fields without checking them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Any JSON value, walked and checked as a `Value` parse would check it,
/// and dropped.
pub(crate) struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_none<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_key::<Checked>()?.is_some() {
            map.next_value::<Checked>()?;
        }
        Ok(Checked)
    }
}

/// One JSON value read as `T` wants it; every kind `T` does not take reads
/// as `T::default()` (after being checked).
pub(crate) trait Lenient<'de>: Sized + Default {
    fn str(_: Cow<'de, str>) -> Self {
        Self::default()
    }
    fn u64(_: u64) -> Self {
        Self::default()
    }
    fn i64(_: i64) -> Self {
        Self::default()
    }
    fn f64(_: f64) -> Self {
        Self::default()
    }
    fn bool(_: bool) -> Self {
        Self::default()
    }
    fn seq<A: SeqAccess<'de>>(seq: A) -> Result<Self, A::Error> {
        CheckedVisitor.visit_seq(seq)?;
        Ok(Self::default())
    }
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        CheckedVisitor.visit_map(map)?;
        Ok(Self::default())
    }
}

/// Reads one value as the [`Lenient`] `T`.
pub(crate) fn lenient<'de, D: Deserializer<'de>, T: Lenient<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(LenientVisitor(PhantomData))
}

struct LenientVisitor<T>(PhantomData<T>);

impl<'de, T: Lenient<'de>> Visitor<'de> for LenientVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<T, E> {
        Ok(T::bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<T, E> {
        Ok(T::i64(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<T, E> {
        Ok(T::u64(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<T, E> {
        Ok(T::f64(v))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<T, E> {
        Ok(T::str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<T, E> {
        Ok(T::str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<T, E> {
        Ok(T::str(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_none<E>(self) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        T::seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::map(map)
    }
}

/// The fields of an object type: [`Fields::field`] reads the value of a
/// key it knows and says whether it did.
pub(crate) trait Fields<'de>: Default {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error>;
}

/// Reads an object's fields into `T` (the last value of a repeated key
/// counts), checking the others.
pub(crate) fn fields<'de, T: Fields<'de>, A: MapAccess<'de>>(mut map: A) -> Result<T, A::Error> {
    let mut out = T::default();
    while let Some(key) = map.next_key::<Text<'de>>()? {
        if !out.field(key.as_str(), &mut map)? {
            map.next_value::<Checked>()?;
        }
    }
    Ok(out)
}

/// `Deserialize` for an object type: its [`Fields`] from an object,
/// default from anything else.
macro_rules! object {
    ($name:ident<$lt:lifetime>) => {
        impl<'de: $lt, $lt> $crate::decoder::lenient::Lenient<'de> for $name<$lt> {
            fn map<A: serde::de::MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
                $crate::decoder::lenient::fields(map)
            }
        }
        impl<'de: $lt, $lt> serde::Deserialize<'de> for $name<$lt> {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::decoder::lenient::lenient(d)
            }
        }
    };
    ($name:ident) => {
        impl<'de> $crate::decoder::lenient::Lenient<'de> for $name {
            fn map<A: serde::de::MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
                $crate::decoder::lenient::fields(map)
            }
        }
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::decoder::lenient::lenient(d)
            }
        }
    };
}
pub(crate) use object;

/// `Deserialize` for a [`Lenient`] type.
macro_rules! lenient_type {
    ($name:ident<$lt:lifetime>) => {
        impl<'de: $lt, $lt> Deserialize<'de> for $name<$lt> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                lenient(d)
            }
        }
    };
    ($name:ident) => {
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                lenient(d)
            }
        }
    };
}

/// A string, borrowed from the line unless it had escapes; `None` when the
/// value is not a string.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Text<'a>(pub Option<Cow<'a, str>>);

impl<'a> Text<'a> {
    /// The string, or "" (as [`super::json::str_at`]).
    pub fn as_str(&self) -> &str {
        self.0.as_deref().unwrap_or_default()
    }
    pub fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
    pub fn owned(&self) -> String {
        self.as_str().to_owned()
    }
}

impl<'de: 'a, 'a> Lenient<'de> for Text<'a> {
    fn str(s: Cow<'de, str>) -> Self {
        Text(Some(s))
    }
}
lenient_type!(Text<'a>);

/// A count: as [`super::json::as_u64`], a float counts (truncated), a
/// negative number or anything else is 0.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct U64(pub u64);

impl<'de> Lenient<'de> for U64 {
    fn u64(v: u64) -> Self {
        U64(v)
    }
    fn i64(v: i64) -> Self {
        U64(u64::try_from(v).unwrap_or(0))
    }
    fn f64(v: f64) -> Self {
        U64(if v >= 0.0 { v as u64 } else { 0 })
    }
}
lenient_type!(U64);

/// Any number as a float, anything else 0.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct F64(pub f64);

impl<'de> Lenient<'de> for F64 {
    fn u64(v: u64) -> Self {
        F64(v as f64)
    }
    fn i64(v: i64) -> Self {
        F64(v as f64)
    }
    fn f64(v: f64) -> Self {
        F64(v)
    }
}
lenient_type!(F64);

/// `true` only for `true`.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Bool(pub bool);

impl<'de> Lenient<'de> for Bool {
    fn bool(v: bool) -> Self {
        Bool(v)
    }
}
lenient_type!(Bool);

/// An index: a whole number that fits in 32 bits (`as_u64` then
/// `u32::try_from`: a float is not one).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Index(pub Option<u32>);

impl<'de> Lenient<'de> for Index {
    fn u64(v: u64) -> Self {
        Index(u32::try_from(v).ok())
    }
    fn i64(v: i64) -> Self {
        Index(u64::try_from(v).ok().and_then(|v| u32::try_from(v).ok()))
    }
}
lenient_type!(Index);

/// An array's elements; empty for anything else.
#[derive(Debug)]
pub(crate) struct List<T>(pub Vec<T>);

impl<T> Default for List<T> {
    fn default() -> Self {
        List(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Lenient<'de> for List<T> {
    fn seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            out.push(item);
        }
        Ok(List(out))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient(d)
    }
}

/// An object's entries by key, in key order (as a `serde_json::Map`), the
/// last of a repeated key counting; empty for anything else.
#[derive(Debug)]
pub(crate) struct Entries<T>(pub BTreeMap<String, T>);

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Entries(BTreeMap::new())
    }
}

impl<'de, T: Deserialize<'de>> Lenient<'de> for Entries<T> {
    fn map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(key) = map.next_key::<Text<'de>>()? {
            let value = map.next_value()?;
            out.insert(key.0.unwrap_or_default().into_owned(), value);
        }
        Ok(Entries(out))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient(d)
    }
}

/// A part of the line kept as JSON (a tool's input, a `tool_use_result`),
/// found inside `ENCLOSING` containers of the line: parsed into a `Value`
/// with the containers past the line's depth limit kept as their text, as
/// [`crate::nesting::parse_line`] keeps them for the whole line.
#[derive(Debug, Default)]
pub(crate) struct Json<const ENCLOSING: usize>(pub serde_json::Value);

impl<'de, const ENCLOSING: usize> Deserialize<'de> for Json<ENCLOSING> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de serde_json::value::RawValue>::deserialize(d)?;
        crate::nesting::parse_part(raw.get(), ENCLOSING)
            .map(Json)
            .map_err(de::Error::custom)
    }
}

/// A part of the line kept as its text, for the few readers that need it
/// whole (a block of a type nobody reads field by field).
pub(crate) type Raw<'a> = &'a serde_json::value::RawValue;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[derive(Debug, Default)]
    struct Probe<'a> {
        s: Text<'a>,
        n: U64,
        f: F64,
        b: Bool,
        i: Index,
        l: List<Text<'a>>,
        o: Option<Inner<'a>>,
    }

    #[derive(Debug, Default)]
    struct Inner<'a> {
        s: Text<'a>,
    }

    impl<'de: 'a, 'a> Fields<'de> for Probe<'a> {
        fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
            match key {
                "s" => self.s = map.next_value()?,
                "n" => self.n = map.next_value()?,
                "f" => self.f = map.next_value()?,
                "b" => self.b = map.next_value()?,
                "i" => self.i = map.next_value()?,
                "l" => self.l = map.next_value()?,
                "o" => self.o = Some(map.next_value()?),
                _ => return Ok(false),
            }
            Ok(true)
        }
    }
    object!(Probe<'a>);

    impl<'de: 'a, 'a> Fields<'de> for Inner<'a> {
        fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
            match key {
                "s" => self.s = map.next_value()?,
                _ => return Ok(false),
            }
            Ok(true)
        }
    }
    object!(Inner<'a>);

    /// Whatever the types, a probe reads what the `Value` accessors read.
    #[test]
    fn reads_as_the_value_accessors_do() {
        use crate::decoder::json::{as_u64, f64_at, str_at};
        let odd = [
            "null",
            "true",
            "false",
            "0",
            "7",
            "-3",
            "2.5",
            "-0.0",
            "1e300",
            "1e-400",
            "18446744073709551615",
            "18446744073709551616",
            "4294967296",
            "\"s\"",
            "\"\\u00e9\\n\"",
            "[]",
            "[\"a\",1]",
            "{}",
            "{\"s\":\"in\"}",
        ];
        for v in odd {
            let line =
                format!(r#"{{"s":{v},"n":{v},"f":{v},"b":{v},"i":{v},"l":{v},"o":{v},"x":{v}}}"#);
            let p: Probe = serde_json::from_str(&line).unwrap();
            let value: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(p.s.as_str(), str_at(&value, "s"), "{v}");
            assert_eq!(p.s.get(), value["s"].as_str(), "{v}");
            assert_eq!(p.n.0, as_u64(&value["n"]), "{v}");
            assert_eq!(p.f.0.to_bits(), f64_at(&value, "f").to_bits(), "{v}");
            assert_eq!(p.b.0, value["b"].as_bool().unwrap_or(false), "{v}");
            assert_eq!(
                p.i.0,
                value["i"].as_u64().and_then(|n| u32::try_from(n).ok()),
                "{v}"
            );
            let list: Vec<Option<&str>> = p.l.0.iter().map(Text::get).collect();
            let want: Vec<Option<&str>> = value["l"]
                .as_array()
                .map(|a| a.iter().map(Value::as_str).collect())
                .unwrap_or_default();
            assert_eq!(list, want, "{v}");
            assert_eq!(
                p.o.as_ref().map(|o| o.s.owned()),
                value.get("o").map(|o| str_at(o, "s")),
                "{v}"
            );
        }
    }

    /// The last of a repeated key counts; an escaped key is its text.
    #[test]
    fn the_last_of_a_repeated_key_counts() {
        let p: Probe =
            serde_json::from_str(r#"{"s":"a","\u0073":"b","o":{"s":1},"o":{"s":"c"}}"#).unwrap();
        assert_eq!(p.s.as_str(), "b");
        assert_eq!(p.o.unwrap().s.as_str(), "c");
    }

    /// What a `Value` parse refuses is refused here too, in fields nobody
    /// reads as well.
    #[test]
    fn unread_fields_are_checked_as_a_value_parse_checks_them() {
        for bad in [
            r#"{"x":"\ud800"}"#,
            r#"{"x":["\udc00"]}"#,
            r#"{"x":{"y":"\ud83d\u0041"}}"#,
            r#"{"x":1e400}"#,
            r#"{"x":-1e309}"#,
            r#"{"o":{"y":"\ud800"}}"#,
            r#"{"n":"\ud800"}"#,
        ] {
            assert!(serde_json::from_str::<Value>(bad).is_err(), "{bad}");
            assert!(serde_json::from_str::<Probe>(bad).is_err(), "{bad}");
        }
        let long = format!(r#"{{"x":1{}}}"#, "0".repeat(400));
        assert!(serde_json::from_str::<Value>(&long).is_err());
        assert!(serde_json::from_str::<Probe>(&long).is_err());
    }

    /// A string without escapes is borrowed from the line.
    #[test]
    fn plain_strings_are_borrowed() {
        let p: Probe = serde_json::from_str(r#"{"s":"plain","l":["a\nb"]}"#).unwrap();
        assert!(matches!(p.s.0, Some(Cow::Borrowed("plain"))));
        assert!(matches!(p.l.0[0].0, Some(Cow::Owned(_))));
    }
}
