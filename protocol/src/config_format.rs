//! How settings read from a file are written (feature `serde`): durations as
//! human-readable strings, and `"off"` for a setting that can be turned off.
//!
//! The server's, the client's and the Redis backplane's settings use these
//! adapters with `#[serde(with = "…")]`; an application's own settings can
//! use them too:
//!
//! - [`duration`]: a [`Duration`] as `"30s"`, `"250ms"`, `"1m 30s"` or
//!   `"2h"` ([humantime](https://docs.rs/humantime)'s format). A bare
//!   number is refused: its unit would be a guess.
//! - [`duration_or_off`]: an `Option<Duration>`, `"off"` for `None`.
//! - [`number_or_off`]: an `Option` of an unsigned integer, `"off"` for
//!   `None`.
//! - [`table_or_off`]: an `Option` of a struct (a TOML table), `"off"` for
//!   `None`.
//!
//! A file cannot say "none" otherwise: TOML has no null, and a missing key
//! takes the setting's default, which for these settings is not `None`.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Unexpected, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The word that turns a setting off.
pub const OFF: &str = "off";

/// Examples of durations, for error messages.
const DURATION_EXAMPLES: &str = r#"a duration with its unit, such as "30s", "250ms" or "1m 30s""#;

/// A [`Duration`] as a human-readable string: `"30s"`, `"250ms"`,
/// `"1m 30s"`. Serialized the same way (`Duration::from_secs(120)` is
/// `"2m"`).
pub mod duration {
    use super::*;

    /// Writes `value` as `"1m 30s"`.
    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_duration(*value))
    }

    /// Reads a duration such as `"30s"`; anything else is an error that
    /// says what is expected.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        deserializer
            .deserialize_any(DurationVisitor { off: false })
            // Without `off`, the visitor never gives `None`.
            .map(|duration| duration.unwrap_or_default())
    }
}

/// An `Option<Duration>`: `"off"` is `None`, anything else a duration as
/// in [`duration`].
pub mod duration_or_off {
    use super::*;

    /// Writes `None` as `"off"`, a duration as `"1m 30s"`.
    pub fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => serializer.collect_str(&humantime::format_duration(*value)),
            None => serializer.serialize_str(OFF),
        }
    }

    /// Reads `"off"` or a duration.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        deserializer.deserialize_any(DurationVisitor { off: true })
    }
}

/// Writes `None` as `"off"`, a value as itself.
fn some_or_off<T: Serialize, S: Serializer>(
    value: &Option<T>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => value.serialize(serializer),
        None => serializer.serialize_str(OFF),
    }
}

/// An `Option` of an unsigned integer (`u16`, `u32`, `u64`, `usize`):
/// `"off"` is `None`. A number that does not fit is an error naming the
/// type's range.
pub mod number_or_off {
    use super::*;

    /// Writes `None` as `"off"`, a number as itself.
    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Option<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        some_or_off(value, serializer)
    }

    /// Reads `"off"` or a number in `T`'s range.
    pub fn deserialize<'de, T, D>(deserializer: D) -> Result<Option<T>, D::Error>
    where
        T: TryFrom<u64>,
        D: Deserializer<'de>,
    {
        deserializer.deserialize_any(NumberVisitor(PhantomData))
    }
}

/// An `Option` of a struct: a table gives `Some` (its missing keys take
/// their defaults, its unknown keys are errors as the struct says), `"off"`
/// gives `None`.
pub mod table_or_off {
    use super::*;

    /// Writes `None` as `"off"`, a value as its table.
    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Option<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        some_or_off(value, serializer)
    }

    /// Reads `"off"` or a table.
    pub fn deserialize<'de, T, D>(deserializer: D) -> Result<Option<T>, D::Error>
    where
        T: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        deserializer.deserialize_any(TableVisitor(PhantomData))
    }
}

/// Reads a duration string, and `"off"` as `None` when `off` is set.
struct DurationVisitor {
    off: bool,
}

