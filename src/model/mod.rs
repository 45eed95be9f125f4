//! Server variants as data: a model file is a step program plus a key policy and a driver.
//!
//! The engine (`world::exec`) implements each step kind once; a model only arranges them.
//! See `docs/models.md` for the format.
//!
//! `types` holds `Model` and its parts, `steps` the step table (every step kind, its name and
//! properties, once), `file` the file's shape as serde reads it, `parse` the sections read in
//! order, `key` the `[key]` section, `checks` the checks across parts (structure, points).

mod checks;
mod dist;
mod file;
mod key;
mod parse;
mod stack;
mod steps;
mod types;

pub use checks::POINTS;
pub use stack::{
    DEFAULT_STACK, MAX_THREADS, Stack, default_stack, from_text as stack_from_text,
    named as named_stack,
};
pub use steps::{STEP_NAMES, STEPS, Step, StepKind};
pub use types::*;

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::input::InputError;

    fn parse(src: &str) -> Result<Model, InputError> {
        Model::parse(Path::new("m.toml"), src)
    }

    #[test]
    fn unknown_step_is_located() {
        let e = parse("program = [\"begin\", \"insert-row\", \"comit\"]").unwrap_err().to_string();
        assert!(e.starts_with("m.toml:1:35: unknown step `comit`"), "{e}");
    }

    #[test]
    fn key_steps_need_a_key_section() {
        let e = parse("program = [\"lookup\", \"insert-row\"]").unwrap_err().to_string();
        assert!(e.contains("m.toml:1:12: step `lookup` needs a [key] section"), "{e}");
    }

    #[test]
    fn unknown_field_is_located() {
        let e =
            parse("program = [\"insert-row\"]\n[key]\nrequird = true\n").unwrap_err().to_string();
        assert!(e.starts_with("m.toml:3:1: unknown field `requird`"), "{e}");
    }

    #[test]
    fn unbalanced_transaction() {
        let e = parse("program = [\"begin\", \"insert-row\"]").unwrap_err().to_string();
        assert!(e.contains("ends inside a transaction"), "{e}");
    }
}
