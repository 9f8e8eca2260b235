//! Answers against the OpenAPI document's schemas: the JSON types, required and
//! refused properties and array items of what each operation answered, for each
//! status. Local `$ref`s (`#/components/…`) are followed. An object schema with
//! `properties` is closed unless its `additionalProperties` says otherwise, so every
//! field an answer carries is documented. Keywords other than `type`, `properties`,
//! `required`, `additionalProperties` and `items` are not checked.

use serde_json::Value;

/// Follows a local `$ref` to what it names.
fn resolve<'a>(doc: &'a Value, mut v: &'a Value) -> &'a Value {
    for _ in 0..8 {
        let Some(r) = v.get("$ref").and_then(Value::as_str) else {
            return v;
        };
        let pointer = r.strip_prefix('#').expect("local references only");
        v = doc
            .pointer(pointer)
            .unwrap_or_else(|| panic!("the document has no {r}"));
    }
    panic!("references nest too deep")
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Checks `value` against `schema`; each mismatch is pushed to `errors` with its path.
pub fn check(doc: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let schema = resolve(doc, schema);
    if let Some(t) = schema.get("type") {
        let allowed: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let got = type_of(value);
        let fits = allowed
            .iter()
            .any(|a| *a == got || (*a == "number" && got == "integer"));
        if !fits {
            errors.push(format!("{at}: a {got}, documented as {allowed:?}"));
            return;
        }
    }
    if let (Some(props), Value::Object(obj)) = (schema.get("properties"), value) {
        let props = props.as_object().unwrap();
        for (k, v) in obj {
            match props.get(k) {
                Some(s) => check(doc, s, v, &format!("{at}.{k}"), errors),
                // Objects with documented properties are closed unless they say
                // otherwise, so an answer's new field must be documented.
                None if schema
                    .get("additionalProperties")
                    .is_none_or(|a| a == false) =>
                {
                    errors.push(format!("{at}.{k}: not documented"));
                }
                None => {}
            }
        }
        for k in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let k = k.as_str().unwrap();
            if !obj.contains_key(k) {
                errors.push(format!("{at}.{k}: required, missing"));
            }
        }
    }
    if let (Some(items), Value::Array(a)) = (schema.get("items"), value) {
        for (i, v) in a.iter().enumerate() {
            check(doc, items, v, &format!("{at}[{i}]"), errors);
        }
    }
}

/// The documented JSON schema of `method path`'s answer with `status`, if any.
pub fn answer_schema<'a>(
    doc: &'a Value,
    method: &str,
    path: &str,
    status: u16,
) -> Option<&'a Value> {
    let op = &doc["paths"][path][method.to_lowercase()];
    let response = resolve(doc, op["responses"].get(status.to_string())?);
    response.pointer("/content/application~1json/schema")
}
