//! Templates in target files: `${name}` placeholders in a request's path, headers and body,
//! and in the command and environment of server and service processes. `$${` is a literal
//! `${`. What a name means comes from the caller (a request's key, user, body fields; a
//! round's ports); how a value is written depends on where it goes ([`Mode`]).

use serde_json::Value;

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Var(String),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

/// How a value is written into the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// As text (a header, an argument, an environment value): a string without quotes.
    Text,
    /// As JSON (a body): a string quoted and escaped, a number or an object as it is, a
    /// missing value as `null`.
    Json,
    /// As a path segment: text with every byte outside `A-Za-z0-9-._~` percent-encoded.
    Path,
}

impl Template {
    /// Parse `text`; `known` says whether a name may be used (an error names it otherwise).
    pub fn parse(text: &str, known: &dyn Fn(&str) -> bool) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        let mut lit = String::new();
        while let Some(i) = rest.find('$') {
            lit.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            if let Some(more) = after.strip_prefix("${") {
                lit.push_str("${");
                rest = more;
            } else if let Some(inner) = after.strip_prefix('{') {
                let end =
                    inner.find('}').ok_or_else(|| format!("`${{` without `}}` in {text:?}"))?;
                let name = inner[..end].trim();
                if !known(name) {
                    return Err(format!("unknown placeholder `${{{name}}}` in {text:?}"));
                }
                if !lit.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut lit)));
                }
                parts.push(Part::Var(name.to_string()));
                rest = &inner[end + 1..];
            } else {
                lit.push('$');
                rest = after;
            }
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            parts.push(Part::Text(lit));
        }
        Ok(Template { parts })
    }

    /// The names it uses.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(n) => Some(n.as_str()),
            Part::Text(_) => None,
        })
    }

    /// Fill it in; None when a name has no value and the mode cannot write a missing one
    /// (text and paths: the header or argument is then left out by the caller).
    pub fn render(&self, mode: Mode, value: &dyn Fn(&str) -> Option<Value>) -> Option<String> {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Var(name) => match (value(name), mode) {
                    (None, Mode::Json) => out.push_str("null"),
                    (None, _) => return None,
                    (Some(v), Mode::Json) => out.push_str(&v.to_string()),
                    (Some(v), Mode::Text) => out.push_str(&as_text(&v)),
                    (Some(v), Mode::Path) => out.push_str(&percent(&as_text(&v))),
                },
            }
        }
        Some(out)
    }
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn percent(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_are_filled_as_their_place_needs() {
        let any = |_: &str| true;
        let t = Template::parse(r#"{"sku": ${body.item}, "n": ${body.qty}, "k": ${key}}"#, &any)
            .unwrap();
        let v = |n: &str| match n {
            "body.item" => Some(json!("bo\"ok")),
            "body.qty" => Some(json!(2)),
            _ => None,
        };
        assert_eq!(t.render(Mode::Json, &v).unwrap(), r#"{"sku": "bo\"ok", "n": 2, "k": null}"#);
        let h = Template::parse("Bearer ${body.item}", &any).unwrap();
        assert_eq!(h.render(Mode::Text, &v).unwrap(), "Bearer bo\"ok");
        assert_eq!(Template::parse("${key}", &any).unwrap().render(Mode::Text, &v), None);
        let p = Template::parse("/orders/${body.item}", &any).unwrap();
        assert_eq!(p.render(Mode::Path, &v).unwrap(), "/orders/bo%22ok");
        let lit = Template::parse("cost $5, $${x}", &any).unwrap();
        assert_eq!(lit.render(Mode::Text, &v).unwrap(), "cost $5, ${x}");
        let e = Template::parse("${nope}", &|n| n == "key").unwrap_err();
        assert!(e.contains("unknown placeholder `${nope}`"), "{e}");
        assert!(Template::parse("${key", &any).unwrap_err().contains("without `}`"));
    }
}
