//! OpenAPI 3.1 documents generated from the Rust types (feature `openapi`, on with
//! `remote` and `server`): the JSON Schemas of what an API exchanges come from the
//! types themselves (`schemars`, which follows their serde attributes), and each
//! API keeps a table of its operations beside its router. The admin API's and the
//! executor protocol's documents are built this way and committed; a test fails when
//! a committed copy differs from what the code generates.
//!
//! Why `schemars` rather than `utoipa`: it derives schemas from the serde attributes
//! the types already carry (internally tagged enums, `flatten`, `default`,
//! `transparent`), and it emits JSON Schema 2020-12, the dialect of OpenAPI 3.1, so
//! the tests validate answers against the very schemas the document holds.

use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

/// Builds the schema of one type into a document's components.
pub(crate) type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// The schema of `T`, as a reference into the document's components.
pub(crate) fn schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// A parameter of an operation's path.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PathParam {
    pub(crate) name: &'static str,
    /// `string` or `integer`.
    pub(crate) kind: &'static str,
    pub(crate) description: &'static str,
}

/// One operation of an API, as its document describes it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Operation {
    /// `get`, `post`, `put`, `delete`.
    pub(crate) method: &'static str,
    /// The path, with `{name}` parameters.
    pub(crate) path: &'static str,
    pub(crate) id: &'static str,
    pub(crate) tag: &'static str,
    pub(crate) summary: &'static str,
    pub(crate) description: &'static str,
    pub(crate) path_params: &'static [PathParam],
    /// A struct whose fields are the query parameters.
    pub(crate) query: Option<SchemaFn>,
    /// The JSON request body, and whether it may be absent.
    pub(crate) body: Option<(SchemaFn, bool)>,
    /// The answer when it is done: status, description, JSON body (`None`: empty).
    pub(crate) ok: (u16, &'static str, Option<SchemaFn>),
    /// The refusals: status and the error codes it carries.
    pub(crate) refusals: &'static [(u16, &'static str)],
    /// The least role the operation needs (`x-role`); `Some("none")`: no
    /// credentials (the operation's `security` is then empty). `None`: the API has
    /// no roles.
    pub(crate) role: Option<&'static str>,
}

/// What a document holds besides its operations: its `info`, `servers`, `tags` and
/// the components that are not types (security schemes, headers, parameters), the
/// refusal body's type, and what every operation shares.
pub(crate) struct Document {
    pub(crate) info: Value,
    pub(crate) servers: Value,
    pub(crate) tags: Value,
    pub(crate) components: Value,
    /// The `security` of every operation (`None`: the operation's own, or none).
    pub(crate) security: Option<Value>,
    /// The document's top-level `security`, which an operation may lift (`None`:
    /// none).
    pub(crate) root_security: Option<Value>,
    /// Parameters every operation takes (the protocol's signature headers).
    pub(crate) common_params: Value,
    /// Headers every answer carries (the protocol's answer signature).
    pub(crate) response_headers: Option<Value>,
    pub(crate) error: SchemaFn,
}

/// The generator every document uses: JSON Schema 2020-12 with definitions under
/// `#/components/schemas`.
fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "#/components/schemas".into())
        .into_generator()
}

/// The query parameters a struct's schema describes.
fn query_params(f: SchemaFn) -> Vec<Value> {
    let mut inline = SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let schema = f(&mut inline).to_value();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema["properties"]
        .as_object()
        .map(|props| {
            props
                .iter()
                .map(|(name, s)| {
                    let mut s = s.clone();
                    let description = s
                        .as_object_mut()
                        .and_then(|o| o.remove("description"))
                        .unwrap_or(Value::Null);
                    let mut p = json!({
                        "name": name,
                        "in": "query",
                        "required": required.contains(&name.as_str()),
                        "schema": s,
                    });
                    if !description.is_null() {
                        p["description"] = description;
                    }
                    p
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The OpenAPI 3.1 document of `ops`.
pub(crate) fn document(doc: &Document, ops: &[Operation]) -> Value {
    let mut g = generator();
    let error = (doc.error)(&mut g).to_value();
    let mut paths = Map::new();
    for op in ops {
        let mut params: Vec<Value> = doc.common_params.as_array().cloned().unwrap_or_default();
        for p in op.path_params {
            params.push(json!({
                "name": p.name,
                "in": "path",
                "required": true,
                "description": p.description,
                "schema": {"type": p.kind},
            }));
        }
        if let Some(q) = op.query {
            params.extend(query_params(q));
        }
        let answer = |description: &str, schema: Option<Value>| {
            let mut r = json!({"description": description});
            if let Some(h) = &doc.response_headers {
                r["headers"] = h.clone();
            }
            if let Some(s) = schema {
                r["content"] = json!({"application/json": {"schema": s}});
            }
            r
        };
        let mut responses = Map::new();
        let (status, description, body) = op.ok;
        responses.insert(
            status.to_string(),
            answer(description, body.map(|f| f(&mut g).to_value())),
        );
        for (status, codes) in op.refusals {
            responses.insert(
                status.to_string(),
                answer(&format!("Refused: {codes}."), Some(error.clone())),
            );
        }
        let mut operation = json!({
            "operationId": op.id,
            "tags": [op.tag],
            "summary": op.summary,
            "description": op.description,
            "responses": responses,
        });
        if !params.is_empty() {
            operation["parameters"] = Value::Array(params);
        }
        if let Some((f, optional)) = op.body {
            operation["requestBody"] = json!({
                "required": !optional,
                "content": {"application/json": {"schema": f(&mut g).to_value()}},
            });
        }
        if let Some(s) = &doc.security {
            operation["security"] = s.clone();
        }
        if let Some(role) = op.role {
            operation["x-role"] = json!(role);
            if role == "none" {
                operation["security"] = json!([]);
            }
        }
        let item = paths
            .entry(op.path.to_string())
            .or_insert_with(|| json!({}));
        item[op.method] = operation;
    }
    let mut components = doc.components.clone();
    components["schemas"] = Value::Object(g.take_definitions(true));
    let mut document = json!({
        "openapi": "3.1.0",
        "info": doc.info,
        "servers": doc.servers,
        "tags": doc.tags,
        "paths": paths,
        "components": components,
    });
    if let Some(s) = &doc.root_security {
        document["security"] = s.clone();
    }
    document
}

/// `value` as the committed file holds it: pretty JSON and a final newline.
pub(crate) fn to_file(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}
