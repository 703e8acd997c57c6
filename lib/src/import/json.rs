//! Small accessors over `serde_json::Value` that fail with messages naming
//! what was expected, for the archive's JSON members.

use serde_json::{Map, Value as Json};

use crate::error::{Error, Result};

pub fn kind_of(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a bool",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}

pub fn obj<'a>(v: &'a Json, what: &str) -> Result<&'a Map<String, Json>> {
    v.as_object().ok_or_else(|| {
        Error::bad_input(format!("{what}: expected an object, found {}", kind_of(v)))
    })
}

pub fn arr<'a>(v: &'a Json, what: &str) -> Result<&'a Vec<Json>> {
    v.as_array()
        .ok_or_else(|| Error::bad_input(format!("{what}: expected a list, found {}", kind_of(v))))
}

/// A field that must be present.
pub fn req<'a>(m: &'a Map<String, Json>, key: &str) -> Result<&'a Json> {
    m.get(key)
        .ok_or_else(|| Error::bad_input(format!("field '{key}' is missing")))
}

/// A field that may be absent or null.
pub fn opt<'a>(m: &'a Map<String, Json>, key: &str) -> Option<&'a Json> {
    m.get(key).filter(|v| !v.is_null())
}

pub fn int(v: &Json, what: &str) -> Result<i64> {
    v.as_i64()
        .ok_or_else(|| Error::bad_input(format!("{what}: expected an integer, found {v}")))
}

/// A float; non-finite values are the strings `Infinity`, `-Infinity`, `NaN`.
pub fn float(v: &Json, what: &str) -> Result<f64> {
    match v {
        Json::Number(n) => n
            .as_f64()
            .ok_or_else(|| Error::bad_input(format!("{what}: bad float"))),
        Json::String(s) if s == "Infinity" => Ok(f64::INFINITY),
        Json::String(s) if s == "-Infinity" => Ok(f64::NEG_INFINITY),
        Json::String(s) if s == "NaN" => Ok(f64::NAN),
        _ => Err(Error::bad_input(format!(
            "{what}: expected a float, found {v}"
        ))),
    }
}

pub fn boolean(v: &Json, what: &str) -> Result<bool> {
    v.as_bool()
        .ok_or_else(|| Error::bad_input(format!("{what}: expected a bool, found {v}")))
}

pub fn string<'a>(v: &'a Json, what: &str) -> Result<&'a str> {
    v.as_str()
        .ok_or_else(|| Error::bad_input(format!("{what}: expected a string, found {}", kind_of(v))))
}

/// A `_Union` value: an object with exactly one key.
pub fn union<'a>(v: &'a Json, what: &str) -> Result<(&'a str, &'a Json)> {
    let m = obj(v, what)?;
    let mut it = m.iter();
    match (it.next(), it.next()) {
        (Some((k, v)), None) => Ok((k.as_str(), v)),
        _ => Err(Error::bad_input(format!(
            "{what}: expected an object with exactly one key, found {} keys",
            m.len()
        ))),
    }
}

/// The `name` of a `TensorArgument`-like object.
pub fn name_field<'a>(v: &'a Json, what: &str) -> Result<&'a str> {
    string(
        req(obj(v, what)?, "name").map_err(|e| e.at(what.to_string()))?,
        what,
    )
}
