//! What the library knows about operators, as data: their schemas.

pub mod schema;
