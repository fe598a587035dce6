//! The form of an MCP elicitation as the TUI asks it: one line per field of the server's
//! flat object schema, each answer typed per the schema (string, number, integer, boolean,
//! enum). Pure: the modal keeps the answers and calls [`ElicitForm::take`].

use serde_json::{Map, Value};

/// One field to ask.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ElicitField {
    /// Its key in the answer.
    pub(crate) name: String,
    /// What the prompt shows (`title`, else the name) with the type and choices.
    pub(crate) label: String,
    kind: String,
    choices: Option<Vec<String>>,
    required: bool,
    default: Option<Value>,
}

/// A form being filled.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ElicitForm {
    /// Fields in schema order (`serde_json` keeps keys sorted; required ones first).
    pub(crate) fields: Vec<ElicitField>,
    /// The values given so far.
    pub(crate) values: Map<String, Value>,
}

impl ElicitForm {
    /// The form of `schema` (JSON text of `requestedSchema`).
    pub(crate) fn parse(schema: &str) -> Result<Self, String> {
        let v: Value =
            serde_json::from_str(schema).map_err(|e| format!("the form is not JSON: {e}"))?;
        let required: Vec<&str> = v
            .get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut fields = Vec::new();
        if let Some(props) = v.get("properties").and_then(Value::as_object) {
            for (name, p) in props {
                let kind = p
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("string")
                    .to_string();
                let choices: Option<Vec<String>> =
                    p.get("enum").and_then(Value::as_array).map(|a| {
                        a.iter()
                            .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_string))
                            .collect()
                    });
                let is_required = required.contains(&name.as_str());
                let title = p.get("title").and_then(Value::as_str).unwrap_or(name);
                let mut label = title.to_string();
                if let Some(d) = p.get("description").and_then(Value::as_str) {
                    label.push_str(&format!(" — {d}"));
                }
                let hint = match (&choices, kind.as_str()) {
                    (Some(c), _) => c.join("/"),
                    (None, "boolean") => "y/n".to_string(),
                    (None, k) => k.to_string(),
                };
                label.push_str(&format!(
                    " [{hint}{}]",
                    if is_required { "" } else { ", optional" }
                ));
                label.push(':');
                fields.push(ElicitField {
                    name: name.clone(),
                    label,
                    kind,
                    choices,
                    required: is_required,
                    default: p.get("default").cloned(),
                });
            }
        }
        fields.sort_by_key(|f| !f.required);
        Ok(Self {
            fields,
            values: Map::new(),
        })
    }

    /// The field being asked, `None` when the form is complete.
    pub(crate) fn current(&self) -> Option<&ElicitField> {
        self.fields.get(self.answered())
    }

    /// How many fields were answered.
    pub(crate) fn answered(&self) -> usize {
        self.fields
            .iter()
            .take_while(|f| self.values.contains_key(&f.name) || self.skipped(f))
            .count()
    }

    fn skipped(&self, f: &ElicitField) -> bool {
        // An optional field left empty is answered by omission; recorded as Null then dropped.
        self.values.get(&f.name).is_some_and(Value::is_null)
    }

    /// Takes `input` as the answer of the current field; `Err` says why it is not valid
    /// (the field is asked again).
    pub(crate) fn answer(&mut self, input: &str) -> Result<(), String> {
        let Some(f) = self.current().cloned() else {
            return Ok(());
        };
        let input = input.trim();
        let value = if input.is_empty() {
            match (&f.default, f.required) {
                (Some(d), _) => d.clone(),
                (None, false) => Value::Null,
                (None, true) => return Err(format!("{} is required", f.name)),
            }
        } else {
            typed(&f, input)?
        };
        self.values.insert(f.name.clone(), value);
        Ok(())
    }

    /// The answers, without the optional fields left empty.
    pub(crate) fn take(&mut self) -> Map<String, Value> {
        std::mem::take(&mut self.values)
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .collect()
    }
}

fn typed(f: &ElicitField, input: &str) -> Result<Value, String> {
    if let Some(c) = &f.choices {
        if !c.iter().any(|x| x == input) {
            return Err(format!("{}: choose one of {}", f.name, c.join(", ")));
        }
    }
    match f.kind.as_str() {
        "boolean" => match input.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" | "1" => Ok(Value::Bool(true)),
            "n" | "no" | "false" | "0" => Ok(Value::Bool(false)),
            _ => Err(format!("{}: answer y or n", f.name)),
        },
        "integer" => input
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("{}: a whole number, please", f.name)),
        "number" => input
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("{}: a number, please", f.name)),
        _ => Ok(Value::String(input.to_string())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_typed_and_checked() {
        let mut f = ElicitForm::parse(
            r#"{"type":"object","properties":{"note":{"type":"string"},"age":{"type":"integer","title":"Age"},
                "ok":{"type":"boolean"},"size":{"type":"string","enum":["s","m"]}},"required":["age","ok","size"]}"#,
        )
        .unwrap();
        assert_eq!(f.current().unwrap().name, "age", "required fields first");
        assert!(f.current().unwrap().label.starts_with("Age [integer]"));
        assert!(f.answer("").unwrap_err().contains("required"));
        assert!(f.answer("x").is_err());
        f.answer("42").unwrap();
        assert!(f.answer("maybe").is_err());
        f.answer("y").unwrap();
        assert!(f.answer("xl").unwrap_err().contains("s, m"));
        f.answer("m").unwrap();
        assert_eq!(f.current().unwrap().name, "note");
        f.answer("").unwrap();
        assert!(f.current().is_none());
        assert_eq!(
            Value::Object(f.take()),
            serde_json::json!({"age": 42, "ok": true, "size": "m"})
        );
    }
}
