//! Argument helpers the tools of several families share: numbers as models send them, and
//! result limits checked against their documented range.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::error::{ToolError, ToolResult};

/// A result limit within `1..=max`.
pub fn limit(value: Option<i64>, default: usize, max: usize) -> ToolResult<usize> {
    match value {
        None => Ok(default),
        Some(n) if n >= 1 && n as usize <= max => Ok(n as usize),
        Some(n) => Err(ToolError::invalid(format!(
            "limit must be between 1 and {max} (got {n})"
        ))),
    }
}

/// Deserializes a JSON number that is a whole number (`5` or `5.0`; also `"5"`, which
/// models sometimes send), so "number" parameters accept what clients produce.
pub fn whole_number<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let v = Value::deserialize(d)?;
    as_whole(&v)
        .ok_or_else(|| serde::de::Error::custom(format!("expected a whole number, got {v}")))
}

pub fn optional_whole_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let v = Value::deserialize(d)?;
    if v.is_null() {
        return Ok(None);
    }
    as_whole(&v)
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("expected a whole number, got {v}")))
}

pub fn as_whole(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            let f = n.as_f64()?;
            (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}