impl DurationVisitor {
    /// What is expected, for error messages.
    fn expected(&self) -> String {
        if self.off {
            format!(r#"{DURATION_EXAMPLES}, or "{OFF}""#)
        } else {
            DURATION_EXAMPLES.to_owned()
        }
    }
}

impl Visitor<'_> for DurationVisitor {
    type Value = Option<Duration>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.expected())
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Option<Duration>, E> {
        if self.off && text == OFF {
            return Ok(None);
        }
        humantime::parse_duration(text).map(Some).map_err(|error| {
            E::custom(format_args!(
                "invalid duration {text:?} ({error}): expected {}",
                self.expected()
            ))
        })
    }

    fn visit_i64<E: de::Error>(self, number: i64) -> Result<Option<Duration>, E> {
        Err(E::custom(format_args!(
            "a duration needs a unit: expected {}, not {number}",
            self.expected()
        )))
    }

    fn visit_u64<E: de::Error>(self, number: u64) -> Result<Option<Duration>, E> {
        Err(E::custom(format_args!(
            "a duration needs a unit: expected {}, not {number}",
            self.expected()
        )))
    }

    fn visit_f64<E: de::Error>(self, number: f64) -> Result<Option<Duration>, E> {
        Err(E::custom(format_args!(
            "a duration needs a unit: expected {}, not {number}",
            self.expected()
        )))
    }
}

/// Reads an unsigned number into `T`, or `"off"` as `None`.
struct NumberVisitor<T>(PhantomData<T>);

impl<T: TryFrom<u64>> Visitor<'_> for NumberVisitor<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, r#"a whole number of at least 0, or "{OFF}""#)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Option<T>, E> {
        if text == OFF {
            Ok(None)
        } else {
            Err(E::invalid_value(Unexpected::Str(text), &self))
        }
    }

    fn visit_u64<E: de::Error>(self, number: u64) -> Result<Option<T>, E> {
        T::try_from(number).map(Some).map_err(|_| {
            E::custom(format_args!(
                "{number} does not fit this setting (a {})",
                std::any::type_name::<T>()
            ))
        })
    }

    fn visit_i64<E: de::Error>(self, number: i64) -> Result<Option<T>, E> {
        match u64::try_from(number) {
            Ok(number) => self.visit_u64(number),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(number), &self)),
        }
    }
}

/// Reads a table into `T`, or `"off"` as `None`.
struct TableVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for TableVisitor<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, r#"a table of settings, or "{OFF}""#)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Option<T>, E> {
        if text == OFF {
            Ok(None)
        } else {
            Err(E::invalid_value(Unexpected::Str(text), &self))
        }
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Option<T>, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use serde::de::IntoDeserializer;
    use serde::de::value::Error;

    use super::*;

    fn read_duration(text: &str) -> Result<Duration, Error> {
        duration::deserialize(text.into_deserializer())
    }

    #[test]
    fn durations_read_with_their_units() {
        assert_eq!(read_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(read_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(read_duration("1m 30s").unwrap(), Duration::from_secs(90));
        assert_eq!(read_duration("2h").unwrap(), Duration::from_secs(7200));
    }

    #[test]
    fn a_duration_without_a_unit_is_refused_with_an_example() {
        let error = read_duration("30").unwrap_err().to_string();
        assert!(error.contains(r#"invalid duration "30""#), "{error}");
        assert!(error.contains(r#""250ms""#), "{error}");
        let error = duration::deserialize(30u64.into_deserializer())
            .map_err(|error: Error| error.to_string())
            .unwrap_err();
        assert!(error.contains("a duration needs a unit"), "{error}");
        assert!(
            read_duration("off").is_err(),
            "off is only for optional settings"
        );
    }

    #[test]
    fn off_turns_optional_settings_off() {
        let read = |text: &str| -> Result<Option<Duration>, Error> {
            duration_or_off::deserialize(text.into_deserializer())
        };
        assert_eq!(read("off").unwrap(), None);
        assert_eq!(read("1m").unwrap(), Some(Duration::from_secs(60)));
        assert!(read("of").unwrap_err().to_string().contains(r#"or "off""#));

        let number = |value: i64| -> Result<Option<u32>, Error> {
            number_or_off::deserialize(value.into_deserializer())
        };
        assert_eq!(number(1000).unwrap(), Some(1000));
        assert!(number(-1).is_err());
        let error = number(1 << 40).unwrap_err().to_string();
        assert!(
            error.contains("does not fit this setting (a u32)"),
            "{error}"
        );
        let off: Result<Option<u32>, Error> = number_or_off::deserialize("off".into_deserializer());
        assert_eq!(off.unwrap(), None);
        let error = number_or_off::deserialize::<u32, _>("none".into_deserializer())
            .map_err(|error: Error| error.to_string())
            .unwrap_err();
        assert!(error.contains(r#"or "off""#), "{error}");
    }
}
