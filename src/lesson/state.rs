//! The database tables after each step, for the lesson page: the one replay of
//! `history::state` (which the diagrams' state column counts too), re-exported.

pub use crate::history::state::{KeyLine, RowLine, Tables, tables};
