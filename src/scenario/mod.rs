//! Scenarios as data: a sim file says who sends what, what goes wrong where, and what must hold.
//!
//! See `docs/sims.md` for the format. Everything here is checked at load time; a problem names
//! file, line and column.
//!
//! `types` holds `Sim` and its parts, `file` the file's shape as serde reads it, `parse` the
//! sections read in order (and `[world]`, and the shared ids), `requests` the `[[request]]`s,
//! `actions` the `[[action]]`s and `[[inject]]`s, `faults` the `[faults]` section.

mod actions;
mod faults;
mod file;
mod parse;
mod requests;
mod types;

pub use requests::intent_body;
pub use types::*;

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use super::file::default_body;
    use super::*;
    use crate::input::InputError;

    fn parse(src: &str) -> Result<Sim, InputError> {
        Sim::parse(Path::new("s.toml"), src)
    }

    #[test]
    fn minimal_sim_has_defaults() {
        let s = parse("[[request]]\nid = \"a\"\nkey = \"k1\"\n").unwrap();
        assert_eq!(s.requests[0].user.as_deref(), Some("u1"));
        assert_eq!(s.requests[0].policy.max_attempts, 1);
        assert_eq!(s.seeds, DEFAULT_SEEDS);
    }

    #[test]
    fn bad_rate_is_located() {
        let e = parse(
            "[[request]]\nid = \"a\"\n[[inject]]\npoint = \"x\"\naction = \"fail\"\nrate = 1.5\n",
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "s.toml:6:8: rate 1.5: expected a probability in 0.0..=1.0");
    }

    #[test]
    fn unknown_after_is_located() {
        let e = parse("[[request]]\nid = \"a\"\nafter = \"b\"\n").unwrap_err();
        assert_eq!(e.to_string(), "s.toml:3:9: after: unknown request or action `b`");
    }

    #[test]
    fn intents_send_different_orders_unless_same_body() {
        let s = parse("[[request]]\nid = \"o\"\nintents = 3\n").unwrap();
        let bodies: Vec<&str> = s.requests.iter().map(|q| q.body.as_str()).collect();
        assert_eq!(
            bodies,
            [
                r#"{"item":"test-item","qty":2}"#,
                r#"{"item":"test-item","qty":3}"#,
                r#"{"item":"test-item","qty":4}"#
            ]
        );
        let s =
            parse("[[request]]\nid = \"o\"\nintents = 3\nsame_body = true\ngap_ms = 5\n").unwrap();
        assert!(s.requests.iter().all(|q| q.body == default_body()));
        let delays: Vec<u64> = s.requests.iter().map(|q| q.delay_us).collect();
        assert_eq!(delays, [0, 5000, 5000]);
        // The first keeps its text as written; the cycle runs through every item.
        let body = r#"{ "qty": 10, "item": "other-item" }"#;
        assert_eq!(intent_body(body, 1).as_deref(), Some(body));
        assert_eq!(intent_body(body, 2).as_deref(), Some(r#"{"item":"test-item","qty":1}"#));
        let all: BTreeSet<String> = (1..=30).map(|n| intent_body(body, n).unwrap()).collect();
        assert_eq!(all.len(), 30);
    }

    #[test]
    fn intents_of_a_body_that_is_no_order_need_same_body() {
        let e = parse("[[request]]\nid = \"o\"\nintents = 2\nbody = \"nope\"\n").unwrap_err();
        assert!(e.to_string().starts_with("s.toml:3:11: intents = 2: each intent sends"), "{e}");
        parse("[[request]]\nid = \"o\"\nintents = 2\nbody = \"nope\"\nsame_body = true\n").unwrap();
        let e = parse("[[request]]\nid = \"o\"\nsame_body = 1\n").unwrap_err();
        assert!(e.to_string().starts_with("s.toml:3:13: "), "{e}");
    }

    #[test]
    fn unknown_action_is_located() {
        let e = parse("[[request]]\nid = \"a\"\n[[inject]]\npoint = \"x\"\naction = \"explode\"\n")
            .unwrap_err();
        assert!(e.to_string().starts_with("s.toml:5:10: unknown inject action `explode`"), "{e}");
    }
}
