//! OpenAPI documents in tests: the committed copy against the one the code
//! generates, and answers validated against the document's schemas with the
//! `jsonschema` crate (JSON Schema 2020-12, the dialect of OpenAPI 3.1).

use serde_json::{Value, json};

/// Checks that the committed file at `path` (from the crate's root) equals
/// `generated`. With `JOBWHEEL_WRITE_OPENAPI=1` it writes `generated` there first
/// (and says so): the way to update the committed copy after a change of the API.
pub fn committed_equals(path: &str, generated: &str) {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    if std::env::var("JOBWHEEL_WRITE_OPENAPI").as_deref() == Ok("1") {
        std::fs::write(&full, generated).unwrap();
        println!("wrote {path}");
    }
    let committed = std::fs::read_to_string(&full).unwrap();
    assert!(
        committed == generated,
        "{path} differs from the document the code generates; \
         JOBWHEEL_WRITE_OPENAPI=1 cargo test … rewrites it (then review the diff)"
    );
}

/// Every object schema that lists properties, closed: a value's property the schema
/// does not document is an error (`unevaluatedProperties: false`, which also sees
/// the properties of `allOf` parts).
fn closed(mut schema: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(o) => {
                if o.contains_key("properties")
                    && !o.contains_key("additionalProperties")
                    && !o.contains_key("unevaluatedProperties")
                {
                    o.insert("unevaluatedProperties".into(), Value::Bool(false));
                }
                for (_, child) in o.iter_mut() {
                    walk(child);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut schema);
    schema
}

/// Validates `value` against `schema`, a schema of `doc` whose `$ref`s point into
/// `#/components/schemas`; objects are closed (see [`closed`]). The error lists each
/// mismatch with its place in the value.
pub fn conforms(doc: &Value, schema: &Value, value: &Value) -> Result<(), String> {
    let root = closed(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": {"schemas": doc["components"]["schemas"]},
        "allOf": [schema],
    }));
    let validator = jsonschema::validator_for(&root).map_err(|e| format!("the schema: {e}"))?;
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// The schema of the answer of `method path` with `status` in `doc`.
pub fn answer_schema<'a>(
    doc: &'a Value,
    method: &str,
    path: &str,
    status: u16,
) -> Option<&'a Value> {
    doc["paths"][path][method.to_ascii_lowercase()]["responses"][status.to_string()]["content"]
        ["application/json"]["schema"]
        .as_object()
        .map(|_| &doc["paths"][path][method.to_ascii_lowercase()]["responses"][status.to_string()]["content"]["application/json"]["schema"])
}

/// The schema of the request body of `method path` in `doc`.
pub fn request_schema<'a>(doc: &'a Value, method: &str, path: &str) -> &'a Value {
    &doc["paths"][path][method.to_ascii_lowercase()]["requestBody"]["content"]["application/json"]["schema"]
}
