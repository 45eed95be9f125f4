//! Every JSON output against its schema (`schemas/<kind>.v1.schema.json`, JSON Schema draft
//! 2020-12), through the real binary: each schema that has a command in [`COMMANDS`] is
//! checked, the output must carry its `format` and `version`, and removing any field the
//! schema requires must make it invalid (so a field that disappears fails here).

use std::path::Path;

use serde_json::Value;

use super::{idemsim, root};

/// The outputs checked: (kind, command). `{dir}` is a folder holding the shard files made
/// first (`one/`: one cell in two shards, `many/`: a matrix in one shard). A kind whose
/// schema is not in `schemas/` yet is skipped; [`SHIPPED`] must all be there.
const COMMANDS: &[(&str, &[&str])] = &[
    ("run", &["run", "double-submit", "--model", "check-first", "--seed", "11", "--json"]),
    ("run", &["run", "relay-crash", "--model", "check-first", "--json"]),
    ("sweep", &["sweep", "double-submit", "--model", "check-first", "--seeds", "0..30", "--json"]),
    ("sweep", &["sweep", "relay-crash", "--model", "check-first", "--json"]),
    ("run", &["run", "check-first-race", "--model", "check-first", "--explore", "pct", "--json"]),
    (
        "sweep",
        &["sweep", "check-first-race", "--model", "check-first", "--explore", "edges", "--json"],
    ),
    (
        "sweep",
        &[
            "sweep",
            "check-first-race",
            "--model",
            "check-first",
            "--explore",
            "exhaustive:50",
            "--json",
        ],
    ),
    ("sweep", &["merge", "{dir}/one", "--json"]),
    ("matrix", &["matrix", "--sims", "check-first-race", "--explore", "pct", "--json"]),
    ("matrix", &["matrix", "--sims", "check-first-race", "--explore", "exhaustive:40", "--json"]),
    (
        "matrix",
        &[
            "matrix",
            "--sims",
            "sims/faults",
            "--models",
            "no-key,check-first,outbox",
            "--seeds",
            "0..4",
            "--json",
        ],
    ),
    ("matrix", &["merge", "{dir}/many", "--json"]),
    (
        "compare",
        &[
            "compare",
            "check-first",
            "transactional",
            "--sims",
            "faults/double-submit.toml",
            "--seeds",
            "0..30",
            "--json",
        ],
    ),
    ("list", &["list", "--json"]),
    ("explain", &["explain", "check-first", "--json"]),
    (
        "explain",
        &[
            "explain",
            "check-first",
            "--sim",
            "check-first-race",
            "--target",
            "violation:lost-effect",
            "--json",
        ],
    ),
    ("explain", &["explain", "update-last-write", "--sim", "10-failure-before-commit", "--json"]),
    // Real runs, against the worked example of docs/targets.md (Python's standard library).
    ("real", &["real", "double-submit", "--target", "example-own-api", "--runs", "2", "--json"]),
    // A controlled real run (docs/controlled.md), its schedules and replays, on the article's
    // check-first server (Node.js).
    (
        "real",
        &[
            "real",
            "check-first-race",
            "--target",
            "check-first",
            "--controlled",
            "--runs",
            "2",
            "--replays",
            "1",
            "--json",
        ],
    ),
    (
        "validate",
        &["validate", "double-submit", "--target", "example-own-api", "--runs", "2", "--json"],
    ),
];

/// The schemas this checkout ships with a command above.
const SHIPPED: &[&str] =
    &["run", "sweep", "matrix", "compare", "list", "explain", "real", "validate"];

/// The shard files the merges read, in a fresh folder.
fn shards() -> std::path::PathBuf {
    let dir = super::conventions::tempfile_dir("schemas");
    let d = dir.to_str().unwrap().to_string();
    for k in ["0/2", "1/2"] {
        let args = ["sweep", "double-submit", "--model", "check-first", "--seeds", "0..20"];
        let (code, _, err) =
            idemsim(&[&args[..], &["--shard", k, "--out-dir", &format!("{d}/one")]].concat());
        assert_eq!(code, 0, "{err}");
    }
    let (code, _, err) = idemsim(&[
        "matrix",
        "--sims",
        "faults/double-submit.toml",
        "--models",
        "check-first,transactional",
        "--seeds",
        "0..6",
        "--shard",
        "0/1",
        "--out-dir",
        &format!("{d}/many"),
    ]);
    assert_eq!(code, 0, "{err}");
    dir
}

/// Every `required` list anywhere in a schema.
fn required_names(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(o) => {
            if let Some(Value::Array(r)) = o.get("required") {
                out.extend(r.iter().filter_map(|n| n.as_str().map(String::from)));
            }
            o.values().for_each(|v| required_names(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| required_names(v, out)),
        _ => {}
    }
}

/// The validator of `schemas/<kind>.v1.schema.json`, itself checked against draft 2020-12.
fn validator(path: &Path) -> (jsonschema::Validator, Value) {
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema", "{path:?}");
    jsonschema::meta::validate(&schema).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    (jsonschema::draft202012::new(&schema).unwrap(), schema)
}

#[test]
fn every_json_output_matches_its_schema() {
    let dir = shards();
    let schemas = root().join("schemas");
    for kind in SHIPPED {
        assert!(schemas.join(format!("{kind}.v1.schema.json")).is_file(), "{kind}");
    }
    let mut checked = 0;
    for (kind, args) in COMMANDS {
        let path = schemas.join(format!("{kind}.v1.schema.json"));
        if !path.is_file() {
            continue;
        }
        let (v, schema) = validator(&path);
        let args: Vec<String> =
            args.iter().map(|a| a.replace("{dir}", dir.to_str().unwrap())).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = idemsim(&args);
        // validate's 4 is "inconclusive": too few rounds to tell, still a whole report.
        assert!(code <= 3 || (*kind == "validate" && code == 4), "{args:?}: exit {code}: {err}");
        let json: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert_eq!(json["format"], format!("idemsim-{kind}"), "{args:?}");
        assert_eq!(json["version"], 1, "{args:?}");
        if let Err(e) = v.validate(&json) {
            panic!(
                "{args:?} does not match schemas/{kind}.v1.schema.json: {e} at {}",
                e.instance_path()
            );
        }
        let mut required = Vec::new();
        required_names(&schema, &mut required);
        for field in json.as_object().unwrap().keys().filter(|k| required.contains(k)) {
            let mut less = json.clone();
            less.as_object_mut().unwrap().remove(field);
            assert!(!v.is_valid(&less), "{args:?}: valid without {field}");
        }
        checked += 1;
    }
    assert!(checked >= 9, "{checked}");
    let _ = std::fs::remove_dir_all(dir);
}
